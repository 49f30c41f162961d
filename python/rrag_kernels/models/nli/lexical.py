"""LexicalNLI: a model-free NLI scorer for minimal-edit sentence pairs.

What it is for
--------------
MIRAGE only sends NLI the cross-source claim pairs that already share most of their words
(token overlap >= 0.62), and minimal-edit misinformation changes one checkable fact of a
sentence while keeping the rest. For such pairs the *differences* carry the verdict, and
they can be read off a word alignment without a model.

How it decides
--------------
1. **Tokens** (:func:`_tokenize`). Lower-cased word tokens; numbers ("1,500", "7.2",
   "1840s", "17th", "fifty-six", "seven") are single tokens; "n't" and "cannot" become
   "not"; a possessive "'s" is its own token. Each token gets a light suffix-stripped
   *key* for matching ("identified" ~ "identifies") and a bit-mask of word classes:
   number, date (4-digit year, decade, "... century", AD/BC, month), negation (not, no,
   never, none, without, ...), quantifier (all, some, most, few, only, ...), superlative,
   antonym pole (before/after, largest/smallest, rose/fell, won/lost, ...: see
   ``_ANTONYM_GROUPS``), capitalised-not-at-sentence-start (a named-entity proxy; a
   sentence-initial word counts when the next word is capitalised too) and stopword.
   Number mentions are parsed into value ranges: "in the eighteenth century" is 1701-1800,
   "1840s" 1840-1849, "more than forty" [40, inf), "about 150" [127.5, 172.5].
2. **Alignment** (:func:`rrag_kernels.ops.lexical_opcodes`, defined by
   :func:`rrag_kernels.reference.lexical_align.pair_opcodes_ref`). The two key sequences
   are aligned like ``difflib.SequenceMatcher(autojunk=False)`` (common prefix and suffix
   first, then longest matching blocks), giving equal / replace / insert / delete spans. A replace
   span with at most :data:`MAX_SWAP` (4) tokens on each side is a *swap*: one fact
   exchanged for another. Longer replaced spans count as a deleted clause plus an added
   one.
3. **Cues** (:func:`_align_features`, returning :class:`Features`):

   * number / date conflict: a hypothesis number inside a swap that no comparable
     premise number (same kind: quantity, year-like or percent; same unit word if both
     have one) is compatible with (value ranges overlap), while the swapped premise span
     held such a number (always for years); a month swapped for another month;
   * negation flip: the negations inside short edits (swaps, insertions and deletions of
     at most MAX_SWAP tokens) differ in parity between the two sides;
   * antonym swap: a word only the premise has and a word only the hypothesis has sit at
     opposite poles of one antonym group;
   * superlative / quantifier swap: a swap exchanges one for another that is not a
     synonym of the same pole ("highest" -> "tallest" is fine);
   * entity swap: a swap exchanges a name of the premise for a name the premise lacks;
   * new content: hypothesis content words whose key the premise lacks (words of a
     number phrase compatible with a premise number do not count: "in the 1950s" for
     "in 1953");
   * moved content: hypothesis content words that the premise has, but out of the
     alignment (reordered); voice change: the two texts use "by" a different number of
     times (passive <-> active).

4. **Outcome** (:func:`decide`, checked in this order), each with a fixed row of
   probabilities (:data:`DEFAULT_TABLE`, columns entailment / neutral / contradiction):

   =====================  ==================================================  ==================
   outcome                when                                                probabilities
   =====================  ==================================================  ==================
   ``unknown``            the premise covers < ``min_coverage`` (0.5) of the   0.20 / 0.65 / 0.15
                          hypothesis's tokens: not a minimal edit, nothing
                          is claimed
   ``contradiction``      a number/date conflict, negation flip, antonym or    0.05 / 0.10 / 0.85
                          superlative/quantifier swap
   ``contradiction_weak`` an entity swap; or >= ``min_moved`` (2) content      0.10 / 0.30 / 0.60
                          words reordered with no change of voice and at most
                          ``max_new_content`` new ones (a role swap: "A
                          defeated B" -> "B defeated A")
   ``entailment``         at most ``max_new_content`` (1) new content word     0.85 / 0.10 / 0.05
                          and no new number: the hypothesis adds nothing of
                          substance (a sub-sequence, a dropped conjunct)
   ``entailment_weak``    the same, with content words reordered (passive /    0.60 / 0.30 / 0.10
                          active)
   ``neutral``            otherwise: the hypothesis adds content               0.10 / 0.80 / 0.10
   =====================  ==================================================  ==================

With an ``embedder`` (any object with ``.encode(list[str]) -> (n, d)``, e.g.
:class:`rrag_kernels.models.MiniLMEmbedder` on all-MiniLM-L6-v2), only the
``unknown`` rows change: cosine >= ``cos_entail`` (0.70) gives ``entailment_weak``,
cosine < ``cos_neutral`` (0.50) gives ``neutral``, in between the row stays ``unknown``.

The thresholds (MAX_SWAP, min_coverage, max_new_content, cos_entail) were chosen on
``../shared/data/nli/train_1..4.jsonl``; ``train_5`` is the validation split.

What it catches, what it misses
-------------------------------
It catches the minimal-edit phenomena whose difference is visible in the words of a short
edit: number, year, century and month swaps (with "more than" / "about" / century and
decade ranges understood, so "in the 1950s" does not contradict "in 1953"); inserted or
removed negations; quantifier, superlative and antonym swaps from its word lists; name
and place swaps between capitalised names; word-order role swaps when nothing else
changes; dropped conjuncts and other sub-sequence entailments; added details that bring
new content words (neutral).

It misses everything that needs meaning rather than words. Paraphrases and
generalisations with few shared words come out ``unknown`` (mostly neutral; with an
embedder, high-cosine pairs become weak entailments, and so do high-cosine
contradictions, which the cosine cannot tell apart). Causal and temporal reversals,
misleading reframes and fabricated conflicts phrased in new words are called neutral or
unknown. A fact swapped inside a long rewritten span is read as a dropped plus an added
clause (neutral). Synonym numbers it cannot convert ("a quarter of a century" for 27
years; durations against dates), lower-case entities ("a Mexican firm"), antonyms and
quantifiers outside its lists and sentence-initial single names are missed; passive /
active rewrites and role swaps are told apart only by the word "by". Any added content
word makes a pair neutral unless a contradiction cue fires, so implied facts in new
words are called neutral. Its probabilities are fixed rows, not calibrated confidences.

The hot path (tokenise + align + feature extraction: :func:`_tokenize`,
:func:`_batch_opcodes`, :func:`_align_features`) is Python except the alignment:
:meth:`LexicalNLI.features` maps every key to an integer id once and aligns all pairs in
one :func:`rrag_kernels.ops.lexical_opcodes` call (C++, OpenMP over pairs; with
``USE_CORE = False``, or without the compiled extension, the op's pure-Python reference,
which gives identical opcodes). It is written so the rest can move to C++ with the same
meaning: tokens are words with integer flags, the alignment is Ratcliff/Obershelp with
difflib's tie-breaks, the output a tuple of small integers and one float. About 35 us per
distinct text and 45 us per pair on one core.
"""

