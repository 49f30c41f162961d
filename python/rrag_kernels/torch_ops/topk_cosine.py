"""``topk_cosine`` in torch: corpus blocks of bounded size, each a matrix product, merged into a
running top k through exact int64 keys (so no (Q, N) matrix, and ties by lower index). Every
block has one shape (the last one padded), so on CUDA identical rows score alike wherever
they fall; a CPU BLAS may still round them one ulp apart by their place in its tiles."""

from __future__ import annotations

import torch

from .common import BLOCK_ENTRIES, decode_keys, encode_keys, normalized, padded_rows

__all__ = ["topk_cosine"]


def topk_cosine(
    queries: torch.Tensor, corpus: torch.Tensor, k: int, *, chunk_rows: int | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """The k corpus rows most cosine-similar to each query.

    Parameters
    ----------
    queries : torch.Tensor, shape (Q, d), float32, contiguous
    corpus : torch.Tensor, shape (N, d), float32, contiguous, same device
    k : int, 1 <= k <= N
    chunk_rows : int, optional
        Corpus rows per block (default: as many as keep the (Q, rows) scores and the
        (rows, d) normalised rows each within ``BLOCK_ENTRIES``, at least k). Only a tuning
        and testing knob: the result does not depend on it.

    Returns
    -------
    scores : torch.Tensor, shape (Q, k), float32, descending along each row
    indices : torch.Tensor, shape (Q, k), int64
        Equal scores are ordered by lower corpus index first.
    """
    n_queries = queries.shape[0]
    n_rows = corpus.shape[0]
    if not 1 <= k <= n_rows:
        raise ValueError(f"k: must satisfy 1 <= k <= N={n_rows}, got {k}")
    if n_queries == 0:
        return (torch.empty((0, k), dtype=torch.float32, device=queries.device),
                torch.empty((0, k), dtype=torch.int64, device=queries.device))
    if chunk_rows is None:
        chunk_rows = max(k, min(BLOCK_ENTRIES // n_queries, BLOCK_ENTRIES // max(1, queries.shape[1])))
    unit_q = normalized(queries)
    best = torch.empty((n_queries, 0), dtype=torch.int64, device=queries.device)
    for r0 in range(0, n_rows, chunk_rows):
        r1 = min(r0 + chunk_rows, n_rows)
        rows = normalized(corpus[r0:r1])
        if n_rows > chunk_rows:  # the last block padded: one product shape for every block
            rows = padded_rows(rows, chunk_rows)
        keys = encode_keys((unit_q @ rows.T)[:, :r1 - r0], r0)
        if best.shape[1]:
            keys = torch.cat([best, keys], dim=1)
        best = torch.topk(keys, min(k, keys.shape[1]), dim=1, sorted=True).values
    scores, indices = decode_keys(best)
    return scores.contiguous(), indices.contiguous()
