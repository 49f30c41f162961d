"""``nli_graph``: MIRAGE's claim graph from the NLI probabilities of the selected pairs."""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from .. import reference
from ._dispatch import Plan, core_cached, finish, launcher, numpy_cpp, plan, torch_device
from ._memory import check_memory_budget
from ._validation import (
    LABELS,
    array_like,
    as_buffer,
    as_index,
    check_choice,
    check_dtype_kind,
    check_index_range,
    check_int,
    check_no_self_loops,
    check_probabilities,
    check_shape,
    is_plain,
    is_torch_tensor,
    label_order_columns,
    to_numpy,
)

__all__ = ["LABELS", "NliGraph", "label_columns", "nli_graph"]

_I64, _F64 = np.dtype(np.int64), np.dtype(np.float64)
_REDUCTIONS = ("max", "mean")


class NliGraph(NamedTuple):
    """Output of :func:`nli_graph`.

    Attributes
    ----------
    w_supp, w_contr : (P,) float64
    kind : (P,) int8, +1 support, -1 contradiction, 0 ignored
    support_count, contradiction_count : (n_claims,) int64
    indptr : (n_claims + 1,) int64
    neighbors, edge_ids : (2 E',) int64, the non-ignored edges at each claim
    """

    w_supp: Any
    w_contr: Any
    kind: Any
    support_count: Any
    contradiction_count: Any
    indptr: Any
    neighbors: Any
    edge_ids: Any


def label_columns(label_order: Any) -> tuple[int, int]:
    """(entailment column, contradiction column) of an NLI model's output.

    Parameters
    ----------
    label_order : sequence of 3 str, or mapping {column: name}
        A permutation of "entailment", "neutral", "contradiction" (case-insensitive), e.g.
        ``("contradiction", "entailment", "neutral")`` or a Hugging Face ``id2label`` (see
        :func:`rrag_kernels.ops.label_order_columns` for the spellings accepted).
    """
    entail, _, contr = label_order_columns(label_order)
    return entail, contr


# MIRAGE passes the scorer's ``labels`` tuple on every call: parse each order once.
_label_cache: dict[tuple, tuple[int, int]] = {}


def _label_columns_cached(label_order: Any) -> tuple[int, int]:
    if type(label_order) is tuple:
        cols = _label_cache.get(label_order)
        if cols is None:
            cols = _label_cache.setdefault(label_order, label_columns(label_order))
        return cols
    return label_columns(label_order)


