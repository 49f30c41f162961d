"""``triple_reliability`` in torch (ReliableRAG): questions in groups, each question's chains and
triples padded to the widest (``torch.baddbmm``: ``alpha * cos + w``; used triples and padding
to -inf), the top k through exact int64 keys (equal R: lower triple index first); a question
too large to pad runs alone in blocks merged into a running top k.

``w(t) = float32((1 - alpha) * c(t) / 10)`` is formed in float64, as in the Triton kernel, so
``alpha = 0`` gives exactly ``float32(c / 10)``. Fewer than k available triples pad the row
with index -1 and score -inf; available triples never score -inf (R is in [-1, 1]).
"""

from __future__ import annotations

import torch

from .common import BLOCK_ENTRIES, decode_keys, encode_keys, normalized, padded_index, padded_rows

__all__ = ["triple_reliability_segmented"]

#: A question with more chains or more triples than this runs alone, in blocks, so that no
#: question widens the others' padding beyond LARGE_ROWS x LARGE_ROWS.
LARGE_ROWS = 1024


def triple_reliability_segmented(
    query_emb: torch.Tensor, triple_emb: torch.Tensor, credibility: torch.Tensor, triple_offsets: torch.Tensor,
    chain_question: torch.Tensor, used: torch.Tensor | None, alpha: float, k: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Each chain's top k triples of its own question by reliability.

    Parameters
    ----------
    query_emb : torch.Tensor, shape (B, d), float32, contiguous
    triple_emb : torch.Tensor, shape (T, d), float32, contiguous, same device
    credibility : torch.Tensor, shape (T,), float64, values in [0, 10]
    triple_offsets : torch.Tensor, shape (Q + 1,), int64, valid CSR offsets over the T triples
    chain_question : torch.Tensor, shape (B,), int64, values in [0, Q)
    used : torch.Tensor, shape (sum_b n(chain_question[b]),), bool, or None
        Chain by chain, each chain's slice indexed by local triple position.
    alpha : float in [0, 1]
    k : int >= 1

    Returns
    -------
    scores : torch.Tensor, shape (B, k), float32, descending, -inf padding
    indices : torch.Tensor, shape (B, k), int64, global rows of ``triple_emb``, -1 padding
    """
    device = query_emb.device
    n_chains = query_emb.shape[0]
    scores = torch.full((n_chains, k), float("-inf"), dtype=torch.float32, device=device)
    indices = torch.full((n_chains, k), -1, dtype=torch.int64, device=device)
    if n_chains == 0 or triple_emb.shape[0] == 0:
        return scores, indices
    triple_offsets = triple_offsets.to(device=device, dtype=torch.int64)
    chain_question = chain_question.to(device=device, dtype=torch.int64)
    sizes = triple_offsets[1:] - triple_offsets[:-1]
    chain_size = sizes[chain_question]
    used_at = torch.cumsum(chain_size, 0) - chain_size
    unit_q, unit_t = normalized(query_emb), normalized(triple_emb)
    w = ((1.0 - alpha) * credibility.to(device=device, dtype=torch.float64) / 10.0).to(torch.float32)
    # The chains of each question, side by side: order[group_start[g] + s] is slot s of question g.
    order = torch.sort(chain_question, stable=True).indices
    questions, n_b = torch.unique_consecutive(chain_question[order], return_counts=True)
    group_start = torch.cumsum(n_b, 0) - n_b
    first, n_t = triple_offsets[:-1][questions], sizes[questions]
    dim = max(1, query_emb.shape[1])
    large = (n_t > 0) & ((n_b > LARGE_ROWS) | (n_t > LARGE_ROWS))
    for g in torch.nonzero(large).reshape(-1).tolist():  # each alone, in blocks
        chains = order[int(group_start[g]):int(group_start[g] + n_b[g])]
        lo, hi = int(first[g]), int(first[g] + n_t[g])
        keys = _question_top_keys(unit_q[chains], unit_t[lo:hi], w[lo:hi], alpha, k,
                                  None if used is None else (used, used_at[chains]))
        _store(scores, indices, chains, keys, lo)
    small = torch.nonzero((n_t > 0) & ~large).reshape(-1)
    if small.numel():
        width_b, width_t = int(n_b[small].max()), int(n_t[small].max())
        group = max(1, BLOCK_ENTRIES // (width_b * width_t + (width_b + width_t) * dim))
        local = torch.arange(width_t, dtype=torch.int64, device=device)
        if small.numel() > group and small.numel() % group:
            # The last group padded with repeats of its last question (written twice, alike):
            # one batched-product shape for every group.
            small = torch.cat([small, small[-1:].expand(group - small.numel() % group)])
        for g0 in range(0, small.numel(), group):
            g = small[g0:g0 + group]
            slot_idx, slot_valid = padded_index(group_start[g], n_b[g], width_b)
            chains = order[slot_idx]  # (G, width_b); padding slots repeat a real chain, never stored
            t_idx, t_valid = padded_index(first[g], n_t[g], width_t)
            block = torch.baddbmm(w[t_idx][:, None, :], unit_q[chains], unit_t[t_idx].transpose(1, 2), alpha=alpha)
            block.masked_fill_(~t_valid[:, None, :], float("-inf"))
            if used is not None:
                at = used_at[chains][:, :, None] + local[None, None, :]
                taken = used[torch.where(t_valid[:, None, :], at, 0)] & t_valid[:, None, :]
                block.masked_fill_(taken, float("-inf"))
            keys = encode_keys(block.reshape(-1, width_t), local[None, :])
            keys = torch.topk(keys, min(k, width_t), dim=1, sorted=True).values
            rows = slot_valid.reshape(-1)
            _store(scores, indices, chains.reshape(-1)[rows], keys[rows],
                   first[g][:, None].expand(-1, width_b).reshape(-1)[rows][:, None])
    return scores, indices


def _store(scores, indices, chains, keys, first) -> None:
    """Decode a block of top keys (local triple positions) into the chains' output rows."""
    best, local = decode_keys(keys)
    take = keys.shape[1]
    scores[chains, :take] = best
    indices[chains, :take] = torch.where(best == float("-inf"), -1, local + first)


def _question_top_keys(unit_q, unit_t, w, alpha, k, used):
    """(n_b, min(k, n)) descending keys of one question's chains over its n triples (local
    indices), in blocks of at most BLOCK_ENTRIES scores."""
    n_b, n = unit_q.shape[0], unit_t.shape[0]
    cols = max(k, BLOCK_ENTRIES // max(n_b, 1))
    best = torch.empty((n_b, 0), dtype=torch.int64, device=unit_q.device)
    for c0 in range(0, n, cols):
        c1 = min(c0 + cols, n)
        rows, bias = unit_t[c0:c1], w[c0:c1]
        if n > cols:  # the last block padded: one product shape for every block
            rows, bias = padded_rows(rows, cols), padded_rows(bias[:, None], cols)[:, 0]
        block = torch.addmm(bias[None, :], unit_q, rows.T, alpha=alpha)[:, :c1 - c0]
        if used is not None:
            flags, start = used
            at = start[:, None] + torch.arange(c0, c1, dtype=torch.int64, device=unit_q.device)[None, :]
            block = block.masked_fill_(flags[at], float("-inf"))
        keys = encode_keys(block, c0)
        if best.shape[1]:
            keys = torch.cat([best, keys], dim=1)
        best = torch.topk(keys, min(k, keys.shape[1]), dim=1, sorted=True).values
    return best

