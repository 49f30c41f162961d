"""Public kernels: validate, then dispatch to the reference, C++ or Triton backend.

Conventions shared by every op
------------------------------
* Embeddings are float16/32/64 numpy arrays or torch tensors, converted to contiguous
  float32. The output type follows the input: numpy in, numpy out; a torch CPU tensor in,
  a torch CPU tensor out; a CUDA tensor in, a CUDA tensor out (gradients are not tracked).
* ``backend``: None/"auto" (CPU data -> "cpp", CUDA tensors -> "triton"), "reference"
  (float64 NumPy truth, cast to float32), "cpp", or "triton" (CUDA, or the CPU under
  ``TRITON_INTERPRET=1``).
* Cosine of a zero vector is 0, never NaN. A row whose float32 squared norm underflows to
  0 counts as a zero vector.
* Offsets are CSR-style integer arrays (converted to int64): ``offsets[0] == 0``,
  non-decreasing, ``offsets[-1] == len(rows)``; segment ``q`` is
  ``rows[offsets[q]:offsets[q + 1]]``.
* ``check_finite=True`` (default) raises ValueError naming the argument when an input holds
  NaN or inf. The C++ backend gets this check for free from the squared norms it computes
  anyway, and also rejects a row whose squared norm overflows float32 (|x| ≳ 1e19); with
  ``check_finite=False`` such inputs give unspecified (NaN) results.
* Bad arguments raise TypeError (wrong kind or dtype) or ValueError (shape or value); the
  message starts with the argument's name.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import reference
from ._dispatch import Plan, core_module, finish, plan, to_numpy32, to_torch32, to_torch_index, triton_device
from ._validation import (
    as_offsets,
    check_bool,
    check_finite_numpy,
    check_finite_torch,
    check_k,
    check_matrices,
    check_vector,
)

# The MIRAGE claim-graph kernels are implemented in _graph_ops and public from here.
from ._graph_ops import (  # noqa: E402
    TOKEN_PATTERN,
    NliGraph,
    Pairs,
    PruneResult,
    claim_token_ids,
    gate_stats,
    greedy_prune,
    label_columns,
    nli_graph,
    select_pairs,
)

# The conformal-factuality kernels are implemented in _conformal_ops and public from here.
from ._conformal_ops import SweepResult, conformal_quantile, conformal_sweep, r_scores  # noqa: E402

__all__ = [
    "NliGraph",
    "SweepResult",
    "conformal_quantile",
    "conformal_sweep",
    "r_scores",
    "Pairs",
    "PruneResult",
    "TOKEN_PATTERN",
    "claim_relevance",
    "claim_token_ids",
    "cosine_matrix",
    "gate_stats",
    "greedy_prune",
    "label_columns",
    "nli_graph",
    "segmented_cosine",
    "select_pairs",
    "topk_cosine",
]


def _numpy_inputs(p: Plan, arrays: dict[str, Any], check_finite: bool) -> dict[str, np.ndarray]:
    out = {name: to_numpy32(x) for name, x in arrays.items() if x is not None}
    # The C++ kernels check finiteness inside their own pass over the data.
    if check_finite and p.backend == "reference":
        for name, x in out.items():
            check_finite_numpy(x, name)
    return out


def _torch_inputs(p: Plan, arrays: dict[str, Any], check_finite: bool) -> tuple[dict[str, Any], Any]:
    device = p.device if p.device is not None and p.device.type == "cuda" else triton_device()
    out = {name: to_torch32(x, device) for name, x in arrays.items() if x is not None}
    if check_finite:
        for name, x in out.items():
            check_finite_torch(x, name)
    return out, device


def cosine_matrix(a: Any, b: Any, *, check_finite: bool = True, backend: str | None = None) -> Any:
    """All-pairs cosine similarity.

    Parameters
    ----------
    a : array, shape (n, d), float16/32/64
    b : array, shape (m, d), float16/32/64
    check_finite : bool
        Raise ValueError on NaN/inf inputs.
    backend : {None, "auto", "reference", "cpp", "triton"}

    Returns
    -------
    array, shape (n, m), float32
        ``out[i, j] = cos(a[i], b[j])``, computed as ``(<a_i, b_j> / |a_i|) / |b_j|``.
    """
    check_finite = check_bool(check_finite, "check_finite")
    arrays = {"a": a, "b": b}
    check_matrices(arrays)
    p = plan(arrays, backend)
    if p.backend == "triton":
        from .triton_ops.cosine_matrix import cosine_matrix as launch

        t, _ = _torch_inputs(p, arrays, check_finite)
        return finish(launch(t["a"], t["b"]), p)
    x = _numpy_inputs(p, arrays, check_finite)
    if p.backend == "cpp":
        out = core_module().cosine_matrix(x["a"], x["b"], check_finite)
    else:
        out = reference.cosine_matrix_ref(x["a"], x["b"]).astype(np.float32)
    return finish(out, p)


def segmented_cosine(
    queries: Any, docs: Any, doc_offsets: Any, *, check_finite: bool = True, backend: str | None = None
) -> Any:
    """Cosine of each doc with the query that owns it (ragged batches, no padding).

    Parameters
    ----------
    queries : array, shape (Q, d), float16/32/64
    docs : array, shape (D, d), float16/32/64
    doc_offsets : integer array, shape (Q + 1,)
        The docs of query ``q`` are ``docs[doc_offsets[q]:doc_offsets[q + 1]]``.
    check_finite : bool
    backend : {None, "auto", "reference", "cpp", "triton"}

    Returns
    -------
    array, shape (D,), float32
    """
    check_finite = check_bool(check_finite, "check_finite")
    arrays = {"queries": queries, "docs": docs}
    check_matrices(arrays)
    offsets = as_offsets(doc_offsets, "doc_offsets", int(queries.shape[0]), int(docs.shape[0]))
    p = plan({**arrays, "doc_offsets": doc_offsets}, backend)
    if p.backend == "triton":
        from .triton_ops.segmented_cosine import segmented_cosine as launch

        t, device = _torch_inputs(p, arrays, check_finite)
        return finish(launch(t["queries"], t["docs"], to_torch_index(offsets, device)), p)
    x = _numpy_inputs(p, arrays, check_finite)
    if p.backend == "cpp":
        out = core_module().segmented_cosine(x["queries"], x["docs"], offsets, check_finite)
    else:
        out = reference.segmented_cosine_ref(x["queries"], x["docs"], offsets).astype(np.float32)
    return finish(out, p)


def claim_relevance(
    query_emb: Any,
    doc_emb: Any,
    doc_offsets: Any,
    claim_emb: Any,
    claim_offsets: Any,
    *,
    query_doc_sim: Any = None,
    clip: bool = True,
    check_finite: bool = True,
    backend: str | None = None,
) -> Any:
    """Conformal-RAG claim relevance R(c) = max_d sim(x, d) * cos(c, d), in one fused pass.

    For each claim c of query x, the max runs over the docs retrieved for x; no (C x D)
    intermediate is formed.

    Parameters
    ----------
    query_emb : array, shape (Q, d), float16/32/64
    doc_emb : array, shape (D, d), float16/32/64
    doc_offsets : integer array, shape (Q + 1,)
        Docs of query ``q``: ``doc_emb[doc_offsets[q]:doc_offsets[q + 1]]``.
    claim_emb : array, shape (C, d), float16/32/64
    claim_offsets : integer array, shape (Q + 1,)
        Claims of query ``q``: ``claim_emb[claim_offsets[q]:claim_offsets[q + 1]]``.
    query_doc_sim : array, shape (D,), optional
        Overrides sim(x, d) = cos(query, doc): in multi-hop retrieval each doc's similarity
        is to the query of the hop that found it. ``query_emb`` is then only checked.
    clip : bool
        Clip R(c) at 0 (the paper's ``[.]_+``).
    check_finite : bool
    backend : {None, "auto", "reference", "cpp", "triton"}

    Returns
    -------
    array, shape (C,), float32
        0 for a claim whose query has no docs, whatever ``clip``.
    """
    check_finite = check_bool(check_finite, "check_finite")
    clip = check_bool(clip, "clip")
    arrays = {"query_emb": query_emb, "doc_emb": doc_emb, "claim_emb": claim_emb}
    check_matrices(arrays)
    n_q, n_d = int(query_emb.shape[0]), int(doc_emb.shape[0])
    d_off = as_offsets(doc_offsets, "doc_offsets", n_q, n_d)
    c_off = as_offsets(claim_offsets, "claim_offsets", n_q, int(claim_emb.shape[0]))
    if query_doc_sim is not None:
        check_vector(query_doc_sim, "query_doc_sim", n_d)
    arrays["query_doc_sim"] = query_doc_sim
    p = plan(arrays, backend)
    if p.backend == "triton":
        from .triton_ops.claim_relevance import claim_relevance as launch

        t, device = _torch_inputs(p, arrays, check_finite)
        out = launch(
            t["query_emb"], t["doc_emb"], to_torch_index(d_off, device), t["claim_emb"],
            to_torch_index(c_off, device), t.get("query_doc_sim"), clip,
        )
        return finish(out, p)
    x = _numpy_inputs(p, arrays, check_finite)
    if p.backend == "cpp":
        out = core_module().claim_relevance(
            x["query_emb"], x["doc_emb"], d_off, x["claim_emb"], c_off, x.get("query_doc_sim"), clip, check_finite
        )
    else:
        out = reference.claim_relevance_ref(
            x["query_emb"], x["doc_emb"], d_off, x["claim_emb"], c_off,
            query_doc_sim=x.get("query_doc_sim"), clip=clip,
        ).astype(np.float32)
    return finish(out, p)


def topk_cosine(
    queries: Any, corpus: Any, k: int, *, check_finite: bool = True, backend: str | None = None
) -> tuple[Any, Any]:
    """The k corpus rows most cosine-similar to each query, without forming the Q x N matrix.

    Tie-break: equal float32 scores come out by lower corpus index first, so the result is
    unique. In the C++ backend the scores equal ``cosine_matrix(queries, corpus)`` bitwise.

    Parameters
    ----------
    queries : array, shape (Q, d), float16/32/64
    corpus : array, shape (N, d), float16/32/64
    k : int, 1 <= k <= N
    check_finite : bool
    backend : {None, "auto", "reference", "cpp", "triton"}

    Returns
    -------
    scores : array, shape (Q, k), float32, descending along each row
    indices : array, shape (Q, k), int64, rows of ``corpus``
    """
    check_finite = check_bool(check_finite, "check_finite")
    arrays = {"queries": queries, "corpus": corpus}
    check_matrices(arrays)
    k = check_k(k, int(corpus.shape[0]))
    p = plan(arrays, backend)
    if p.backend == "triton":
        from .triton_ops.topk_cosine import topk_cosine as launch

        t, _ = _torch_inputs(p, arrays, check_finite)
        scores, indices = launch(t["queries"], t["corpus"], k)
        return finish(scores, p), finish(indices, p)
    x = _numpy_inputs(p, arrays, check_finite)
    if p.backend == "cpp":
        scores, indices = core_module().topk_cosine(x["queries"], x["corpus"], k, check_finite)
    else:
        scores, indices = reference.topk_cosine_ref(x["queries"], x["corpus"], k)
        scores = scores.astype(np.float32)
    return finish(scores, p), finish(indices, p)
