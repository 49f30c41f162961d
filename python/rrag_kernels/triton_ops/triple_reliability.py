"""Triton kernel for ``triple_reliability`` (ReliableRAG): the top-k triples of each chain by
``R(t) = alpha * cos(q, t) + (1 - alpha) * c(t) / 10`` over the triples it has not used.

Ties: equal R ranks the lower triple index first; fewer than k available triples pad the row
with index -1 and score -inf.

Design
------
Both forms run as the segmented one: the single form is one question holding all T triples.

1. Inverse norms come from the shared helper in ``cosine_matrix.py``; the credibility term
   ``w(t) = float32((1 - alpha) * c(t) / 10)`` is formed in float64 on the device.
2. Chains are sorted by question (a stable ``torch.sort``), so the triples that the chains of
   a block of ``BLOCK_B`` sorted chains may score form one contiguous range of rows, from the
   first chain's question start to the largest end.
3. ``_triple_reliability_kernel``: grid ``(cdiv(B, BLOCK_B),)``; each program walks its range
   in ``BLOCK_T`` tiles of triple rows, takes ``tl.dot`` of the normalised chain and triple
   tiles (``input_precision="ieee"``, float32 accumulation, ``d`` in ``BLOCK_K`` steps), forms
   ``alpha * cos + w``, sets used triples to -inf, and stores each pair whose triple belongs
   to the chain's question at ``(chain, local position)`` of a ``(B, T_max)`` matrix padded
   with -inf (``T_max`` = the largest question of any chain). A block whose chains span
   several questions also computes the pairs of the other questions and drops them: at most
   ``BLOCK_B`` times the useful work, as padding each question to a full block would cost.
4. The top k of each row by a stable descending ``torch.sort`` (equal scores keep the lower
   local position, i.e. the lower triple index, first); a -inf score (used, or padding of a
   short question) becomes index -1, and rows shorter than k are padded.

Available triples never score -inf: with finite inputs R is in [-1, 1], and with
``check_finite=False`` a non-finite input gives NaN, which ``torch.sort`` ranks first
(unspecified, as in every backend).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .cosine_matrix import device_of, inverse_norms

__all__ = ["triple_reliability_segmented"]

# Tile constants measured on an H200 (benchmarks/gpu_tune.py, results/gpu_tune.csv): the
# fastest of the grid there at issue 2's size. BLOCK_K >= 16: Triton <= 3.6 refuses a float32
# tl.dot with K < 16 (tools/triton_compile_check.py --strict-dot checks it without a GPU).
BLOCK_B = 32
BLOCK_T = 32
BLOCK_K = 32
# 4 warps spill 8 B of registers with HAS_USED (Triton 3.9, sm_90); 8 warps do not (not yet
# timed on a device).
NUM_WARPS = 8


@triton.jit
def _triple_reliability_kernel(
    q_ptr, t_ptr, inv_q_ptr, inv_t_ptr, w_ptr,  # rows, their inverse norms, credibility terms
    chain_ptr, first_ptr, size_ptr, used_at_ptr,  # per slot of the chains sorted by question
    used_ptr, out_ptr,  # uint8 flags (read only with HAS_USED); the (B, t_max) -inf-padded scores
    n_chains, t_max, dim, stride_q, stride_t, alpha,
    HAS_USED: tl.constexpr, BLOCK_B: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_K: tl.constexpr,
):
    slots = tl.program_id(0) * BLOCK_B + tl.arange(0, BLOCK_B)
    slot_mask = slots < n_chains
    # Per sorted slot: its question's first triple row and size, the chain (row of query_emb
    # and of the output), and where its slice of `used` starts.
    first = tl.load(first_ptr + slots, mask=slot_mask, other=0)
    size = tl.load(size_ptr + slots, mask=slot_mask, other=0)
    # Chains are sorted by question: the block's triples end at the largest question end and
    # start at its first chain's (always a valid slot).
    block_hi = tl.max(tl.where(slot_mask, first + size, 0), axis=0)
    block_lo = tl.load(first_ptr + tl.program_id(0) * BLOCK_B)
    chain = tl.load(chain_ptr + slots, mask=slot_mask, other=0)
    inv_q = tl.load(inv_q_ptr + chain, mask=slot_mask, other=0.0)
    cols = tl.arange(0, BLOCK_K)
    q_ptrs = q_ptr + chain[:, None] * stride_q + cols[None, :]
    if HAS_USED:
        used_at = tl.load(used_at_ptr + slots, mask=slot_mask, other=0)

    for r0 in range(block_lo, block_hi, BLOCK_T):
        rows = r0 + tl.arange(0, BLOCK_T)
        row_mask = rows < block_hi
        inv_t = tl.load(inv_t_ptr + rows, mask=row_mask, other=0.0)
        w = tl.load(w_ptr + rows, mask=row_mask, other=0.0)
        # (BLOCK_K, BLOCK_T) triple tile so the dot needs no transpose.
        t_ptrs = t_ptr + rows[None, :] * stride_t + cols[:, None]
        acc = tl.zeros([BLOCK_B, BLOCK_T], dtype=tl.float32)
        for k0 in range(0, dim, BLOCK_K):
            col_ok = (k0 + cols) < dim
            # Unit rows (scaled as loaded): every intermediate stays bounded, as in cosine_matrix.
            q = tl.load(q_ptrs + k0, mask=slot_mask[:, None] & col_ok[None, :], other=0.0) * inv_q[:, None]
            t = tl.load(t_ptrs + k0, mask=col_ok[:, None] & row_mask[None, :], other=0.0) * inv_t[None, :]
            acc = tl.dot(q, t, acc, input_precision="ieee")
        score = alpha * acc + w[None, :]
        local = rows[None, :] - first[:, None]
        mine = slot_mask[:, None] & (local >= 0) & (local < size[:, None])
        if HAS_USED:
            taken = tl.load(used_ptr + used_at[:, None] + local, mask=mine, other=0)
            score = tl.where(taken != 0, float("-inf"), score)
        tl.store(out_ptr + chain[:, None] * t_max + local, score, mask=mine)


def _top_k(scores: torch.Tensor, first: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows of ``scores`` (B, T_max) -> the top k (B, k) by a stable descending sort, -inf -> -1."""
    n_chains, t_max = scores.shape
    out_scores = torch.full((n_chains, k), float("-inf"), dtype=torch.float32, device=scores.device)
    out_indices = torch.full((n_chains, k), -1, dtype=torch.int64, device=scores.device)
    take = min(k, t_max)
    if take == 0:
        return out_scores, out_indices
    ordered, order = torch.sort(scores, dim=1, descending=True, stable=True)
    best = ordered[:, :take]
    out_scores[:, :take] = best
    out_indices[:, :take] = torch.where(best == float("-inf"), -1, order[:, :take] + first[:, None])
    return out_scores, out_indices


