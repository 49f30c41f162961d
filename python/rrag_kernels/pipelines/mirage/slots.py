"""Typed slot values of a claim, and the conflicts between two claims that do not wait for the judge.

Why
---
A minimal edit changes one value and keeps the sentence: "completed on 31 March 1889" vs
"... 1899", "15 % of couples" vs "32 %", "Mehmed II" vs "Murad II". A small NLI judge often
calls such pairs neutral or even entailment (the words agree); the values do not. Two claims
that the pairing step put together (they share wording, :func:`select_pairs`) and that state
a value of the same type with no value in common contradict each other, whatever the judge
says.

Types and normal forms (:func:`slot_values`)
--------------------------------------------
- ``percent``: a number followed by ``%`` / ``percent`` / ``per cent`` (number words too:
  "fifteen percent" is 15);
- ``money``: a currency sign or word with a number and an optional scale ("$12.2 billion",
  "£100bn", "5 million dollars"), as (currency, value);
- ``date``: a day with a month name ("13 August", "August 13") as (month, day);
- ``year``: 1000-2099 standing alone (not part of an amount or a percentage);
- ``number``: any other number, scale words applied ("1.5 million" = 1500000), number
  words one to twenty;
- ``name``: a run of two or more capitalised words, or a capitalised word and a Roman
  numeral, not at the sentence start ("Mehmed II", "Gustave Eiffel"), lower-cased.

A name conflict also needs the two claims to agree on the rest of their wording (content
overlap of the words outside the names >= ``name_overlap``): two different people in two
sentences about different things are no contradiction, a name swapped in the same sentence is.
"""

from __future__ import annotations

import re
from typing import Any, Sequence

import numpy as np

from .corroboration import _MONTH

__all__ = ["SLOT_TYPES", "EditedGraph", "slot_conflicts", "slot_values", "with_slot_conflicts"]

SLOT_TYPES = ("percent", "money", "date", "year", "number", "name")

_MONTHS = {m.lower(): k for k, m in enumerate(("january", "february", "march", "april", "may", "june", "july",
                                               "august", "september", "october", "november", "december"), 1)}
_WORDNUM = {w: k for k, w in enumerate("zero one two three four five six seven eight nine ten eleven twelve "
                                       "thirteen fourteen fifteen sixteen seventeen eighteen nineteen "
                                       "twenty".split())}
