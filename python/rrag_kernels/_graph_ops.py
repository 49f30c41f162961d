"""MIRAGE claim-graph kernels: validate, then dispatch to the reference, C++ or Triton backend.

The four kernels of the MIRAGE defense's graph stage, in pipeline order::

    token_ids, token_offsets = claim_token_ids(texts)
    i, j, overlap = select_pairs(token_ids, token_offsets, source_ids)      # pairs for NLI
    g = nli_graph(i, j, probs_fwd, probs_bwd, n_claims)                     # edges
    keep, order, F = greedy_prune(scores, i[m], j[m], (g.w_supp - g.w_contr)[m])  # m = g.kind != 0
    stats = gate_stats(keep, i, j, g.kind, domain_ids)

Conventions (shared with :mod:`rrag_kernels.ops`)
------------------------------------------------
* Integer arguments (ids, indices, offsets) are any integer numpy array, list or torch
  tensor, converted to contiguous int64; float arguments are float16/32/64 (integers are
  accepted for scores and weights), converted to float64. ``keep`` must be bool.
* ``backend``: None/"auto" (C++ when built, else the reference), "reference" (the NumPy /
  Python truth in :mod:`rrag_kernels.reference`), "cpp", or "triton" (``nli_graph`` only;
  CUDA, or the CPU under ``TRITON_INTERPRET=1``). CUDA tensors given to a kernel without a
  Triton version are copied to the C++ kernel and the result copied back.
* Output type follows input: numpy in, numpy out; torch in, torch out on the input device.
* Every backend returns exactly the same discrete outputs (pairs, kinds, counts, adjacency,
  kept sets, removal orders) and bitwise the same floats: each float is one prescribed
  float64 expression, or (``greedy_prune``) exact fixed-point integer arithmetic.
* Bad arguments raise TypeError (wrong kind or dtype) or ValueError (shape or value) whose
  message starts with the argument's name. Shapes and dtypes are checked here for every
  backend; value checks (NaN/inf, ranges, offsets, self-loops) are made here for the
  reference and Triton backends and inside the C++ kernels' own pass for ``cpp``, with
  messages of the same form.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from . import reference
from ._dispatch import Plan, core_module, finish, plan, triton_device
from ._dispatch import core_cached as _core
from ._dispatch import cpu_plan as _cpu_plan
from ._dispatch import numpy_cpp as _numpy_cpp
from ._validation import array_like as _array_like
from ._validation import as_float64, as_index, check_bool, is_torch_tensor
from ._validation import check_all_finite as _check_finite
from ._validation import check_csr as _check_csr
from ._validation import check_index_range as _check_range
from ._validation import check_int as _check_int
from ._validation import check_no_self_loops as _check_no_self_loops
from ._validation import check_real as _check_real
from ._validation import check_shape as _check_shape
from ._validation import dtype_kind as _kind_of
from ._validation import is_plain as _plain
from ._validation import to_numpy as _to_numpy
from .reference.greedy_prune import MAX_ABS_VALUE
from .reference.select_pairs import TOKEN_PATTERN, normalise_text

__all__ = [
    "TOKEN_PATTERN",
    "NliGraph",
    "Pairs",
    "PruneResult",
    "claim_token_ids",
    "gate_stats",
    "greedy_prune",
    "nli_graph",
    "select_pairs",
]

LABELS = ("entailment", "neutral", "contradiction")
_MAX_ABS_VALUE = MAX_ABS_VALUE
_INT64_MAX = np.iinfo(np.int64).max
_I64, _F64, _I8, _BOOL = np.dtype(np.int64), np.dtype(np.float64), np.dtype(np.int8), np.dtype(np.bool_)


class Pairs(NamedTuple):
    """Output of :func:`select_pairs` (a tuple ``(i, j, overlap)``)."""

    i: Any  # (P,) int64
    j: Any  # (P,) int64
    overlap: Any  # (P,) float64


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


class PruneResult(NamedTuple):
    """Output of :func:`greedy_prune` (a tuple ``(keep, removal_order, F)``)."""

    keep: Any  # (N,) bool
    removal_order: Any  # (R,) int64
    F: float


# --------------------------------------------------------------------------- tokens and pairs


def claim_token_ids(texts: Sequence[str], *, backend: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Word tokens of each claim as integer ids (the input of :func:`select_pairs`).

    A token is a match of ``TOKEN_PATTERN = r"[a-z0-9]+(?:'[a-z]+)?"`` on
    ``text.lower().replace("\\u2019", "'")``: ASCII letters and digits, optionally followed
    by an apostrophe and letters ("don't", "1990's"). Any other character (punctuation,
    whitespace, non-ASCII letters) separates tokens. Ids are numbered by first appearance
    over all texts, in order. The C++ tokenizer equals the regex on every input: it scans
    the UTF-8 bytes, and non-ASCII texts are lower-cased in Python first.

    Parameters
    ----------
    texts : list or tuple of str, length N
    backend : {None, "auto", "reference", "cpp"}

    Returns
    -------
    token_ids : ndarray, shape (T,), int64
    token_offsets : ndarray, shape (N + 1,), int64
        Claim ``c``'s tokens are ``token_ids[token_offsets[c]:token_offsets[c + 1]]``.
    """
    if not isinstance(texts, (list, tuple)):
        raise TypeError(f"texts: expected a list of str, got {type(texts).__name__}")
    p = _cpu_plan({}, backend, "claim_token_ids")
    if p.backend == "cpp":
        # ASCII texts are lower-cased by the C++ scan itself; others here (str.lower is
        # Unicode-aware: the Kelvin sign becomes "k"). The C++ binding rejects non-str.
        try:
            prepared = [t if t.isascii() else normalise_text(t) for t in texts]
        except AttributeError:
            _check_texts(texts)
            raise
        return _core().claim_token_ids(prepared)
    _check_texts(texts)
    return reference.claim_token_ids_ref(list(texts))