from __future__ import annotations

import math
import re
from typing import Any, Mapping, NamedTuple, Sequence

import numpy as np

from ...ops import check_int, check_real, lexical_opcodes
from ._common import LABELS, check_pairs, empty_probs, logger

__all__ = ["DEFAULT_TABLE", "Features", "LexicalNLI", "decide"]

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

_STOPWORDS = frozenset(
    """
    a an the and or but if then so as of at by for with from into onto upon in on to up out off over under
    about against between through during within along across around among toward towards via per than
    is are was were be been being am has have had having do does did doing will would shall should can
    could may might must it its it's this that these those there here which who whom whose what when where
    while why how he she they them their theirs his her hers him we us our you your i me my mine itself
    himself herself themselves also too very just even such same own other another each both either
    s 's one ones whereas thus hence therefore however although though because since until till yet
    later still already again once now then ever rather quite well much many
    """.split()
)
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
)  # "may" is a month only when capitalised mid-sentence (see _tokenize)
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
# next to another number token or a unit-like word. Handled in _number_value.
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

_TOKEN_RE = re.compile(
    r"\d[\d,]*(?:\.\d+)?(?:s|st|nd|rd|th)?\b"  # 1,500  7.2  1840s  17th
    r"|[^\W\d_]+(?:[-\u2010\u2011][^\W\d_]+)*"  # words (any script), hyphenated words
    r"|['\u2019][sS]\b"  # possessive 's
    r"|[.!?;:]"  # sentence / clause ends (not tokens themselves)
)
_PUNCT = frozenset(".!?;:")
_NT_RE = re.compile(r"(\w+)n['\u2019]t\b", re.IGNORECASE)
_NT_FIX = {"wo": "will", "ca": "can", "sha": "shall"}
_KEEP_S = ("ss", "us", "is")


def _split_nt(text: str) -> str:
    """don't -> do not, won't -> will not, can't -> can not, cannot -> can not."""

    def repl(m: re.Match) -> str:
        stem = m.group(1)
        return f"{_NT_FIX.get(stem.lower(), stem)} not"

    text = _NT_RE.sub(repl, text)
    return re.sub(r"\b([Cc])annot\b", r"\1an not", text)