def nli_graph(
    i: Any,
    j: Any,
    probs_fwd: Any,
    probs_bwd: Any,
    n_claims: int,
    *,
    label_order: Any = LABELS,
    reduce: str = "max",
    backend: str | None = None,
) -> NliGraph:
    """MIRAGE claim graph from the NLI probabilities of each selected pair, both directions.

    Per direction ``w_supp = max(0, 2 * p_entail - 1)`` and ``w_contr = p_contr``; the two
    directions are combined by ``max`` (``reduce="max"``, the paper's) or by
    ``(a + b) * 0.5`` (``reduce="mean"``). Edge ``p`` is a support edge (``kind = +1``) if
    ``w_supp > w_contr``, a contradiction edge (``-1``) if ``w_contr > w_supp``, else ignored
    (``0``). Probabilities must be finite and in [0, 1]; rows need not sum to 1.

    Parameters
    ----------
    i, j : integer arrays, shape (P,)
        Edge ends, in [0, n_claims), ``i[p] != j[p]``; parallel edges are allowed.
    probs_fwd, probs_bwd : float arrays, shape (P, 3)
        NLI probabilities of premise ``i`` -> hypothesis ``j`` and of ``j`` -> ``i``.
    n_claims : int >= 0
    label_order : sequence of 3 names or mapping {column: name}
        What each probability column is (see :func:`label_columns`); default
        ``("entailment", "neutral", "contradiction")``.
    reduce : {"max", "mean"}
    backend : {None, "auto", "reference", "cpp", "triton", "torch"}

    Returns
    -------
    NliGraph
        ``w_supp``, ``w_contr`` (P,) float64; ``kind`` (P,) int8; ``support_count``,
        ``contradiction_count`` (n_claims,) int64: support / contradiction edges touching
        each claim; ``indptr`` (n_claims + 1,), ``neighbors``, ``edge_ids`` (2 E',) int64:
        CSR adjacency of the E' non-ignored edges, each listed at both ends, a row sorted by
        neighbor then edge id.
    """
    entail_col, contr_col = _label_columns_cached(label_order)
    if reduce != "max" and reduce != "mean":
        check_choice(reduce, "reduce", _REDUCTIONS)
    n_claims = check_int(n_claims, "n_claims")
    check_memory_budget(24 * n_claims, "n_claims", "the per-claim counts and adjacency offsets")
    mean = reduce == "mean"
    # Fast path (MIRAGE's tiny per-query graphs): plain numpy arguments need no conversion,
    # and the C++ kernel checks every value itself.
    if (numpy_cpp(backend, (i, j, probs_fwd, probs_bwd)) and is_plain(i, _I64) and is_plain(j, _I64)
            and is_plain(probs_fwd, _F64, 2) and is_plain(probs_bwd, _F64, 2)
            and j.shape[0] == i.shape[0] and probs_fwd.shape == probs_bwd.shape == (i.shape[0], 3)):
        return NliGraph(*core_cached().nli_graph(i, j, probs_fwd, probs_bwd, n_claims, entail_col, contr_col, mean))
    i_in, j_in = array_like(i, "i"), array_like(j, "j")
    check_dtype_kind(i_in, "i", "iu", "an integer array (int64)")
    check_dtype_kind(j_in, "j", "iu", "an integer array (int64)")
    n_pairs = int(i_in.shape[0]) if len(i_in.shape) == 1 else -1
    check_shape(i_in, "i", (None,))
    check_shape(j_in, "j", (n_pairs,), " (len(i))")
    f_in, b_in = array_like(probs_fwd, "probs_fwd"), array_like(probs_bwd, "probs_bwd")
    for name, x in (("probs_fwd", f_in), ("probs_bwd", b_in)):
        check_dtype_kind(x, name, "f", "a floating-point array")
        check_shape(x, name, (n_pairs, 3), " (len(i), 3)")
    p = plan({"i": i_in, "j": j_in, "probs_fwd": f_in, "probs_bwd": b_in}, backend, "nli_graph")
    if p.backend in ("triton", "torch"):
        out = _nli_graph_on_torch(p, i_in, j_in, f_in, b_in, n_claims, entail_col, contr_col, mean)
        return NliGraph(*(finish(x, p) for x in out))
    ii, jj = as_index(i_in, "i"), as_index(j_in, "j")
    fwd = as_buffer(to_numpy(f_in), np.float64)
    bwd = as_buffer(to_numpy(b_in), np.float64)
    if p.backend == "cpp":
        out = core_cached().nli_graph(ii, jj, fwd, bwd, n_claims, entail_col, contr_col, mean)
    else:
        _check_values(ii, jj, fwd, bwd, n_claims)
        out = reference.nli_graph_ref(ii, jj, fwd, bwd, n_claims, entail_col, contr_col, reduce)
    return NliGraph(*(finish(x, p) for x in out))


def _check_values(i: Any, j: Any, fwd: Any, bwd: Any, n_claims: int) -> None:
    """The value rules the C++ kernel checks in its own pass (numpy arrays or tensors)."""
    check_index_range(i, "i", n_claims, "n_claims")
    check_index_range(j, "j", n_claims, "n_claims")
    check_no_self_loops(i, j, "i", "j")
    check_probabilities(fwd, "probs_fwd")
    check_probabilities(bwd, "probs_bwd")


def _nli_graph_on_torch(p: Plan, i, j, fwd, bwd, n_claims, entail_col, contr_col, mean):
    import torch

    launch = launcher(p, "nli_graph")
    device = torch_device(p)

    def tensor(x, dtype):
        if not is_torch_tensor(x):
            x = torch.from_numpy(as_buffer(x, x.dtype.newbyteorder("=")))
        return x.detach().to(device=device, dtype=dtype).contiguous()

    ti, tj = tensor(i, torch.int64), tensor(j, torch.int64)
    tf, tb = tensor(fwd, torch.float64), tensor(bwd, torch.float64)
    _check_values(ti, tj, tf, tb, n_claims)
    return launch(ti, tj, tf, tb, n_claims, entail_col, contr_col, mean)