def _check_texts(texts: Sequence[Any]) -> None:
    for k, t in enumerate(texts):
        if not isinstance(t, str):
            raise TypeError(f"texts: expected a list of str, item {k} is {type(t).__name__}")


def select_pairs(
    token_ids: Any,
    token_offsets: Any,
    source_ids: Any,
    *,
    tau: float = 0.62,
    max_pairs: int | None = 400,
    backend: str | None = None,
) -> Pairs:
    """MIRAGE lexical pair selection: cross-source claim pairs whose token sets overlap.

    Claim ``c``'s token set is ``T(c) = set(token_ids[token_offsets[c]:token_offsets[c + 1]])``
    (duplicates count once). The pair ``i < j`` is kept iff ``source_ids[i] != source_ids[j]``,
    both sets are non-empty and

        ``overlap = |T(i) & T(j)| / min(|T(i)|, |T(j)|) >= tau``

    computed as the float64 division of the two integers. Output order: overlap descending,
    then ``(i, j)`` ascending; the first ``max_pairs`` pairs are returned.

    The C++ kernel finds the pairs by prefix filtering on an inverted index (a pair with
    min size ``m`` needs ``t = min{c : c / m >= tau}`` shared tokens, so it shares one of the
    smaller claim's ``m - t + 1`` rarest tokens), then verifies each candidate exactly; it
    is fast when ``tau`` is high and does every pair when ``tau = 0``. Results do not depend
    on the thread count.

    Parameters
    ----------
    token_ids : integer array, shape (T,)
        Any int64 values (e.g. from :func:`claim_token_ids`).
    token_offsets : integer array, shape (N + 1,)
        CSR: ``token_offsets[0] == 0``, non-decreasing, ``token_offsets[-1] == T``.
    source_ids : integer array, shape (N,)
        The passage each claim comes from; pairs within one source are never made.
    tau : float in [0, 1]
    max_pairs : int >= 0 or None (no cap)
    backend : {None, "auto", "reference", "cpp"}

    Returns
    -------
    Pairs(i (P,) int64, j (P,) int64, overlap (P,) float64), with ``i < j``
    """
    tau = _check_real(tau, "tau")
    if not 0.0 <= tau <= 1.0:
        raise ValueError(f"tau: must be in [0, 1], got {tau}")
    if max_pairs is not None:
        max_pairs = _check_int(max_pairs, "max_pairs")
    src = as_index(source_ids, "source_ids")
    n = src.shape[0]
    ids = as_index(token_ids, "token_ids")
    off = as_index(token_offsets, "token_offsets", n + 1, " (len(source_ids) + 1)")
    p = _cpu_plan({"token_ids": token_ids, "token_offsets": token_offsets, "source_ids": source_ids}, backend,
                  "select_pairs")
    if p.backend == "cpp":
        i, j, overlap = _core().select_pairs(ids, off, src, tau, -1 if max_pairs is None else max_pairs)
    else:
        _check_csr(off, "token_offsets", ids.shape[0])
        i, j, overlap = reference.select_pairs_ref(ids, off, src, tau, max_pairs)
    if p.output == "numpy":
        return Pairs(i, j, overlap)
    return Pairs(finish(i, p), finish(j, p), finish(overlap, p))


