"""Which side of a contradiction to keep: the one corroborated by more independent sources.

Why
---
A polluted passage is usually a rewording of a real source with one fact changed, and it
keeps that source's URL, title and retrieval rank: trust and rank cannot tell the sides
apart, and the paper's pruning removes whichever end of a contradiction edge has the lower
score -- often the true claim, when the false one happens to collect fewer contradiction
edges (every other source that states the true fact contradicts the false claim once, and
the true claim is contradicted once). What does separate the sides is corroboration:
several clean sources state the true fact, each in its own words, while a changed fact
appears in one passage (or in the few passages that copy it).

The rule (``mode="corroboration"`` of :class:`~rrag_kernels.pipelines.mirage.MirageDefense`)
---------------------------------------------------------------------------------------------
1. ``sources(c)``: the number of distinct OTHER passages holding a claim that supports ``c``
   (a support edge of the NLI graph). Support from the claim's own passage does not count,
   nor two supporting claims of one other passage twice.
2. For every contradiction edge (a, b) between claims of different passages, the claim with
   fewer supporting sources loses; on a tie both lose (neither side is corroborated better,
   so neither is delivered as fact). A losing claim is dropped ("contradicted by a
   better-corroborated claim" / "contradicted, equally corroborated").
3. Optionally (``min_sources >= 1``), a claim that states a checkable specific -- a number,
   a year or date, or a multi-word name -- and is supported by fewer than ``min_sources``
   other passages is dropped as "uncorroborated specific": fabricated details (an invented
   commission, a made-up tally) are supported by no one.

Everything is computed from the claims' passage ids and the graph's edges, so it adds no
model calls.
"""

from __future__ import annotations

import re
from typing import Sequence

import numpy as np

__all__ = ["Resolution", "has_checkable_specific", "resolve_by_corroboration", "slot_types", "supporting_sources"]

# A year or date-like number, any other number (digits, with separators), or a name of two or
# more capitalised words not at the sentence start.
_NUMBER = re.compile(r"(?<![\w.])\d+(?:[,.]\d+)*(?![\w])")
_NAME = re.compile(r"(?<!^)(?<![.!?]\s)\b[A-Z][a-z]+(?:\s+(?:of|the|for|and|de|von|van)?\s*[A-Z][a-z]+)+")


def has_checkable_specific(text: str) -> bool:
    """Whether a claim states a number, a year/date or a multi-word proper name."""
    return bool(_NUMBER.search(text)) or bool(_NAME.search(text))


_YEAR = re.compile(r"(?<![\w.])(1[0-9]{3}|20[0-9]{2})(?![\w])")
_MONTH = re.compile(r"\b(January|February|March|April|May|June|July|August|September|October|November|December)\b")


def slot_types(text: str) -> int:
    """Bit set of the checkable slots a claim states: 1 year, 2 month/day date, 4 other
    number, 8 multi-word name. Pairs of claims that share a slot type are where a changed
    fact shows (1990 vs 1991) even when their wording differs too much for the paper's
    containment threshold."""
    bits = 0
    years = set(_YEAR.findall(text))
    if years:
        bits |= 1
    if _MONTH.search(text):
        bits |= 2
    if any(m not in years for m in _NUMBER.findall(text)):
        bits |= 4
    if _NAME.search(text):
        bits |= 8
    return bits


def supporting_sources(n: int, source: np.ndarray, edge_i: np.ndarray, edge_j: np.ndarray,
                       kind: np.ndarray) -> np.ndarray:
    """(n,) int64: for each claim, the distinct other passages holding a claim that supports it.

    Parameters
    ----------
    n : int, the number of claims
    source : (n,) int64, each claim's passage
    edge_i, edge_j : (E,) int64, edge ends
    kind : (E,) int8, +1 support, -1 contradiction, 0 ignored
    """
    seen: list[set[int]] = [set() for _ in range(n)]
    for a, b, k in zip(edge_i.tolist(), edge_j.tolist(), kind.tolist()):
        if k > 0 and source[a] != source[b]:
            seen[a].add(int(source[b]))
            seen[b].add(int(source[a]))
    return np.array([len(s) for s in seen], dtype=np.int64)


class Resolution:
    """Output of :func:`resolve_by_corroboration`.

    Attributes
    ----------
    keep : (n,) bool
    sources : (n,) int64, supporting other passages per claim
    reason : list of n (str or None), why a claim was dropped
    """

    __slots__ = ("keep", "sources", "reason")

    def __init__(self, keep: np.ndarray, sources: np.ndarray, reason: list[str | None]):
        self.keep, self.sources, self.reason = keep, sources, reason


def resolve_by_corroboration(texts: Sequence[str], source: np.ndarray, edge_i: np.ndarray, edge_j: np.ndarray,
                             kind: np.ndarray, *, active: np.ndarray | None = None,
                             min_sources: int = 0, decisive: np.ndarray | None = None) -> Resolution:
    """The corroboration rule of the module docstring.

    Parameters
    ----------
    texts : n claim texts
    source : (n,) int64, each claim's passage
    edge_i, edge_j, kind : (E,) the NLI graph's edges (kind +1 / -1 / 0)
    active : (n,) bool, optional
        Claims that take part (others are neither counted nor kept); default all.
    min_sources : int >= 0
        Step 3: claims with a checkable specific need this many supporting other passages.
    decisive : (E,) bool, optional
        Contradiction edges strong enough to drop both ends on a tie; the others (weaker
        contradictions) only let a better-corroborated claim drop a less corroborated one.
        Default: all.

    Returns
    -------
    Resolution
    """
    n = len(texts)
    source = np.asarray(source, dtype=np.int64)
    ei, ej, kd = (np.asarray(x) for x in (edge_i, edge_j, kind))
    keep = np.ones(n, dtype=bool) if active is None else np.asarray(active, dtype=bool).copy()
    dec = np.ones(len(ei), dtype=bool) if decisive is None else np.asarray(decisive, dtype=bool)
    if n and len(ei):
        live = keep[ei] & keep[ej]
        ei, ej, kd, dec = ei[live], ej[live], kd[live], dec[live]
    sources = supporting_sources(n, source, ei, ej, kd)
    reason: list[str | None] = [None] * n
    losers = np.zeros(n, dtype=bool)
    for a, b, k, strong in zip(ei.tolist(), ej.tolist(), kd.tolist(), dec.tolist()):
        if k >= 0 or source[a] == source[b] or (not strong and sources[a] == sources[b]):
            continue
        if sources[a] > sources[b]:
            losers[b] = True
            reason[b] = reason[b] or "contradicted by a better-corroborated claim"
        elif sources[b] > sources[a]:
            losers[a] = True
            reason[a] = reason[a] or "contradicted by a better-corroborated claim"
        else:
            for c in (a, b):
                losers[c] = True
                reason[c] = reason[c] or "contradicted, equally corroborated"
    keep &= ~losers
    if min_sources > 0:
        for c in np.flatnonzero(keep):
            if sources[c] < min_sources and has_checkable_specific(texts[c]):
                keep[c] = False
                reason[c] = "uncorroborated specific"
    return Resolution(keep, sources, reason)
