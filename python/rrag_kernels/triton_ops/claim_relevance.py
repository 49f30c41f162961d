"""Triton kernel for ``claim_relevance`` (the Conformal-RAG claim score), fused.

``R(c) = max over the docs d of c's query of sim(x, d) * cos(c, d)``, clipped at 0 when
``clip``, and 0 when the claim's query has no docs.

Design
------
One launch, one program per query (grid ``(Q,)``): nothing but the output is written, no
norm or similarity pass runs before it, and with at most ``BLOCK_C`` claims and
``BLOCK_DOC`` docs a query (RAG's usual 5-20) each claim, doc and query row is read from
memory once; the second pass over a tile (below) hits the cache.

``_claim_relevance_kernel``: for each tile of the query's claims, for each tile of its docs,
a first pass over ``d`` (``BLOCK_K`` steps) takes every row's largest magnitude; the second
takes ``tl.dot`` of the max-abs rescaled tiles (``input_precision="ieee"``, float32
accumulation) together with the rescaled squared norms, and, unless ``query_doc_sim`` is
given, the rescaled query row's dot with each doc. ``cos = dot / sqrt(|c|^2 |d|^2)`` (0 for a
zero row; the rescale keeps tiny and huge rows exact), times sim, masked to the query's docs,
and a running max per claim. Larger segments loop over tiles; the extra reads are one doc
tile per claim tile.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .cosine_matrix import device_of

__all__ = ["claim_relevance"]

# One program per query: 16 x 16 claim x doc tiles (tl.dot needs M, N, K >= 16), d in
# steps of 64. Not yet timed on a device.
BLOCK_C = 16
BLOCK_DOC = 16
BLOCK_K = 64
NUM_WARPS = 4


@triton.jit
def _row_max_abs(ptr, rows, row_mask, stride, dim, BLOCK_K: tl.constexpr, ROWS: tl.constexpr):
    """Largest |x| of each of ``rows`` (a 1-d block of row indices), over ``d``."""
    cols = tl.arange(0, BLOCK_K)
    out = tl.zeros([ROWS], dtype=tl.float32)
    for k0 in range(0, dim, BLOCK_K):
        mask = row_mask[:, None] & ((k0 + cols) < dim)[None, :]
        x = tl.load(ptr + rows.to(tl.int64)[:, None] * stride + (k0 + cols)[None, :], mask=mask, other=0.0)
        out = tl.maximum(out, tl.max(tl.abs(x), axis=1))
    return tl.where(out > 0.0, out, 1.0)


@triton.jit
def _claim_relevance_kernel(
    query_ptr,
    doc_ptr,
    claim_ptr,
    sim_ptr,
    doc_offsets_ptr,
    claim_offsets_ptr,
    out_ptr,
    dim,
    stride_q,
    stride_doc,
    stride_claim,
    HAS_SIM: tl.constexpr,
    CLIP: tl.constexpr,
    BLOCK_C: tl.constexpr,
    BLOCK_DOC: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    q = tl.program_id(0).to(tl.int64)
    doc_lo = tl.load(doc_offsets_ptr + q)
    doc_hi = tl.load(doc_offsets_ptr + q + 1)
    claim_lo = tl.load(claim_offsets_ptr + q)
    claim_hi = tl.load(claim_offsets_ptr + q + 1)
    cols = tl.arange(0, BLOCK_K)
    one = tl.arange(0, 1)
    q_scale = tl.full([1], 1.0, tl.float32)
    if not HAS_SIM:
        q_scale = _row_max_abs(query_ptr, q + one, one >= 0, stride_q, dim, BLOCK_K, 1)
    for c0 in range(claim_lo, claim_hi, BLOCK_C):
        claims = c0 + tl.arange(0, BLOCK_C)
        claim_mask = claims < claim_hi
        c_scale = _row_max_abs(claim_ptr, claims, claim_mask, stride_claim, dim, BLOCK_K, BLOCK_C)
        best = tl.full([BLOCK_C], float("-inf"), tl.float32)
        for d0 in range(doc_lo, doc_hi, BLOCK_DOC):
            docs = d0 + tl.arange(0, BLOCK_DOC)
            doc_mask = docs < doc_hi
            d_scale = _row_max_abs(doc_ptr, docs, doc_mask, stride_doc, dim, BLOCK_K, BLOCK_DOC)
            acc = tl.zeros([BLOCK_C, BLOCK_DOC], dtype=tl.float32)
            c_sq = tl.zeros([BLOCK_C], dtype=tl.float32)
            d_sq = tl.zeros([BLOCK_DOC], dtype=tl.float32)
            q_sq = tl.zeros([1], dtype=tl.float32)
            q_dot = tl.zeros([BLOCK_DOC], dtype=tl.float32)
            for k0 in range(0, dim, BLOCK_K):
                col_ok = (k0 + cols) < dim
                c = tl.load(claim_ptr + claims.to(tl.int64)[:, None] * stride_claim + (k0 + cols)[None, :],
                            mask=claim_mask[:, None] & col_ok[None, :], other=0.0) / c_scale[:, None]
                # (BLOCK_K, BLOCK_DOC) doc tile so the dot needs no transpose.
                x = tl.load(doc_ptr + docs.to(tl.int64)[None, :] * stride_doc + (k0 + cols)[:, None],
                            mask=col_ok[:, None] & doc_mask[None, :], other=0.0) / d_scale[None, :]
                acc = tl.dot(c, x, acc, input_precision="ieee")
                c_sq += tl.sum(c * c, axis=1)
                d_sq += tl.sum(x * x, axis=0)
                if not HAS_SIM:
                    v = tl.load(query_ptr + q * stride_q + k0 + cols, mask=col_ok, other=0.0) / q_scale
                    q_sq += tl.sum(v * v, axis=0)
                    q_dot += tl.sum(v[:, None] * x, axis=0)
            both = (c_sq[:, None] > 0.0) & (d_sq[None, :] > 0.0)
            cos = tl.where(both, acc / tl.sqrt(tl.where(both, c_sq[:, None] * d_sq[None, :], 1.0)), 0.0)
            if HAS_SIM:
                sim = tl.load(sim_ptr + docs, mask=doc_mask, other=0.0)
            else:
                q_ok = (q_sq > 0.0) & (d_sq > 0.0)
                sim = tl.where(q_ok, q_dot / tl.sqrt(tl.where(q_ok, q_sq * d_sq, 1.0)), 0.0)
            score = tl.where(doc_mask[None, :], cos * sim[None, :], float("-inf"))
            best = tl.maximum(best, tl.max(score, axis=1))
        out = tl.where(doc_hi > doc_lo, best, 0.0)
        if CLIP:
            out = tl.maximum(out, 0.0)
        # One zero: -0.0 (a negative sim times an orthogonal claim) reads as 0.
        out = tl.where(out == 0.0, 0.0, out)
        tl.store(out_ptr + claims, out, mask=claim_mask)


def claim_relevance(
    query_emb: torch.Tensor,
    doc_emb: torch.Tensor,
    doc_offsets: torch.Tensor,
    claim_emb: torch.Tensor,
    claim_offsets: torch.Tensor,
    query_doc_sim: torch.Tensor | None,
    clip: bool,
) -> torch.Tensor:
    """R(c) = max over the docs d of c's query of sim(x, d) * cos(c, d), in one launch.

    Arguments and results as :func:`rrag_kernels.torch_ops.claim_relevance.claim_relevance` (the same
    contract; inputs already validated, on the CUDA device or the CPU under the interpreter).
    """
    device = claim_emb.device
    n_claims, dim = claim_emb.shape
    n_docs = doc_emb.shape[0]
    out = torch.zeros(n_claims, dtype=torch.float32, device=device)
    if n_claims == 0 or n_docs == 0:
        return out
    doc_offsets = doc_offsets.to(device=device, dtype=torch.int64).contiguous()
    claim_offsets = claim_offsets.to(device=device, dtype=torch.int64).contiguous()
    n_queries = doc_offsets.shape[0] - 1
    sim = query_doc_sim.to(device=device, dtype=torch.float32).contiguous() if query_doc_sim is not None else out
    with device_of(claim_emb):
        _claim_relevance_kernel[(n_queries,)](
            query_emb, doc_emb, claim_emb, sim, doc_offsets, claim_offsets, out,
            dim, query_emb.stride(0), doc_emb.stride(0), claim_emb.stride(0),
            HAS_SIM=query_doc_sim is not None, CLIP=bool(clip), BLOCK_C=BLOCK_C, BLOCK_DOC=BLOCK_DOC,
            BLOCK_K=BLOCK_K, num_warps=NUM_WARPS,
        )
    return out