# --------------------------------------------------------------------------- NLI graph


_label_cache: dict[tuple, tuple[int, int]] = {}


def _label_columns_cached(label_order: Any) -> tuple[int, int]:
    if type(label_order) is tuple:
        cols = _label_cache.get(label_order)
        if cols is None:
            cols = _label_cache.setdefault(label_order, label_columns(label_order))
        return cols
    return label_columns(label_order)


def label_columns(label_order: Any) -> tuple[int, int]:
    """(entailment column, contradiction column) of an NLI model's output.

    Parameters
    ----------
    label_order : sequence of 3 str, or mapping {column: name}
        A permutation of "entailment", "neutral", "contradiction" (case-insensitive), e.g.
        ``("contradiction", "entailment", "neutral")`` or a Hugging Face ``id2label``.
    """
    if isinstance(label_order, Mapping):
        try:
            names = [label_order[k] for k in sorted(label_order, key=int)]
        except (TypeError, ValueError) as exc:
            raise ValueError(f"label_order: a mapping must have the integer keys 0, 1, 2 ({exc})") from None
        if sorted(int(k) for k in label_order) != [0, 1, 2]:
            raise ValueError(f"label_order: a mapping must have the keys 0, 1, 2, got {sorted(label_order)}")
    elif isinstance(label_order, (list, tuple)):
        names = list(label_order)
    else:
        raise TypeError(f"label_order: expected a sequence of 3 label names, got {type(label_order).__name__}")
    if len(names) != 3 or not all(isinstance(s, str) for s in names):
        raise ValueError(f"label_order: expected 3 label names, got {label_order!r}")
    lowered = [s.strip().lower() for s in names]
    if sorted(lowered) != sorted(LABELS):
        raise ValueError(f"label_order: must be a permutation of {LABELS} (case-insensitive), got {label_order!r}")
    return lowered.index("entailment"), lowered.index("contradiction")


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
    backend : {None, "auto", "reference", "cpp", "triton"}

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
        raise ValueError(f"reduce: expected 'max' or 'mean', got {reduce!r}")
    n_claims = _check_int(n_claims, "n_claims")
    if (_numpy_cpp(backend, (i, j, probs_fwd, probs_bwd)) and _plain(i, _I64) and _plain(j, _I64)
            and _plain(probs_fwd, _F64, 2) and _plain(probs_bwd, _F64, 2)
            and j.shape[0] == i.shape[0] and probs_fwd.shape == probs_bwd.shape == (i.shape[0], 3)):
        return NliGraph(*_core().nli_graph(i, j, probs_fwd, probs_bwd, n_claims, entail_col, contr_col,
                                           reduce == "mean"))
    i_in, j_in = _array_like(i, "i"), _array_like(j, "j")
    for name, x in (("i", i_in), ("j", j_in)):
        if _kind_of(x) not in "iu":
            raise TypeError(f"{name}: expected an integer array (int64), got dtype {x.dtype}")
    n_pairs = int(i_in.shape[0]) if len(i_in.shape) == 1 else -1
    _check_shape(i_in, "i", (None,))
    _check_shape(j_in, "j", (n_pairs,), " (len(i))")
    f_in, b_in = _array_like(probs_fwd, "probs_fwd"), _array_like(probs_bwd, "probs_bwd")
    for name, x in (("probs_fwd", f_in), ("probs_bwd", b_in)):
        if _kind_of(x) != "f":
            raise TypeError(f"{name}: expected a floating-point array, got dtype {x.dtype}")
        _check_shape(x, name, (n_pairs, 3), " (len(i), 3)")
    arrays = {"i": i_in, "j": j_in, "probs_fwd": f_in, "probs_bwd": b_in}
    p = plan(arrays, backend)
    if p.backend == "triton":
        out = _nli_graph_triton(p, i_in, j_in, f_in, b_in, n_claims, entail_col, contr_col, reduce == "mean")
        return NliGraph(*(finish(x, p) for x in out))
    ii, jj = as_index(i_in, "i"), as_index(j_in, "j")
    fwd = np.ascontiguousarray(_to_numpy(f_in), dtype=np.float64)
    bwd = np.ascontiguousarray(_to_numpy(b_in), dtype=np.float64)
    if p.backend == "cpp":
        out = _core().nli_graph(ii, jj, fwd, bwd, n_claims, entail_col, contr_col, reduce == "mean")
    else:
        _check_range(ii, "i", n_claims, "n_claims")
        _check_range(jj, "j", n_claims, "n_claims")
        _check_no_self_loops(ii, jj, "i", "j")
        _check_probs(fwd, "probs_fwd")
        _check_probs(bwd, "probs_bwd")
        out = reference.nli_graph_ref(ii, jj, fwd, bwd, n_claims, entail_col, contr_col, reduce)
    return NliGraph(*(finish(x, p) for x in out))


