"""The word lists of LexicalNLI and the word classes (bit flags) they give a token.

What a word is to the scorer: a number, a date part, a negation, a quantifier, a
superlative, an antonym pole, a name (capitalised mid-sentence) or a stopword, plus the
number words and the qualifiers that turn a number into a range ("more than", "about").
:mod:`.tokens` sets the flags, :mod:`.numbers` reads the number words, :mod:`.align` the
antonym poles. Quantity and negation words are deliberately not stopwords.
"""

from __future__ import annotations

from ...text import FUNCTION_WORDS

# --------------------------------------------------------------------------- word classes

F_NUM = 1 << 0  # a number (digits or number word)
F_DATE = 1 << 1  # a year, decade, century ordinal before "century", month, or AD/BC
F_MONTH = 1 << 2
F_NEG = 1 << 3
F_QUANT = 1 << 4
F_SUPER = 1 << 5
F_ANT = 1 << 6  # has an antonym pole (see _ANTONYMS)
F_CAP = 1 << 7  # capitalised, not at sentence start: a named-entity proxy
F_STOP = 1 << 8

_STOPWORDS = FUNCTION_WORDS  # models/text.py
# Quantity and negation words are deliberately *not* stopwords: they carry substance.
_NEGATIONS = frozenset("not no never none nobody nothing neither nor without nowhere cannot".split())
_QUANTIFIERS = frozenset(
    """
    all every each some many most few fewer several none any majority minority half both only less more
    least much little always sometimes often rarely seldom usually mostly entire whole partly partially
    """.split()
)
_SUPERLATIVES = frozenset(
    """
    largest smallest biggest greatest highest lowest longest shortest oldest youngest newest earliest
    latest fastest slowest tallest deepest shallowest heaviest lightest strongest weakest richest
    poorest best worst most least first last nearest closest farthest furthest widest narrowest
    densest cheapest costliest brightest darkest loudest quietest deadliest safest hardest easiest
    finest hottest coldest warmest coolest wettest driest busiest bloodiest loftiest
    """.split()
)
# Antonym poles: word -> (group, pole). A swap from one pole to another of the same group
# between the differing spans is a contradiction cue.
_ANTONYM_GROUPS: tuple[tuple[tuple[str, ...], ...], ...] = (
    (("before", "prior", "preceding", "earlier"), ("after", "following", "later", "subsequently")),
    (("first", "earliest", "initial"), ("last", "latest", "final")),
    (("largest", "biggest", "greatest", "highest", "longest", "tallest", "most", "maximum"),
     ("smallest", "lowest", "shortest", "least", "minimum")),
    (("more", "greater", "larger", "higher", "bigger", "longer", "above", "over", "exceeds", "exceeded"),
     ("fewer", "less", "smaller", "lower", "shorter", "below", "under")),
    (("increase", "increased", "increases", "rose", "rise", "rises", "risen", "grew", "grow", "grows",
      "gain", "gained", "expanded", "raised", "boosted"),
     ("decrease", "decreased", "decreases", "fell", "fall", "falls", "fallen", "shrank", "shrink",
      "declined", "decline", "lost", "reduced", "cut", "lowered")),
    (("won", "win", "wins", "winner", "victory", "defeated", "beat"), ("lost", "lose", "loses", "loser", "defeat")),
    (("north", "northern"), ("south", "southern")),
    (("east", "eastern"), ("west", "western")),
    (("oldest", "ancient", "older"), ("youngest", "newest", "modern", "younger", "newer")),
    (("all", "every", "always", "entire", "whole"), ("some", "few", "sometimes", "partly", "partially", "none", "never")),
    (("inside", "internal", "interior"), ("outside", "external", "exterior")),
    (("legal", "lawful", "permitted", "allowed"), ("illegal", "unlawful", "banned", "forbidden", "prohibited")),
    (("accepted", "approved", "ratified", "passed"), ("rejected", "vetoed", "refused", "failed")),
    (("success", "successful", "succeeded"), ("failure", "unsuccessful", "failed")),
    (("began", "begin", "start", "started", "opened", "founded"), ("ended", "end", "finished", "closed", "abolished")),
    (("import", "imports", "imported"), ("export", "exports", "exported")),
    (("public", "state"), ("private",)),
    (("male", "men", "man"), ("female", "women", "woman")),
    (("hot", "warm", "warmer", "hotter"), ("cold", "cool", "cooler", "colder")),
    (("wet", "wetter", "humid"), ("dry", "drier", "arid")),
    (("heavy", "heavier"), ("light", "lighter")),
    (("same", "identical"), ("different",)),
    (("true", "correct"), ("false", "incorrect")),
    (("majority",), ("minority",)),
)
_ANTONYMS: dict[str, list[tuple[int, int]]] = {}
for _g, _poles in enumerate(_ANTONYM_GROUPS):
    for _p, _words in enumerate(_poles):
        for _w in _words:
            _ANTONYMS.setdefault(_w, []).append((_g, _p))

_MONTHS = frozenset(
    "january february march april june july august september october november december".split()
)  # "may" is a month only when capitalised mid-sentence (see tokens._tokenize)
_UNITS = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15,
    "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19,
}
_TENS = {"twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90}
_ORD_UNITS = {
    "first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "sixth": 6, "seventh": 7, "eighth": 8,
    "ninth": 9, "tenth": 10, "eleventh": 11, "twelfth": 12, "thirteenth": 13, "fourteenth": 14,
    "fifteenth": 15, "sixteenth": 16, "seventeenth": 17, "eighteenth": 18, "nineteenth": 19,
}
_ORD_TENS = {"twentieth": 20, "thirtieth": 30, "fortieth": 40, "fiftieth": 50, "sixtieth": 60,
             "seventieth": 70, "eightieth": 80, "ninetieth": 90}
_SCALES = {"hundred": 100, "thousand": 1_000, "million": 1_000_000, "billion": 1_000_000_000,
           "trillion": 1_000_000_000_000, "dozen": 12, "hundreds": 100, "thousands": 1_000,
           "millions": 1_000_000, "billions": 1_000_000_000}
# Number words that are too ambiguous alone ("one of the", "second largest"): numbers only
# next to another number token or a unit-like word. Handled in numbers._numbers.
_WEAK_NUMBER_WORDS = frozenset({"one", "first", "second"})
_DATE_MARKERS = frozenset({"ad", "bc", "bce", "ce"})
_CENTURY_WORDS = frozenset({"century", "centuries"})
_DECADE_WORDS = frozenset({"decade", "decades"})
_UPPER = frozenset({"more", "over", "above", "exceeding", "exceeded", "least", "beyond", "upwards"})  # value >= x
_LOWER = frozenset({"fewer", "less", "under", "below", "most", "nearly", "almost", "barely", "short"})  # value <= x
_QUALIFIER_WORDS = frozenset(
    "more over above exceeding least beyond fewer less under below most nearly almost barely than at up to "
    "about around roughly approximately circa some c approx estimated early late mid the".split()
)
_APPROX = frozenset({"about", "around", "roughly", "approximately", "circa", "some", "nearly", "almost", "c", "approx", "estimated"})
