"""``greedy_prune``: MIRAGE's greedy subset pruning, exact in fixed-point integers."""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from .. import reference
from ..reference import MAX_ABS_VALUE
from ._dispatch import core_cached, cpu_plan, finish, numpy_cpp
from ._validation import as_float64, as_index, check_finite, check_index_range, check_no_self_loops, is_plain

__all__ = ["PruneResult", "greedy_prune"]

_I64, _F64 = np.dtype(np.int64), np.dtype(np.float64)


class PruneResult(NamedTuple):
    """Output of :func:`greedy_prune` (a tuple ``(keep, removal_order, F)``).

    Attributes
    ----------
    keep : (N,) bool
    removal_order : (R,) int64, the removed claims in removal order
    F : float, the final quantised F(S)
    """

    keep: Any
    removal_order: Any
    F: float


def greedy_prune(
    node_scores: Any,
    edge_i: Any,
    edge_j: Any,
    edge_weight: Any,
    *,
    self_penalty: Any = None,
    backend: str | None = None,
) -> PruneResult:
    """MIRAGE greedy pruning: remove claims while a removal raises F, exactly.

    ``F(S) = sum_{c in S} (s(c) - pen(c)) + sum_{edges e = (i, j), i and j in S} w_e``.
    Starting from S = all claims, repeatedly remove the claim whose removal raises F the
    most, ``gain(c) = -(s(c) - pen(c)) - sum of w_e over the edges from c to claims still in
    S``, as long as the best gain is strictly positive. Equal gains: the lowest index.

    Exactness: every score, penalty and weight is first rounded to the nearest multiple of
    2^-32 (``rint(x * 2^32)``, half to even) and all sums are exact integers (Python ints
    in the reference, which literally recomputes F(S \\ {c}) for every candidate; 128-bit
    integers in C++, whose indexed max-heap updates only the neighbours of a removed claim,
    O((N + E) log N)). So gains are exact, ties are exact ties, and both backends give the
    same keep set, order and F on every input. |values| must be <= 2^20.

    Parameters
    ----------
    node_scores : float array, shape (N,)
        s(c), e.g. ``ln(1 + n(c)) + alpha * trust + beta * r``.
    edge_i, edge_j : integer arrays, shape (E,)
        Edge ends in [0, N); parallel edges add; self-loops are a ValueError (use
        ``self_penalty``).
    edge_weight : float array, shape (E,)
        w_e, e.g. ``w_supp - w_contr`` of the non-ignored NLI edges.
    self_penalty : float array, shape (N,), optional
        pen(c), e.g. the counter-evidence self-contradiction weight; zeros when None.
    backend : {None, "auto", "reference", "cpp"}

    Returns
    -------
    PruneResult(keep (N,) bool, removal_order (R,) int64, F float)
        ``F`` is the final quantised F(S) as float64.
    """
    # Fast path (MIRAGE's tiny per-query graphs): plain numpy arguments need no conversion,
    # and the C++ kernel checks every value itself.
    if (numpy_cpp(backend, (node_scores, edge_i, edge_j, edge_weight, self_penalty))
            and is_plain(node_scores, _F64) and is_plain(edge_i, _I64) and is_plain(edge_j, _I64)
            and is_plain(edge_weight, _F64) and (self_penalty is None or is_plain(self_penalty, _F64))
            and edge_i.shape == edge_j.shape == edge_weight.shape
            and (self_penalty is None or self_penalty.shape == node_scores.shape)):
        return PruneResult(*core_cached().greedy_prune(node_scores, edge_i, edge_j, edge_weight, self_penalty))
    s = as_float64(node_scores, "node_scores", (None,), allow_int=True)
    n = s.shape[0]
    ei = as_index(edge_i, "edge_i")
    n_edges = ei.shape[0]
    ej = as_index(edge_j, "edge_j", n_edges, " (len(edge_i))")
    w = as_float64(edge_weight, "edge_weight", (n_edges,), " (len(edge_i))", allow_int=True)
    pen = None
    if self_penalty is not None:
        pen = as_float64(self_penalty, "self_penalty", (n,), " (len(node_scores))", allow_int=True)
    p = cpu_plan({"node_scores": node_scores, "edge_i": edge_i, "edge_j": edge_j, "edge_weight": edge_weight,
                  "self_penalty": self_penalty}, backend, "greedy_prune")
    if p.backend == "cpp":
        keep, order, F = core_cached().greedy_prune(s, ei, ej, w, pen)
    else:
        check_index_range(ei, "edge_i", n, "len(node_scores)")
        check_index_range(ej, "edge_j", n, "len(node_scores)")
        check_no_self_loops(ei, ej, "edge_i", "edge_j")
        for name, x in (("node_scores", s), ("self_penalty", pen), ("edge_weight", w)):
            if x is not None:
                _check_quantisable(x, name)
        keep, order, F = reference.greedy_prune_ref(s, ei, ej, w, pen)
    if p.output == "numpy":
        return PruneResult(keep, order, float(F))
    return PruneResult(finish(keep, p), finish(order, p), float(F))


def _check_quantisable(x: np.ndarray, name: str) -> None:
    """Finite, and small enough that x * 2^32 and the sums of such stay exact integers."""
    check_finite(x, name)
    if x.size:
        big = np.abs(x) > MAX_ABS_VALUE
        if big.any():
            k = int(np.argmax(big))
            raise ValueError(f"{name}: |value| must be <= 2^20 (values are quantised to multiples of 2^-32), "
                             f"got {x[k]} at index {k}")