def _check_probs(x: np.ndarray, name: str) -> None:
    if x.size:
        bad = ~(np.isfinite(x) & (x >= 0.0) & (x <= 1.0)).all(axis=1)
        if bad.any():
            raise ValueError(f"{name}: probabilities must be finite and in [0, 1] (first bad row {int(np.argmax(bad))})")


def _nli_graph_triton(p: Plan, i, j, fwd, bwd, n_claims, entail_col, contr_col, mean):
    import torch

    from .triton_ops.nli_graph import nli_graph as launch

    device = p.device if p.device is not None and p.device.type == "cuda" else triton_device()

    def tensor(x, dtype):
        if not is_torch_tensor(x):
            x = torch.from_numpy(np.ascontiguousarray(x))
        return x.detach().to(device=device, dtype=dtype).contiguous()

    ti, tj = tensor(i, torch.int64), tensor(j, torch.int64)
    tf, tb = tensor(fwd, torch.float64), tensor(bwd, torch.float64)
    for name, t in (("i", ti), ("j", tj)):
        bad = (t < 0) | (t >= n_claims)
        if t.numel() and bool(bad.any()):
            q = int(bad.nonzero()[0, 0])
            raise ValueError(f"{name}: index {int(t[q])} at position {q} out of range [0, n_claims = {n_claims})")
    loops = ti == tj
    if ti.numel() and bool(loops.any()):
        q = int(loops.nonzero()[0, 0])
        raise ValueError(f"j: self-loop: i[{q}] == j[{q}] == {int(ti[q])}")
    for name, t in (("probs_fwd", tf), ("probs_bwd", tb)):
        bad = ~(torch.isfinite(t) & (t >= 0) & (t <= 1)).all(dim=1)
        if t.numel() and bool(bad.any()):
            raise ValueError(f"{name}: probabilities must be finite and in [0, 1] "
                             f"(first bad row {int(bad.nonzero()[0, 0])})")
    return launch(ti, tj, tf, tb, n_claims, entail_col, contr_col, mean)


# --------------------------------------------------------------------------- pruning and gate


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
    if (_numpy_cpp(backend, (node_scores, edge_i, edge_j, edge_weight, self_penalty))
            and _plain(node_scores, _F64) and _plain(edge_i, _I64) and _plain(edge_j, _I64)
            and _plain(edge_weight, _F64) and (self_penalty is None or _plain(self_penalty, _F64))
            and edge_i.shape == edge_j.shape == edge_weight.shape
            and (self_penalty is None or self_penalty.shape == node_scores.shape)):
        return PruneResult(*_core().greedy_prune(node_scores, edge_i, edge_j, edge_weight, self_penalty))
    s = as_float64(node_scores, "node_scores", (None,), allow_int=True)
    n = s.shape[0]
    ei = as_index(edge_i, "edge_i")
    n_edges = ei.shape[0]
    ej = as_index(edge_j, "edge_j", n_edges, " (len(edge_i))")
    w = as_float64(edge_weight, "edge_weight", (n_edges,), " (len(edge_i))", allow_int=True)
    pen = None
    if self_penalty is not None:
        pen = as_float64(self_penalty, "self_penalty", (n,), " (len(node_scores))", allow_int=True)
    p = _cpu_plan({"node_scores": node_scores, "edge_i": edge_i, "edge_j": edge_j, "edge_weight": edge_weight,
                   "self_penalty": self_penalty}, backend, "greedy_prune")
    if p.backend == "cpp":
        keep, order, F = _core().greedy_prune(s, ei, ej, w, pen)
    else:
        _check_range(ei, "edge_i", n, "len(node_scores)")
        _check_range(ej, "edge_j", n, "len(node_scores)")
        _check_no_self_loops(ei, ej, "edge_i", "edge_j")
        for name, x in (("node_scores", s), ("self_penalty", pen), ("edge_weight", w)):
            if x is not None:
                _check_quantisable(x, name)
        keep, order, F = reference.greedy_prune_ref(s, ei, ej, w, pen)
    if p.output == "numpy":
        return PruneResult(keep, order, float(F))
    return PruneResult(finish(keep, p), finish(order, p), float(F))


