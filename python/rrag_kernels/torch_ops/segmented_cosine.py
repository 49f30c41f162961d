"""``segmented_cosine`` in torch: each doc's dot with its owner's unit row, scaled by the doc's
power of two (the query side carries it, so the docs are read, not rewritten), over the doc's
rescaled norm; in bounded blocks. About as many passes over the docs as the padded-bmm
formulation a user writes."""

from __future__ import annotations

import torch

from .common import BLOCK_ENTRIES, normalized, row_scales, segment_owners

__all__ = ["segmented_cosine"]


def segmented_cosine(queries: torch.Tensor, docs: torch.Tensor, doc_offsets: torch.Tensor) -> torch.Tensor:
    """Cosine of each doc with the query that owns it.

    Parameters
    ----------
    queries : torch.Tensor, shape (Q, d), float32, contiguous
    docs : torch.Tensor, shape (D, d), float32, contiguous, same device
    doc_offsets : torch.Tensor, shape (Q + 1,), int64
        CSR offsets: the docs of query ``q`` are ``docs[doc_offsets[q]:doc_offsets[q + 1]]``.

    Returns
    -------
    torch.Tensor, shape (D,), float32
        0 where the doc or its query is the zero vector.
    """
    n_docs, dim = docs.shape
    out = torch.zeros(n_docs, dtype=torch.float32, device=docs.device)
    if n_docs == 0 or dim == 0:
        return out
    owner = segment_owners(doc_offsets.to(device=docs.device, dtype=torch.int64), n_docs)
    unit_q = normalized(queries)
    rows = max(1, BLOCK_ENTRIES // dim)
    for r0 in range(0, n_docs, rows):
        r1 = min(r0 + rows, n_docs)
        block = docs[r0:r1]
        power, rescaled = row_scales(block)
        partner = unit_q.index_select(0, owner[r0:r1]).mul_(power)  # exact: a power of two
        dot = torch.einsum("ij,ij->i", block, partner)
        norm = rescaled[:, 0]
        out[r0:r1] = torch.where(norm > 0, dot / torch.where(norm > 0, norm, 1.0), 0.0)
    return out