def triple_reliability_segmented(
    query_emb: torch.Tensor, triple_emb: torch.Tensor, credibility: torch.Tensor, triple_offsets: torch.Tensor,
    chain_question: torch.Tensor, used: torch.Tensor | None, alpha: float, k: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Each chain's top k triples of its own question by reliability.

    Arguments and results as
    :func:`rrag_kernels.torch_ops.triple_reliability.triple_reliability_segmented` (the same
    contract; inputs already validated, on the CUDA device or the CPU under the interpreter).
    """
    device = query_emb.device
    n_chains, dim = query_emb.shape
    sizes = triple_offsets[1:] - triple_offsets[:-1]
    chain_size = sizes[chain_question]
    chain_first = triple_offsets[:-1][chain_question]
    t_max = int(chain_size.max()) if n_chains else 0  # the padded width: one host sync
    scores = torch.full((n_chains, t_max), float("-inf"), dtype=torch.float32, device=device)
    if n_chains and t_max:
        inv_q, inv_t = inverse_norms(query_emb), inverse_norms(triple_emb)
        w = ((1.0 - alpha) * credibility / 10.0).to(torch.float32)
        used_at = torch.cumsum(chain_size, 0) - chain_size
        _, perm = torch.sort(chain_question, stable=True)
        used_arg = used.view(torch.uint8) if used is not None else scores  # unread without HAS_USED
        with device_of(query_emb):
            _triple_reliability_kernel[(triton.cdiv(n_chains, BLOCK_B),)](
                query_emb, triple_emb, inv_q, inv_t, w, perm, chain_first[perm].contiguous(),
                chain_size[perm].contiguous(), used_at[perm].contiguous(), used_arg, scores,
                n_chains, t_max, dim, query_emb.stride(0), triple_emb.stride(0), float(alpha),
                HAS_USED=used is not None, BLOCK_B=BLOCK_B, BLOCK_T=BLOCK_T, BLOCK_K=BLOCK_K,
                num_warps=NUM_WARPS,
            )
    return _top_k(scores, chain_first, k)