def _check_quantisable(x: np.ndarray, name: str) -> None:
    _check_finite(x, name)
    if x.size:
        big = np.abs(x) > _MAX_ABS_VALUE
        if big.any():
            k = int(np.argmax(big))
            raise ValueError(f"{name}: |value| must be <= 2^20 (values are quantised to multiples of 2^-32), "
                             f"got {x[k]} at index {k}")


def gate_stats(
    keep: Any,
    edge_i: Any,
    edge_j: Any,
    kind: Any,
    domain_ids: Any,
    *,
    eps: float = 1e-9,
    count_unknown: bool = True,
    backend: str | None = None,
) -> dict:
    """Statistics the MIRAGE gate reads on the defended set S* = {c : keep[c]}.

    Parameters
    ----------
    keep : bool array, shape (N,)
    edge_i, edge_j : integer arrays, shape (E,), ends in [0, N)
    kind : integer array, shape (E,), values in {-1, 0, +1} (``nli_graph``'s kind)
    domain_ids : integer array, shape (N,)
        Each claim's domain id. A negative id means "unknown domain" (no URL): all kept
        unknown claims together count as ONE domain, like the paper's ``dom(c) = "unknown"``,
        when ``count_unknown`` (default), and as no domain otherwise.
    eps : float >= 0
    count_unknown : bool
    backend : {None, "auto", "reference", "cpp"}

    Returns
    -------
    dict
        ``n_kept`` (int); ``n_support``, ``n_contradiction`` (int): edges of kind +1 / -1
        with both ends kept; ``r_contr`` (float) ``= n_contradiction / (n_support +
        n_contradiction + eps)``, 0.0 when that denominator is 0; ``n_domains`` (int):
        distinct domains among kept claims.
    """
    eps = _check_real(eps, "eps")
    if not (math.isfinite(eps) and eps >= 0.0):
        raise ValueError(f"eps: must be finite and >= 0, got {eps}")
    count_unknown = check_bool(count_unknown, "count_unknown")
    if (_numpy_cpp(backend, (keep, edge_i, edge_j, kind, domain_ids)) and _plain(keep, _BOOL)
            and _plain(edge_i, _I64) and _plain(edge_j, _I64) and _plain(kind, _I8)
            and _plain(domain_ids, _I64)):
        return _core().gate_stats(keep, edge_i, edge_j, kind, domain_ids, eps, count_unknown)
    k_in = _array_like(keep, "keep")
    if _kind_of(k_in) != "b":
        raise TypeError(f"keep: expected a bool array, got dtype {k_in.dtype}")
    _check_shape(k_in, "keep", (None,))
    kp = np.ascontiguousarray(_to_numpy(k_in), dtype=np.bool_)
    n = kp.shape[0]
    ei = as_index(edge_i, "edge_i")
    n_edges = ei.shape[0]
    ej = as_index(edge_j, "edge_j", n_edges, " (len(edge_i))")
    kd = _array_like(kind, "kind")
    if _kind_of(kd) not in "iu":
        raise TypeError(f"kind: expected an integer array (int8), got dtype {kd.dtype}")
    _check_shape(kd, "kind", (n_edges,), " (len(edge_i))")
    kd = _to_numpy(kd)
    dom = as_index(domain_ids, "domain_ids", n, " (len(keep))")
    p = _cpu_plan({"keep": keep, "edge_i": edge_i, "edge_j": edge_j, "kind": kind, "domain_ids": domain_ids},
                  backend, "gate_stats")
    if kd.dtype != np.int8 or p.backend != "cpp":
        # Cast to int8 only after checking the values (a cast would wrap 255 to -1).
        if kd.size and not np.isin(kd, (-1, 0, 1)).all():
            e = int(np.argmax(~np.isin(kd, (-1, 0, 1))))
            raise ValueError(f"kind: values must be -1, 0 or +1, got {int(kd[e])} at position {e}")
    kd = np.ascontiguousarray(kd, dtype=np.int8)
    if p.backend == "cpp":
        return _core().gate_stats(kp, ei, ej, kd, dom, eps, count_unknown)
    _check_range(ei, "edge_i", n, "len(keep)")
    _check_range(ej, "edge_j", n, "len(keep)")
    return reference.gate_stats_ref(kp, ei, ej, kd, dom, eps, count_unknown)
