"""Text helpers shared by the pipelines: text cleaning and sentence claims (URL domains and
source trust are in :mod:`.trust`).

Cleaning rule (:func:`clean_text`)
----------------------------------
Every model of this layer (NLI scorers, embedders, retrievers, sentence splitting) and every
pipeline cleans user text with :func:`clean_text` before any tokenizer sees it, so a scraped
passage can never make a tokenizer raise and every tokenizer reads the same characters.
"""

from __future__ import annotations

import re
from typing import Any, Sequence

import numpy as np

#: English function words (articles, prepositions, pronouns, auxiliaries, connectives): the
#: one list of words that carry no content, for every rule that looks at content words. Each
#: rule says what it adds or keeps on top (the NLI keeps negations and quantities, MIRAGE's
#: source units also skip reporting verbs).
FUNCTION_WORDS = frozenset(
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

# Code points a Python str can hold that UTF-8 cannot encode: the UTF-16 surrogates.
_SURROGATES = "\ud800-\udfff"
# C0 and C1 control characters, DEL included, except tab, line feed and carriage return.
_CONTROLS = "\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f"
_NEEDS_CLEANING = re.compile(f"[{_SURROGATES}{_CONTROLS}]")
_SURROGATE = re.compile(f"[{_SURROGATES}]")
_CONTROL = re.compile(f"[{_CONTROLS}]")


def clean_text(text: str) -> str:
    """``text`` with every code point a tokenizer could choke on or read differently replaced.

    The rule, applied in this order:

    1. **Surrogates.** A high surrogate (U+D800-U+DBFF) directly followed by a low one
       (U+DC00-U+DFFF) is the one character the pair encodes in UTF-16
       (``"\\ud83d\\ude00"`` -> U+1F600); every other surrogate -- a lone high or low one,
       or a pair in the wrong order -- becomes U+FFFD (REPLACEMENT CHARACTER), one per
       surrogate. Surrogates are the only code points a ``str`` can hold that UTF-8 cannot
       encode (``json.loads`` yields them from escaped scraped text); the Rust tokenizers
       refuse them, and ``claim_token_ids`` would read each as ``"?"``. U+FFFD separates
       words for every tokenizer here, as ``"?"`` does, so MIRAGE's lexical pairs are the
       same whether or not the text was cleaned.
    2. **Control characters.** Each C0 / C1 control character (U+0000-U+001F, U+007F-U+009F)
       other than tab, line feed and carriage return becomes a space. Why not keep them:
       the BERT normaliser of the packaged NLI model and of MiniLM deletes them, gluing the
       words beside them together (``"nul\\x00byte"`` -> ``"nulbyte"``), while the word
       tokenizers of ``claim_token_ids`` and LexicalNLI split there; a space is a word
       boundary for all of them, so every model reads the same words. NUL also breaks
       consumers of the text further on (C strings, database text columns, prompts).
       Why not delete them: a space keeps the words apart and the length unchanged.

    Everything else is kept as it is: tab, newline and carriage return, format characters
    (zero-width joiner, soft hyphen, BOM), noncharacters, private-use code points and
    unassigned ones are valid Unicode that UTF-8 encodes. No normalisation (NFC, case,
    whitespace) is applied. The rule is idempotent, and text that needs no change is
    returned as the same object.

    Parameters
    ----------
    text : str

    Returns
    -------
    str
        Encodable as strict UTF-8.

    Raises
    ------
    TypeError
        ``text`` is not a str.
    """
    if not isinstance(text, str):
        raise TypeError(f"text: expected str, got {type(text).__name__}")
    if _NEEDS_CLEANING.search(text) is None:
        return text
    if _SURROGATE.search(text) is not None:
        # UTF-16 holds each surrogate as one code unit: decoding pairs the well-ordered
        # ones and replaces every other one with U+FFFD.
        text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return _CONTROL.sub(" ", text)


def clean_texts(texts: Any, name: str = "texts") -> list[str]:
    """A list of str, each cleaned by :func:`clean_text`.

    Parameters
    ----------
    texts : sequence (list, tuple, numpy array) of str
        A bare str is refused: it would be read as a list of characters.
    name : str
        The argument's name in messages.

    Raises
    ------
    TypeError
        ``texts`` is not a sequence, is a str or bytes, or holds something other than str
        (the message names the first bad item, e.g. ``premises[3]``).
    """
    if isinstance(texts, (str, bytes)) or not isinstance(texts, (Sequence, np.ndarray)):
        raise TypeError(f"{name}: expected a list of str, got {type(texts).__name__}")
    out = []
    for k, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"{name}[{k}]: expected str, got {type(text).__name__}")
        out.append(clean_text(text))
    return out

# Words after which a period does not end a sentence (lower-cased, without the period).
_ABBREVIATIONS = frozenset(
    "mr mrs ms dr prof sr jr st mt ft no nos vol vols fig figs eq eqs ed eds rev gen gov sen rep "
    "col lt sgt capt cmdr adm inc ltd co corp dept univ assn bros vs etc approx ca cf al ie eg "
    "jan feb mar apr jun jul aug sep sept oct nov dec".split()
)
# A candidate boundary: terminal punctuation, optional closing quotes/brackets, whitespace,
# then something that can start a sentence.
_BOUNDARY = re.compile(r"([.!?])([\"'\u2019\u201d)\]]*)\s+(?=[\"'\u2018\u201c(\[]?[A-Z0-9])")
_WORD_BEFORE = re.compile(r"([A-Za-z][A-Za-z.]*)$")


def split_sentences(text: str) -> list[str]:
    """Split a passage into sentences.

    A boundary is ``.``, ``!`` or ``?`` (plus closing quotes/brackets) followed by space and
    an upper-case letter or digit, except after a known abbreviation ("Dr.", "St.", "e.g."),
    a single-letter initial ("J. Smith") or a dotted acronym ("U.S. Army"). Decimals
    ("3.5") never split because no space follows their period. The text is cleaned by
    :func:`clean_text` first, and whitespace is normalised.

    Parameters
    ----------
    text : str

    Returns
    -------
    list of str
        Non-empty sentences in order.
    """
    text = " ".join(clean_text(text).split())
    if not text:
        return []
    sentences, start = [], 0
    for m in _BOUNDARY.finditer(text):
        if m.group(1) == ".":
            before = _WORD_BEFORE.search(text[start : m.start(1)])
            word = before.group(1) if before else ""
            bare = word.replace(".", "").lower()
            if bare in _ABBREVIATIONS or (len(word) == 1 and word.isupper()) or "." in word:
                continue
        end = m.end(2)
        sentence = text[start:end].strip()
        if sentence:
            sentences.append(sentence)
        start = m.end()
    tail = text[start:].strip()
    if tail:
        sentences.append(tail)
    return sentences
