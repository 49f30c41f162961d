"""Text normalisation and tokens of LexicalNLI (step 1 of the rules in the package docstring).

A text becomes lower-cased word tokens (numbers such as "1,500", "1840s" and "fifty-six"
are single tokens, "n't" and "cannot" become "not", a possessive "'s" is its own token),
each with a light suffix-stripped alignment key and a bit-mask of word classes
(:mod:`.lexicon`), plus its number mentions (:mod:`.numbers`). Part of the hot path:
:func:`_tokenize` runs once per distinct text per ``predict_proba`` call, and the words'
position-free part is cached.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from .lexicon import (
    _ANTONYMS,
    _CENTURY_WORDS,
    _DATE_MARKERS,
    _MONTHS,
    _NEGATIONS,
    _QUANTIFIERS,
    _STOPWORDS,
    _SUPERLATIVES,
    F_ANT,
    F_CAP,
    F_DATE,
    F_MONTH,
    F_NEG,
    F_NUM,
    F_QUANT,
    F_STOP,
    F_SUPER,
)
from .numbers import _digit_number, _Num, _numbers, _word_number

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


class Tokens(NamedTuple):
    """One text, tokenised (what :func:`.align._align_features` consumes)."""

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