_TENS = {"thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90}
_WORDNUM.update(_TENS)
_SCALE = {"thousand": 1e3, "million": 1e6, "billion": 1e9, "trillion": 1e12, "bn": 1e9, "m": 1e6, "k": 1e3}
_CURRENCY_SIGN = {"$": "usd", "£": "gbp", "€": "eur", "¥": "jpy"}
_CURRENCY_WORD = {"dollar": "usd", "dollars": "usd", "pound": "gbp", "pounds": "gbp", "euro": "eur",
                  "euros": "eur", "yen": "jpy"}

_NUM = r"(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?"
_WORDS = "|".join(sorted(_WORDNUM, key=len, reverse=True))
_AMOUNT = re.compile(
    rf"(?P<sign>[$£€¥])?\s?(?P<num>{_NUM}|\b(?:{_WORDS})\b)"
    r"(?:\s?(?P<scale>thousand|million|billion|trillion|bn|m|k)\b)?"
    r"(?:\s?(?P<pct>%|percent\b|per cent\b))?"
    r"(?:\s(?P<cur>dollars?|pounds?|euros?|yen)\b)?",
    re.IGNORECASE)
_MONTH_NAME = _MONTH.pattern.replace("(", "(?P<month>", 1)  # the one month list (corroboration.py)
_DAY_MONTH = re.compile(rf"\b(?P<day>\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH_NAME}", re.IGNORECASE)
_MONTH_DAY = re.compile(rf"{_MONTH_NAME}\.?\s+(?P<day>\d{{1,2}})(?:st|nd|rd|th)?\b(?!\d)", re.IGNORECASE)
_NAME = re.compile(r"(?<![.!?]\s)(?<!^)\b([A-Z][\w'’-]*(?:\s+(?:of|the|de|von|van|al|bin)?\s*"
                   r"(?:[A-Z][\w'’-]*|[IVX]+\b))+)")
_CONTENT = re.compile(r"[^\W\d_]+", re.UNICODE)


def _number(text: str) -> float:
    t = text.lower().replace(",", "")
    return float(_WORDNUM[t]) if t in _WORDNUM else float(t)


def slot_values(text: str) -> dict[str, set]:
    """The typed values a claim states (see the module docstring), as ``{type: set of values}``;
    types it does not state are absent."""
    out: dict[str, set] = {}

    def add(kind: str, value) -> None:
        out.setdefault(kind, set()).add(value)

    used: list[tuple[int, int]] = []
    for pat in (_DAY_MONTH, _MONTH_DAY):
        for m in pat.finditer(text):
            add("date", (_MONTHS[m.group("month").lower()], int(m.group("day"))))
            used.append(m.span("day"))
    for m in _AMOUNT.finditer(text):
        if any(a <= m.start("num") < b for a, b in used):
            continue
        raw = m.group("num")
        try:
            value = _number(raw)
        except (KeyError, ValueError):
            continue
        scale = m.group("scale")
        if scale:
            if scale.lower() in ("m", "k") and not (m.group("sign") or m.group("cur")):
                scale = None  # "5 m" is five metres, not five million
            else:
                value *= _SCALE[scale.lower()]
        currency = _CURRENCY_SIGN.get(m.group("sign") or "") or _CURRENCY_WORD.get((m.group("cur") or "").lower())
        if m.group("pct"):
            add("percent", round(value, 6))
        elif currency:
            add("money", (currency, round(value, 2)))
        elif raw.isdigit() and len(raw) == 4 and 1000 <= value <= 2099 and not scale:
            add("year", int(value))
        elif raw.isdigit() or raw.replace(",", "").replace(".", "").isdigit() or raw.lower() in _WORDNUM:
            add("number", round(value, 6))
    for m in _NAME.finditer(text):
        words = m.group(1).split()
        if words[0].lower() in _MONTHS:
            continue
        add("name", " ".join(w.lower() for w in words))
    return out


def _content_without_names(text: str, names: set) -> set[str]:
    words = {w.lower() for w in _CONTENT.findall(text) if len(w) > 2}
    for name in names:
        words -= set(name.split())
    return words


def slot_conflicts(texts: Sequence[str], pair_i: np.ndarray, pair_j: np.ndarray, *,
                   name_overlap: float = 0.6) -> np.ndarray:
    """Which pairs state a value of one type with no value in common.

    Parameters
    ----------
    texts : n claim texts
    pair_i, pair_j : (P,) int64, the pairs to check
    name_overlap : float in [0, 1]
        A name conflict also needs this containment overlap of the words outside the names.

    Returns
    -------
    (P,) bool
    """
    values = [slot_values(t) for t in texts]
    out = np.zeros(len(pair_i), dtype=bool)
    for k, (a, b) in enumerate(zip(np.asarray(pair_i).tolist(), np.asarray(pair_j).tolist())):
        va, vb = values[a], values[b]
        for kind in SLOT_TYPES:
            if kind in va and kind in vb and not (va[kind] & vb[kind]):
                if kind == "name":
                    wa = _content_without_names(texts[a], va[kind])
                    wb = _content_without_names(texts[b], vb[kind])
                    small = min(len(wa), len(wb))
                    if not small or len(wa & wb) / small < name_overlap:
                        continue
                out[k] = True
                break
    return out


class EditedGraph:
    """An NLI graph with some pairs overridden (same fields as :func:`nli_graph`'s result)."""

    __slots__ = ("kind", "w_supp", "w_contr", "support_count", "contradiction_count")

    def __init__(self, kind, w_supp, w_contr, support_count, contradiction_count):
        self.kind, self.w_supp, self.w_contr = kind, w_supp, w_contr
        self.support_count, self.contradiction_count = support_count, contradiction_count


def with_slot_conflicts(graph: Any, texts: Sequence[str], pair_i, pair_j, n: int, *, name_overlap: float = 0.6) -> Any:
    """The graph with every slot conflict (pipelines/mirage/slots.py) a contradiction of weight
    1 and no support; the per-claim counts recomputed from the edited kinds."""
    conflict = slot_conflicts(texts, pair_i, pair_j, name_overlap=name_overlap)
    if not conflict.any():
        return graph
    kind = np.asarray(graph.kind).astype(np.int8).copy()
    w_supp = np.asarray(graph.w_supp, dtype=np.float64).copy()
    w_contr = np.asarray(graph.w_contr, dtype=np.float64).copy()
    kind[conflict] = -1
    w_contr[conflict] = 1.0
    w_supp[conflict] = 0.0
    ends = np.concatenate([np.asarray(pair_i), np.asarray(pair_j)]).astype(np.int64)
    both = np.concatenate([kind, kind])
    support = np.bincount(ends[both > 0], minlength=n).astype(np.int64)
    contra = np.bincount(ends[both < 0], minlength=n).astype(np.int64)
    return EditedGraph(kind, w_supp, w_contr, support, contra)