def _stem(w: str) -> str:
    """A light suffix stripper, so that "identified" matches "identify" and "shown" does not
    need to: only the alignment keys are stemmed, never the words the cues read."""
    if len(w) <= 4 or not w.isalpha():
        return w
    if w.endswith("ies") or w.endswith("ied"):
        return w[:-3] + "y"
    for suf in ("ing", "ed", "es", "ly", "s"):
        if w.endswith(suf) and len(w) - len(suf) >= 3:
            if suf == "s" and w.endswith(_KEEP_S):
                return w
            w = w[: -len(suf)]
            if suf in ("ing", "ed") and len(w) >= 3 and w[-1] == w[-2] and w[-1] not in "aeiouls":
                w = w[:-1]  # stopped -> stop
            break
    if w.endswith("e") and len(w) > 3:
        w = w[:-1]
    return w


def _word_number(word: str) -> float | None:
    """Value of a number word or hyphenated compound (fifty-six, twenty-first); None otherwise."""
    v = _UNITS.get(word)
    if v is None:
        v = _TENS.get(word)
    if v is None:
        v = _ORD_UNITS.get(word)
    if v is None:
        v = _ORD_TENS.get(word)
    if v is None:
        v = _SCALES.get(word)
    if v is None and "-" in word:
        head, _, tail = word.partition("-")
        if head in _TENS and (tail in _UNITS or tail in _ORD_UNITS):
            v = _TENS[head] + _UNITS.get(tail, _ORD_UNITS.get(tail, 0))
    return None if v is None else float(v)


def _digit_number(word: str) -> tuple[float, str] | None:
    """(value, suffix) of a digit token: '1,500' -> (1500, ''), '1840s' -> (1840, 's')."""
    suffix = ""
    for suf in ("st", "nd", "rd", "th", "s"):
        if word.endswith(suf):
            suffix, word = suf, word[: -len(suf)]
            break
    try:
        return float(word.replace(",", "")), suffix
    except ValueError:
        return None


def _word_flags(low: str) -> int:
    """F_* flags of a lower-cased word that do not depend on its position."""
    f = 0
    if low[0].isdigit():
        f |= F_NUM
        d = _digit_number(low)
        if d is not None and d[1] in ("", "s") and 1000 <= d[0] <= 2100 and "," not in low and "." not in low:
            f |= F_DATE
    elif _word_number(low) is not None and low not in ("hundreds", "thousands", "millions", "billions"):
        f |= F_NUM
    if low in _MONTHS:
        f |= F_MONTH | F_DATE
    if low in _NEGATIONS:
        f |= F_NEG
    if low in _QUANTIFIERS:
        f |= F_QUANT
    if low in _SUPERLATIVES or (len(low) >= 6 and low.endswith("iest")):
        f |= F_SUPER
    if low in _ANTONYMS:
        f |= F_ANT
    if low in _STOPWORDS and not f & (F_NEG | F_QUANT | F_ANT | F_NUM):
        f |= F_STOP
    return f


_WORD_CACHE: dict[str, tuple[str, str, int, bool]] = {}
_WORD_CACHE_MAX = 200_000


def _word_info(tok: str) -> tuple[str, str, int, bool]:
    """(lower-cased word, alignment key, position-free flags, starts upper-case)."""
    info = _WORD_CACHE.get(tok)
    if info is None:
        low = tok.lower().replace("\u2019", "'").replace("\u2010", "-").replace("\u2011", "-")
        f = _word_flags(low)
        key = low if f & (F_NUM | F_NEG) else _stem(low)
        info = (low, key, f, tok[0].isupper())
        if len(_WORD_CACHE) < _WORD_CACHE_MAX:
            _WORD_CACHE[tok] = info
    return info


class _Num(NamedTuple):
    value: float
    kind: int  # 0 quantity, 1 year-like (year, decade, century), 2 percent
    lo: float  # the range of values this mention is compatible with
    hi: float
    start: int  # token span [start, end) of the number itself
    end: int
    unit: str  # key of the content word right after a quantity ("metr", "year"), else ""
    pstart: int  # the phrase [pstart, pend): with "more than", "about", "the ... century"
    pend: int


class Tokens(NamedTuple):
    """One text, tokenised (what :func:`_align_features` consumes)."""

    words: list[str]  # lower-cased words
    keys: list[str]  # alignment keys (light stems of the words)
    flags: list[int]  # F_* bit-masks
    keyset: frozenset  # set(keys)
    numbers: list[_Num]  # number mentions
    n_neg: int  # negation words
    n_by: int  # occurrences of "by" (a passive-voice proxy)


