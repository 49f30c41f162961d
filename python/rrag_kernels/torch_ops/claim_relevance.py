"""``claim_relevance`` in torch: batched matrix products over groups of queries, each query's
claims and docs padded to the widest (``torch.bmm``; groups sized to BLOCK_ENTRIES), then a
masked max; a query with more than LARGE_ROWS claims or docs runs alone in claim x doc blocks.
No (C, D) matrix is formed, and the planning stays on the device but for a few sizes (no
per-query host loop)."""

from __future__ import annotations

import torch

from .common import BLOCK_ENTRIES, normalized, padded_index
from .segmented_cosine import segmented_cosine

__all__ = ["claim_relevance"]

#: A query with more claims or more docs than this runs alone, in blocks, so that no query
#: widens the others' padding beyond LARGE_ROWS x LARGE_ROWS.
LARGE_ROWS = 1024


def claim_relevance(
    query_emb: torch.Tensor,
    doc_emb: torch.Tensor,
    doc_offsets: torch.Tensor,
    claim_emb: torch.Tensor,
    claim_offsets: torch.Tensor,
    query_doc_sim: torch.Tensor | None,
    clip: bool,
) -> torch.Tensor:
    """R(c) = max over the docs d of c's query of sim(x, d) * cos(c, d).

    Parameters
    ----------
    query_emb : torch.Tensor, shape (Q, d), float32, contiguous
    doc_emb : torch.Tensor, shape (D, d), float32, contiguous
    doc_offsets : torch.Tensor, shape (Q + 1,), int64
    claim_emb : torch.Tensor, shape (C, d), float32, contiguous
    claim_offsets : torch.Tensor, shape (Q + 1,), int64
    query_doc_sim : torch.Tensor, shape (D,), float32, or None
        Overrides sim(x, d) = cos(query, doc).
    clip : bool
        Clip R(c) at 0.

    Returns
    -------
    torch.Tensor, shape (C,), float32
        0 for a claim whose query has no docs, whatever ``clip``.
    """
    device = claim_emb.device
    out = torch.zeros(claim_emb.shape[0], dtype=torch.float32, device=device)
    if claim_emb.shape[0] == 0 or doc_emb.shape[0] == 0:
        return out
    sim = query_doc_sim if query_doc_sim is not None else segmented_cosine(query_emb, doc_emb, doc_offsets)
    unit_c, unit_d = normalized(claim_emb), normalized(doc_emb)
    dim = max(1, claim_emb.shape[1])
    c_start, d_start = claim_offsets[:-1], doc_offsets[:-1]
    n_c, n_d = claim_offsets[1:] - c_start, doc_offsets[1:] - d_start
    active = (n_c > 0) & (n_d > 0)
    large = active & ((n_c > LARGE_ROWS) | (n_d > LARGE_ROWS))
    for q in torch.nonzero(large).reshape(-1).tolist():  # each alone, in blocks
        c0, c1, d0, d1 = (int(v) for v in (c_start[q], claim_offsets[q + 1], d_start[q], doc_offsets[q + 1]))
        _one_large_query(out, unit_c[c0:c1], unit_d[d0:d1], sim[d0:d1], c0, dim)
    small = torch.nonzero(active & ~large).reshape(-1)
    if small.numel():
        width_c, width_d = int(n_c[small].max()), int(n_d[small].max())
        per_query = width_c * width_d + (width_c + width_d) * dim
        group = max(1, BLOCK_ENTRIES // per_query)
        for g0 in range(0, small.numel(), group):
            g = small[g0:g0 + group]
            c_idx, c_valid = padded_index(c_start[g], n_c[g], width_c)
            d_idx, d_valid = padded_index(d_start[g], n_d[g], width_d)
            scaled = torch.bmm(unit_c[c_idx], unit_d[d_idx].transpose(1, 2)) * sim[d_idx][:, None, :]
            best = scaled.masked_fill_(~d_valid[:, None, :], float("-inf")).amax(dim=2)
            out[c_idx[c_valid]] = best[c_valid]
    if clip:
        out.clamp_min_(0.0)
    return out


def _one_large_query(out, unit_c, unit_d, sim, first_claim: int, dim: int) -> None:
    """One query's claims against its docs in blocks of at most BLOCK_ENTRIES products."""
    n_c, n_d = unit_c.shape[0], unit_d.shape[0]
    doc_rows = max(1, min(n_d, BLOCK_ENTRIES // (2 * dim)))
    claim_rows = max(1, min(n_c, BLOCK_ENTRIES // (doc_rows + dim)))
    for c0 in range(0, n_c, claim_rows):
        c1 = min(c0 + claim_rows, n_c)
        best = torch.full((c1 - c0,), float("-inf"), dtype=torch.float32, device=unit_c.device)
        for d0 in range(0, n_d, doc_rows):
            d1 = min(d0 + doc_rows, n_d)
            block = (unit_c[c0:c1] @ unit_d[d0:d1].T) * sim[d0:d1][None, :]
            best = torch.maximum(best, block.amax(dim=1))
        out[first_claim + c0:first_claim + c1] = best
