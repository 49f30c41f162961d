"""Reference for ``claim_relevance`` (the Conformal-RAG claim score)."""

from __future__ import annotations

import numpy as np

from .segmented_cosine import segmented_cosine_ref
from .cosine_matrix import cosine_matrix_ref


def claim_relevance_ref(
    query_emb: np.ndarray,
    doc_emb: np.ndarray,
    doc_offsets: np.ndarray,
    claim_emb: np.ndarray,
    claim_offsets: np.ndarray,
    *,
    query_doc_sim: np.ndarray | None = None,
    clip: bool = True,
) -> np.ndarray:
    """R(c) = max over the docs d of c's query of sim(x, d) * cos(c, d).

    Parameters
    ----------
    query_emb : ndarray, shape (Q, d)
    doc_emb : ndarray, shape (D, d)
    doc_offsets : ndarray, shape (Q + 1,), int64
    claim_emb : ndarray, shape (C, d)
    claim_offsets : ndarray, shape (Q + 1,), int64
    query_doc_sim : ndarray, shape (D,), optional
        Overrides sim(x, d) = cos(query, doc) (multi-hop retrieval: each doc's similarity is
        to the query of the hop that found it).
    clip : bool
        Clip R(c) at 0 (the paper's ``[.]_+``).

    Returns
    -------
    ndarray, shape (C,), float64
        0 for a claim whose query has no docs (whatever ``clip``).
    """
    doc_offsets = np.asarray(doc_offsets, dtype=np.int64)
    claim_offsets = np.asarray(claim_offsets, dtype=np.int64)
    if query_doc_sim is None:
        sim = segmented_cosine_ref(query_emb, doc_emb, doc_offsets)
    else:
        sim = np.asarray(query_doc_sim, dtype=np.float64)
    out = np.zeros(np.asarray(claim_emb).shape[0], dtype=np.float64)
    for q in range(len(doc_offsets) - 1):
        dlo, dhi = doc_offsets[q], doc_offsets[q + 1]
        clo, chi = claim_offsets[q], claim_offsets[q + 1]
        if dhi == dlo or chi == clo:
            continue
        cos_cd = cosine_matrix_ref(claim_emb[clo:chi], doc_emb[dlo:dhi])  # (c, d)
        out[clo:chi] = (cos_cd * sim[dlo:dhi][None, :]).max(axis=1)
    if clip:
        np.maximum(out, 0.0, out=out)
    return out