def _tokenize(text: str) -> Tokens:
    """Lower-cased word tokens of ``text``, their keys, flags and number mentions.

    Part of the hot path: called once per distinct text per ``predict_proba`` call.
    """
    if "n't" in text or "n\u2019t" in text or "annot" in text:
        text = _split_nt(text)
    words: list[str] = []
    keys: list[str] = []
    flags: list[int] = []
    starts: list[int] = []  # indices of capitalised sentence-initial words
    nums: list[int] = []  # indices of number tokens
    sentence_start = True
    info = _word_info
    for tok in _TOKEN_RE.findall(text):
        if tok in _PUNCT:
            sentence_start = tok in ".!?"
            continue
        low, key, f, upper = info(tok)
        if upper:
            if sentence_start:
                starts.append(len(words))
            else:
                f |= F_CAP
        if f & F_NUM:
            nums.append(len(words))
        words.append(low)
        keys.append(key)
        flags.append(f)
        sentence_start = False
    n = len(words)
    # A capitalised sentence-initial word is a name when the next word is capitalised too
    # ("Howard Carter discovered ...") and it is not a stopword.
    for k in starts:
        if k + 1 < n and not flags[k] & F_STOP and (flags[k + 1] & F_CAP):
            flags[k] |= F_CAP
    if "may" in words:
        for k in range(n):
            if words[k] == "may" and flags[k] & F_CAP:  # "May 1940", not "may have been"
                flags[k] = (flags[k] | F_MONTH | F_DATE) & ~F_STOP
    # Dates: a number next to AD/BC, a month or "century".
    for k in nums:
        prv = words[k - 1] if k else ""
        nxt = words[k + 1] if k + 1 < n else ""
        if (prv in _DATE_MARKERS or nxt in _DATE_MARKERS or nxt in _CENTURY_WORDS
                or (k and flags[k - 1] & F_MONTH) or (k + 1 < n and flags[k + 1] & F_MONTH)):
            flags[k] |= F_DATE
    n_neg = 0
    for f in flags:
        if f & F_NEG:
            n_neg += 1
    numbers = _numbers(words, keys, flags) if nums else []
    return Tokens(words, keys, flags, frozenset(keys), numbers, n_neg, words.count("by"))


# --------------------------------------------------------------------------- numbers


def _numbers(words: Sequence[str], keys: Sequence[str], flags: Sequence[int]) -> list[_Num]:
    """Number mentions: runs of number tokens ("7.2 million", "fifty-six", "1840s")."""
    out: list[_Num] = []
    n = len(words)
    k = 0
    while k < n:
        if not flags[k] & F_NUM:
            k += 1
            continue
        start = k
        value = 0.0
        current = 0.0
        suffix = ""
        ordinal = False
        # A mention is one number token, optionally followed by scale words ("7.2 million",
        # "two hundred thousand"); "1840s fifty-six" is two mentions.
        while k < n and flags[k] & F_NUM and (k == start or words[k] in _SCALES):
            w = words[k]
            if w[0].isdigit():
                d = _digit_number(w)
                v, suffix = d if d is not None else (0.0, "")
                current += v
                ordinal = suffix in ("st", "nd", "rd", "th")
            elif w in _SCALES:
                current = (current or 1.0) * _SCALES[w]
                if _SCALES[w] >= 1000:
                    value += current
                    current = 0.0
            else:
                current += _word_number(w) or 0.0
                ordinal = w in _ORD_UNITS or w in _ORD_TENS or w.endswith(("first", "second", "third", "th"))
            k += 1
        value += current
        last = k - 1
        if start == last and words[start] in _WEAK_NUMBER_WORDS and not (k < n and words[k] in _CENTURY_WORDS):
            continue  # "one of", "the first time", "second largest": not a number
        nxt = words[k] if k < n else ""
        prv = words[start - 1] if start else ""
        prv2 = words[start - 2] if start >= 2 else ""
        pstart = start
        while pstart > 0 and start - pstart < 3 and words[pstart - 1] in _QUALIFIER_WORDS:
            pstart -= 1
        if ordinal and nxt in _CENTURY_WORDS:  # "eighteenth century": the years 1701..1800
            lo, hi = (value - 1) * 100 + 1, value * 100
            pend = k + 1
            if k + 1 < n and words[k + 1] in ("bc", "bce", "ad", "ce"):
                pend += 1
                if words[k + 1] in ("bc", "bce"):
                    lo, hi = -hi, -lo
            out.append(_Num(value, 1, lo, hi, start, k, "", pstart, pend))
            continue
        if suffix == "s" and words[last][0].isdigit():  # "1840s", "1100s"
            span = 100 if value % 100 == 0 else 10
            out.append(_Num(value, 1, value, value + span - 1, start, k, "", pstart, k))
            continue
        if flags[last] & F_DATE and not flags[last] & F_MONTH:
            v = -value if nxt in ("bc", "bce") else value
            out.append(_Num(v, 1, v, v, start, k, "", pstart, k))
            continue
        kind = 2 if nxt in ("percent", "per", "%") else 0
        lo = hi = value
        if prv in _UPPER or (prv == "than" and prv2 in _UPPER) or (prv == "least" and prv2 == "at"):
            lo, hi = value, math.inf
        elif prv in _LOWER or (prv == "than" and prv2 in _LOWER) or (prv == "to" and prv2 == "up"):
            lo, hi = -math.inf, value
        if prv in _APPROX or prv2 in _APPROX:
            lo, hi = min(lo, value * 0.85), max(hi, value * 1.15)
        unit = keys[k] if k < n and not flags[k] & (F_STOP | F_NUM) else ""
        out.append(_Num(value, kind, lo, hi, start, k, unit, pstart, k))
    return out


