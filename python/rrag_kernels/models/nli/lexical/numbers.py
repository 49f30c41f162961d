"""Number values of LexicalNLI: number words and digit tokens, and number mentions as ranges.

A mention is one number token plus its scale words ("7.2 million"); its kind is a
quantity, a year-like value (year, decade, century) or a percent, and its value range
says what it is compatible with: "in the eighteenth century" is 1701-1800, "1840s"
1840-1849, "more than forty" [40, inf), "about 150" [127.5, 172.5]. Two mentions can
contradict each other only when they are comparable (:func:`_comparable`) and not
compatible (:func:`_compatible`); :mod:`.align` applies that rule inside swaps.
"""

from __future__ import annotations

import math
from typing import NamedTuple, Sequence

from .lexicon import (
    _APPROX,
    _CENTURY_WORDS,
    _LOWER,
    _ORD_TENS,
    _ORD_UNITS,
    _QUALIFIER_WORDS,
    _SCALES,
    _TENS,
    _UNITS,
    _UPPER,
    _WEAK_NUMBER_WORDS,
    F_DATE,
    F_MONTH,
    F_NUM,
    F_STOP,
)


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
