"""``claim_relevance``: Conformal-RAG's claim relevance R(c) in one fused pass."""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import reference
from ._dispatch import core_module, finish, launcher, numpy_float32, plan, to_torch_index, torch_float32
from ._validation import as_offsets, check_bool, check_matrices, check_vector

__all__ = ["claim_relevance"]


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
    query_doc_sim : array, shape (D,), float16/32/64, optional
        Overrides sim(x, d) = cos(query, doc): in multi-hop retrieval each doc's similarity
        is to the query of the hop that found it. ``query_emb`` is then only checked.
    clip : bool
        Clip R(c) at 0 (the paper's ``[.]_+``).
    check_finite : bool
    backend : {None, "auto", "reference", "cpp", "triton", "torch"}

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
        check_vector(query_doc_sim, "query_doc_sim", n_d, " (one per doc)")
    arrays["query_doc_sim"] = query_doc_sim
    # Offsets count for the output type too (a tensor in, a tensor out), as in segmented_cosine.
    p = plan({**arrays, "doc_offsets": doc_offsets, "claim_offsets": claim_offsets}, backend, "claim_relevance")
    if p.backend in ("triton", "torch"):
        t, device = torch_float32(p, arrays, check_finite)
        out = launcher(p, "claim_relevance")(
            t["query_emb"], t["doc_emb"], to_torch_index(d_off, device), t["claim_emb"],
            to_torch_index(c_off, device), t.get("query_doc_sim"), clip,
        )
        return finish(out, p)
    x = numpy_float32(p, arrays, check_finite)
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