def _compatible(b: _Num, a: _Num) -> bool:
    """Could premise number ``a`` and hypothesis number ``b`` describe the same quantity?"""
    return not (b.hi < a.lo - 1e-9 or a.hi < b.lo - 1e-9)


def _comparable(b: _Num, a: _Num) -> bool:
    """Same kind, and for quantities the same unit word (or no unit on one side)."""
    return a.kind == b.kind and (a.kind == 1 or not a.unit or not b.unit or a.unit == b.unit)


#: Whether :meth:`LexicalNLI.features` aligns through the compiled kernel (``backend=None``
#: of :func:`rrag_kernels.ops.lexical_opcodes`) or through its pure-Python reference
#: (``backend="reference"``). Tests switch it off to compare; the results are identical.
USE_CORE = True


def _batch_opcodes(pairs: list[tuple[Tokens, Tokens]], cache: dict[str, Tokens]) -> list[list[list[int]]]:
    """The alignment of every pair's keys in one :func:`rrag_kernels.ops.lexical_opcodes`
    call (C++: GIL off, OpenMP over pairs), as rows [tag, i1, i2, j1, j2] with the integer
    tags of ``ops.OPCODE_TAGS`` (0 equal, 1 replace, 2 delete, 3 insert)."""
    # Keys -> integer ids, once per distinct text (equal keys <=> equal ids).
    texts = list(cache.values())
    where = {id(t): k for k, t in enumerate(texts)}
    all_keys = [k for t in texts for k in t.keys]
    vocab = {k: v for v, k in enumerate(dict.fromkeys(all_keys))}
    ids = np.fromiter(map(vocab.__getitem__, all_keys), dtype=np.int64, count=len(all_keys))
    text_off = np.zeros(len(texts) + 1, dtype=np.int64)
    np.cumsum([len(t.keys) for t in texts], out=text_off[1:])

    def gather(which: list[int]) -> tuple[np.ndarray, np.ndarray]:
        w = np.array(which, dtype=np.int64)
        lens = text_off[w + 1] - text_off[w]
        off = np.zeros(len(w) + 1, dtype=np.int64)
        np.cumsum(lens, out=off[1:])
        return ids[np.repeat(text_off[w] - off[:-1], lens) + np.arange(off[-1])], off

    tok_a, off_a = gather([where[id(ta)] for ta, _ in pairs])
    tok_b, off_b = gather([where[id(tb)] for _, tb in pairs])
    op_offsets, ops = lexical_opcodes(tok_a, off_a, tok_b, off_b, trim_affixes=True,
                                      backend=None if USE_CORE else "reference")
    rows = ops.tolist()
    bounds = op_offsets.tolist()
    return [rows[bounds[p]:bounds[p + 1]] for p in range(len(pairs))]


# --------------------------------------------------------------------------- features

#: A replaced span is a *swap* (one fact exchanged for another) when neither side is longer
#: than this many tokens; longer replaced spans count as a deletion plus an insertion.
MAX_SWAP = 4


class Features(NamedTuple):
    """What :func:`_align_features` reads off one (premise, hypothesis) alignment."""

    n_a: int  # premise tokens
    n_b: int  # hypothesis tokens
    coverage_b: float  # share of hypothesis tokens whose key occurs in the premise
    new_content_b: int  # hypothesis content words (not stopwords) absent from the premise
    moved_content: int  # hypothesis content words found in the premise but not aligned
    voice_change: int  # 1 when the texts differ in how often they say "by" (passive voice)
    number_conflict: int  # swapped quantities incompatible with every comparable premise one
    date_conflict: int  # the same for year-like numbers, plus month swaps
    number_added: int  # hypothesis numbers that are additions, not replacements
    negation_flip: int  # 1 when the negations in short edits differ in parity
    antonym_swap: int  # antonym-pole swaps between the words only one side has
    superlative_swap: int  # a superlative / quantifier swapped for an unrelated one
    entity_swap: int  # swaps of a premise name for a name the premise lacks
    entity_added: int  # hypothesis names absent from the premise


