"""Reference for ``segmented_cosine``."""

from __future__ import annotations

import numpy as np

from .cosine_matrix import inverse_norms_ref


def segmented_cosine_ref(queries: np.ndarray, docs: np.ndarray, doc_offsets: np.ndarray) -> np.ndarray:
    """Cosine of each doc with the query that owns it.

    Parameters
    ----------
    queries : ndarray, shape (Q, d)
    docs : ndarray, shape (D, d)
    doc_offsets : ndarray, shape (Q + 1,), int64
        CSR offsets: the docs of query ``q`` are ``docs[doc_offsets[q]:doc_offsets[q + 1]]``.

    Returns
    -------
    ndarray, shape (D,), float64
    """
    q64 = np.asarray(queries, dtype=np.float64)
    d64 = np.asarray(docs, dtype=np.float64)
    offsets = np.asarray(doc_offsets, dtype=np.int64)
    out = np.zeros(d64.shape[0], dtype=np.float64)
    inv_q = inverse_norms_ref(q64)
    inv_d = inverse_norms_ref(d64)
    for q in range(q64.shape[0]):
        lo, hi = offsets[q], offsets[q + 1]
        out[lo:hi] = (d64[lo:hi] @ q64[q]) * inv_d[lo:hi] * inv_q[q]
    return out