def _align_features(tokens_a: Tokens, tokens_b: Tokens, ops: Sequence[Sequence[int]]) -> Features:
    """Align premise ``tokens_a`` with hypothesis ``tokens_b`` and read off the cues.

    Parameters
    ----------
    tokens_a, tokens_b : Tokens
        :func:`_tokenize` output of the premise and the hypothesis.
    ops : list of [tag, i1, i2, j1, j2] with integer tags (0 equal, 1 replace, 2 delete,
        3 insert)
        The alignment of ``tokens_a.keys`` with ``tokens_b.keys``, from the batched
        :func:`rrag_kernels.ops.lexical_opcodes` (see :func:`_batch_opcodes`).

    Returns
    -------
    Features

    Notes
    -----
    Each ``replace`` span with at most
    :data:`MAX_SWAP` tokens per side is a swap; names, superlatives/quantifiers, months and
    numbers are compared across swaps only, so a dropped clause plus an added one is not
    read as a contradiction. Negations count inside short edits (swaps and insertions or
    deletions of at most MAX_SWAP tokens); antonym poles are compared over all words only
    one side has.
    """
    ka, kb = tokens_a.keys, tokens_b.keys
    fa, fb = tokens_a.flags, tokens_b.flags
    wa, wb = tokens_a.words, tokens_b.words
    set_a, set_b = tokens_a.keyset, tokens_b.keyset
    n_a, n_b = len(ka), len(kb)

    # Hypothesis numbers compatible with a premise number ("in the 1950s" for "in 1953",
    # "more than forty" for "48") restate it: their phrases add nothing.
    nums_a = tokens_a.numbers
    explained = bytearray(n_b)
    compatible_b = []
    for nb in tokens_b.numbers:
        ok = False
        for na in nums_a:
            if _comparable(nb, na) and _compatible(nb, na):
                ok = True
                break
        compatible_b.append(ok)
        if ok:
            for k in range(nb.pstart, nb.pend):
                explained[k] = 1

    covered = new_content_b = ent_b = 0
    poles_b: list[tuple[int, int]] = []
    for k in range(n_b):
        key = kb[k]
        if key in set_a or explained[k]:
            covered += 1
            continue
        f = fb[k]
        if not f & F_STOP:
            new_content_b += 1
        if f & F_CAP:
            ent_b += 1
        if f & F_ANT:
            poles_b.extend(_ANTONYMS[wb[k]])
    poles_a: list[tuple[int, int]] = []
    for k in range(n_a):
        if fa[k] & F_ANT and ka[k] not in set_b:
            poles_a.extend(_ANTONYMS[wa[k]])
    antonym_swap = 0
    same_pole = False
    for g, p in poles_b:
        for g2, p2 in poles_a:
            if g == g2:
                if p != p2:
                    antonym_swap += 1
                else:
                    same_pole = True

    moved_content = entity_swap = superlative_swap = date_conflict = 0
    neg_a = neg_b = 0
    swap_of_b = [0] * n_b  # 1 + index of the swap holding hypothesis token k, or 0
    swaps: list[tuple[int, int, int, int]] = []
    equal, replace = 0, 1  # the kernel's integer tags
    for tag, i1, i2, j1, j2 in ops:
        if tag == equal:
            continue
        for k in range(j1, j2):
            if kb[k] in set_a and not fb[k] & F_STOP:
                moved_content += 1
        short = i2 - i1 <= MAX_SWAP and j2 - j1 <= MAX_SWAP
        if short:
            for k in range(i1, i2):
                if fa[k] & F_NEG:
                    neg_a += 1
            for k in range(j1, j2):
                if fb[k] & F_NEG:
                    neg_b += 1
        if tag != replace or not short:
            continue
        swaps.append((i1, i2, j1, j2))
        for k in range(j1, j2):
            swap_of_b[k] = len(swaps)
        cap_a = sup_a = month_a = False
        for k in range(i1, i2):
            if ka[k] in set_b:
                continue
            f = fa[k]
            cap_a = cap_a or bool(f & F_CAP)
            sup_a = sup_a or bool(f & (F_SUPER | F_QUANT))
            month_a = month_a or bool(f & F_MONTH)
        cap_b = sup_b = month_b = False
        for k in range(j1, j2):
            if kb[k] in set_a:
                continue
            f = fb[k]
            cap_b = cap_b or bool(f & F_CAP)
            sup_b = sup_b or bool(f & (F_SUPER | F_QUANT))
            month_b = month_b or bool(f & F_MONTH)
        entity_swap += cap_a and cap_b
        superlative_swap += sup_a and sup_b
        date_conflict += month_a and month_b
    if antonym_swap or same_pole:
        superlative_swap = 0  # already an antonym swap, or synonyms of one pole

    number_conflict = number_added = 0
    for nb, ok in zip(tokens_b.numbers, compatible_b):
        if ok:
            continue
        comparable = [na for na in nums_a if _comparable(nb, na)]
        sw = swap_of_b[nb.end - 1]
        if not comparable or not sw:
            number_added += 1  # a number of a new kind, or an addition rather than a swap
            continue
        i1, i2, _, _ = swaps[sw - 1]
        if nb.kind == 1 or any(na.start < i2 and na.end > i1 for na in comparable):
            if nb.kind == 1:
                date_conflict += 1
            else:
                number_conflict += 1
        else:
            number_added += 1
    return Features(
        n_a,
        n_b,
        covered / n_b if n_b else 1.0,
        new_content_b,
        moved_content,
        int(tokens_a.n_by != tokens_b.n_by),
        number_conflict,
        date_conflict,
        number_added,
        int((neg_a - neg_b) % 2 != 0),
        antonym_swap,
        superlative_swap,
        entity_swap,
        ent_b,
    )


# --------------------------------------------------------------------------- decision

OUTCOMES = ("unknown", "contradiction", "contradiction_weak", "entailment", "entailment_weak", "neutral")

#: Probability rows (entailment, neutral, contradiction) per outcome of :func:`decide`.
DEFAULT_TABLE: dict[str, tuple[float, float, float]] = {
    "unknown": (0.20, 0.65, 0.15),
    "contradiction": (0.05, 0.10, 0.85),
    "contradiction_weak": (0.10, 0.30, 0.60),
    "entailment": (0.85, 0.10, 0.05),
    "entailment_weak": (0.60, 0.30, 0.10),
    "neutral": (0.10, 0.80, 0.10),
}


def decide(feat: Features, *, min_coverage: float = 0.5, max_new_content: int = 1, min_moved: int = 2) -> str:
    """Map features to an outcome name (see the module docstring for the rules)."""
    if feat.coverage_b < min_coverage:
        return "unknown"
    if (feat.number_conflict or feat.date_conflict or feat.negation_flip or feat.antonym_swap
            or feat.superlative_swap):
        return "contradiction"
    if feat.entity_swap:
        return "contradiction_weak"
    if feat.moved_content >= min_moved and not feat.voice_change and feat.new_content_b <= max_new_content:
        return "contradiction_weak"
    if feat.new_content_b <= max_new_content and feat.number_added == 0:
        return "entailment_weak" if feat.moved_content else "entailment"
    return "neutral"


class LexicalNLI:
    """Model-free NLI for minimal-edit sentence pairs (alignment of word tokens).

    See the module docstring of :mod:`rrag_kernels.models.nli.lexical` for the rules, the
    probability table and an honest list of what it catches and misses.

    Parameters
    ----------
    embedder : object with ``.encode(list[str]) -> ndarray (n, d)``, optional
        When given, pairs the alignment cannot judge (``unknown``) are decided by the
        cosine of their embeddings: >= ``cos_entail`` -> ``entailment_weak``, <
        ``cos_neutral`` -> ``neutral``.
    min_coverage : float in [0, 1]
        Below this share of hypothesis tokens found in the premise, the pair is not a
        minimal edit and the outcome is ``unknown`` (unless a number/date conflict shows).
    max_new_content : int >= 0
        A hypothesis with at most this many content words absent from the premise (and no
        new number) counts as adding nothing of substance.
    min_moved : int >= 0
        This many shared content words out of order, with no change of voice, is read as a
        role swap (``contradiction_weak``).
    table : mapping outcome -> (p_entail, p_neutral, p_contr), optional
        Overrides rows of :data:`DEFAULT_TABLE`; each row must be non-negative and sum to 1.
    cos_entail, cos_neutral : float
        Cosine thresholds of the embedder rule.

    Attributes
    ----------
    labels : ("entailment", "neutral", "contradiction")
    """

    labels: tuple[str, str, str] = LABELS

    def __init__(
        self,
        embedder: Any = None,
        *,
        min_coverage: float = 0.5,
        max_new_content: int = 1,
        min_moved: int = 2,
        table: Mapping[str, Sequence[float]] | None = None,
        cos_entail: float = 0.70,
        cos_neutral: float = 0.50,
    ) -> None:
        if embedder is not None and not callable(getattr(embedder, "encode", None)):
            raise TypeError(f"embedder: expected an object with .encode(texts), got {type(embedder).__name__}")
        for name, v in (("min_coverage", min_coverage), ("cos_entail", cos_entail), ("cos_neutral", cos_neutral)):
            v = check_real(v, name)
            if not -1.0 <= v <= 1.0 or math.isnan(v):
                raise ValueError(f"{name}: must be in [-1, 1] (a share or a cosine), got {v}")
        if not 0.0 <= min_coverage <= 1.0:
            raise ValueError(f"min_coverage: must be in [0, 1], got {min_coverage}")
        max_new_content = check_int(max_new_content, "max_new_content")
        min_moved = check_int(min_moved, "min_moved")
        rows = dict(DEFAULT_TABLE)
        if table is not None:
            if not isinstance(table, Mapping):
                raise TypeError(f"table: expected a mapping outcome -> 3 probabilities, got {type(table).__name__}")
            for key, row in table.items():
                if key not in DEFAULT_TABLE:
                    raise ValueError(f"table: unknown outcome {key!r}; expected one of {OUTCOMES}")
                arr = np.asarray(row, dtype=np.float64)
                if arr.shape != (3,) or not np.isfinite(arr).all() or (arr < 0).any() or abs(arr.sum() - 1) > 1e-6:
                    raise ValueError(f"table: row {key!r} must be 3 non-negative probabilities summing to 1, got {row!r}")
                rows[key] = tuple(float(x) for x in arr)
        self.embedder = embedder
        self.min_coverage = float(min_coverage)
        self.max_new_content = int(max_new_content)
        self.min_moved = int(min_moved)
        self.cos_entail = float(cos_entail)
        self.cos_neutral = float(cos_neutral)
        self.table = rows
        self._rows = np.array([rows[o] for o in OUTCOMES], dtype=np.float64)
        self._index = {o: k for k, o in enumerate(OUTCOMES)}

    def __repr__(self) -> str:
        emb = "" if self.embedder is None else f"embedder={type(self.embedder).__name__}, "
        return f"LexicalNLI({emb}min_coverage={self.min_coverage})"

    def features(self, premises: list[str], hypotheses: list[str]) -> list[Features]:
        """The :class:`Features` of each pair (for analysis)."""
        premises, hypotheses = check_pairs(premises, hypotheses)
        cache: dict[str, Tokens] = {}
        pairs = []
        for p, h in zip(premises, hypotheses):
            ta = cache.get(p)
            if ta is None:
                ta = cache[p] = _tokenize(p)
            tb = cache.get(h)
            if tb is None:
                tb = cache[h] = _tokenize(h)
            pairs.append((ta, tb))
        if not pairs:
            return []
        return [_align_features(ta, tb, ops) for (ta, tb), ops in zip(pairs, _batch_opcodes(pairs, cache))]

    def outcomes(self, premises: list[str], hypotheses: list[str]) -> list[str]:
        """The outcome name of each pair (before any embedder rule)."""
        return [
            decide(f, min_coverage=self.min_coverage, max_new_content=self.max_new_content, min_moved=self.min_moved)
            for f in self.features(premises, hypotheses)
        ]

    def predict_proba(self, premises: list[str], hypotheses: list[str]) -> np.ndarray:
        """NLI probabilities of each (premise, hypothesis) pair.

        Parameters
        ----------
        premises, hypotheses : list of str, same length n

        Returns
        -------
        ndarray, shape (n, 3), float32
            Columns ``labels`` = (entailment, neutral, contradiction); each row is one row
            of the probability table, so it sums to 1.
        """
        premises, hypotheses = check_pairs(premises, hypotheses)
        if not premises:
            return empty_probs()
        idx = np.fromiter(
            (self._index[o] for o in self.outcomes(premises, hypotheses)), dtype=np.int64, count=len(premises)
        )
        if self.embedder is not None:
            unknown = np.flatnonzero(idx == self._index["unknown"])
            if unknown.size:
                cos = self._cosines([premises[k] for k in unknown], [hypotheses[k] for k in unknown])
                idx[unknown[cos >= self.cos_entail]] = self._index["entailment_weak"]
                idx[unknown[cos < self.cos_neutral]] = self._index["neutral"]
        return self._rows[idx].astype(np.float32)

    def _cosines(self, a: list[str], b: list[str]) -> np.ndarray:
        texts = list(dict.fromkeys(a + b))
        where = {t: k for k, t in enumerate(texts)}
        emb = np.asarray(self.embedder.encode(texts), dtype=np.float64)
        if emb.ndim != 2 or emb.shape[0] != len(texts):
            raise ValueError(
                f"embedder: .encode returned shape {emb.shape}, expected ({len(texts)}, d)"
            )
        norms = np.linalg.norm(emb, axis=1)
        norms[norms == 0] = 1.0
        emb /= norms[:, None]
        ia = np.array([where[t] for t in a])
        ib = np.array([where[t] for t in b])
        cos = np.einsum("ij,ij->i", emb[ia], emb[ib])
        logger.debug("LexicalNLI: embedder decided %d unknown pairs", len(a))
        return cos
