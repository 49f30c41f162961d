"""Triton kernel for ``claim_relevance`` (the Conformal-RAG claim score), fused.

``R(c) = max over the docs d of c's query of sim(x, d) * cos(c, d)``, clipped at 0 when
``clip``, and 0 when the claim's query has no docs.

Design
------
1. ``sim`` is ``query_doc_sim`` when given, else ``segmented_cosine`` of each doc with its
   query (the ``_segmented_cosine_kernel``, reusing the doc inverse norms computed here).
2. ``_claim_relevance_kernel``: grid ``(cdiv(C, BLOCK_C),)``; each program owns
   ``BLOCK_C`` consecutive claims. Claims are grouped by query, so the docs those claims
   may look at form one contiguous range ``[doc_offsets[q_first], doc_offsets[q_last + 1])``;
   the program walks it in ``BLOCK_DOC`` tiles, takes ``tl.dot`` of the normalised claim
   and doc tiles (``input_precision="ieee"``, float32 accumulation, ``d`` in ``BLOCK_K``
   steps), scales by ``sim``, masks out docs of other queries, and keeps a running max per
   claim. Nothing of size ``C x D`` is ever written to memory.

The claim -> query map is built on device with ``torch.searchsorted`` (no host sync). A
block whose claims span several queries walks the docs of all of them; the wasted work is
bounded by ``BLOCK_C`` times the useful work, the same as padding each query's claims to a
full block would cost.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .cosine_matrix import device_of, inverse_norms
from ..torch_ops.common import segment_owners
from .segmented_cosine import segmented_cosine_with_norms

__all__ = ["claim_relevance"]

# Tile constants measured on an H200 (benchmarks/gpu_tune.py, results/gpu_tune.csv): the
# fastest of the grid there at issue 2's size. BLOCK_K >= 16: Triton <= 3.6 refuses a float32
# tl.dot with K < 16 (tools/triton_compile_check.py --strict-dot checks it without a GPU).
BLOCK_C = 16
BLOCK_DOC = 32
BLOCK_K = 32
NUM_WARPS = 2


@triton.jit
def _claim_relevance_kernel(
    claim_ptr,
    doc_ptr,
    inv_claim_ptr,
    inv_doc_ptr,
    sim_ptr,
    claim_query_ptr,
    doc_offsets_ptr,
    out_ptr,
    n_claims,
    dim,
    stride_claim,
    stride_doc,
    CLIP: tl.constexpr,
    BLOCK_C: tl.constexpr,
    BLOCK_DOC: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    pid = tl.program_id(0)
    claims = pid * BLOCK_C + tl.arange(0, BLOCK_C)
    claim_mask = claims < n_claims
    owner = tl.load(claim_query_ptr + claims, mask=claim_mask, other=0)
    doc_lo = tl.load(doc_offsets_ptr + owner, mask=claim_mask, other=0)
    doc_hi = tl.load(doc_offsets_ptr + owner + 1, mask=claim_mask, other=0)
    # Claims are sorted by query, so the block's docs start at its first claim's (always a
    # valid claim) and end at the largest doc_hi; masked lanes read the empty range [0, 0).
    block_lo = tl.load(doc_offsets_ptr + tl.load(claim_query_ptr + pid * BLOCK_C))
    block_hi = tl.max(doc_hi, axis=0)
    inv_claim = tl.load(inv_claim_ptr + claims, mask=claim_mask, other=0.0)
    cols = tl.arange(0, BLOCK_K)
    claim_ptrs = claim_ptr + claims.to(tl.int64)[:, None] * stride_claim + cols[None, :]

    best = tl.full([BLOCK_C], float("-inf"), tl.float32)
    for d0 in range(block_lo, block_hi, BLOCK_DOC):
        docs = d0 + tl.arange(0, BLOCK_DOC)
        doc_mask = docs < block_hi
        inv_doc = tl.load(inv_doc_ptr + docs, mask=doc_mask, other=0.0)
        sim = tl.load(sim_ptr + docs, mask=doc_mask, other=0.0)
        # (BLOCK_K, BLOCK_DOC) doc tile so the dot needs no transpose.
        doc_ptrs = doc_ptr + docs.to(tl.int64)[None, :] * stride_doc + cols[:, None]
        acc = tl.zeros([BLOCK_C, BLOCK_DOC], dtype=tl.float32)
        for k0 in range(0, dim, BLOCK_K):
            col_ok = (k0 + cols) < dim
            c = tl.load(claim_ptrs + k0, mask=claim_mask[:, None] & col_ok[None, :], other=0.0)
            x = tl.load(doc_ptrs + k0, mask=col_ok[:, None] & doc_mask[None, :], other=0.0)
            acc = tl.dot(c * inv_claim[:, None], x * inv_doc[None, :], acc, input_precision="ieee")
        score = acc * sim[None, :]
        own_doc = (docs[None, :] >= doc_lo[:, None]) & (docs[None, :] < doc_hi[:, None])
        best = tl.maximum(best, tl.max(tl.where(own_doc, score, float("-inf")), axis=1))

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
    """R(c) = max over the docs d of c's query of sim(x, d) * cos(c, d), in one fused pass.

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
    torch.Tensor, shape (C,), float32, on ``claim_emb.device``
        0 for a claim whose query has no docs (whatever ``clip``).
    """
    device = claim_emb.device
    n_claims, dim = claim_emb.shape
    n_docs = doc_emb.shape[0]
    out = torch.zeros(n_claims, dtype=torch.float32, device=device)
    if n_claims == 0 or n_docs == 0:
        return out
    doc_offsets = doc_offsets.to(device=device, dtype=torch.int64)
    claim_offsets = claim_offsets.to(device=device, dtype=torch.int64)

    inv_doc = inverse_norms(doc_emb)
    inv_claim = inverse_norms(claim_emb)
    if query_doc_sim is None:
        sim = segmented_cosine_with_norms(query_emb, doc_emb, doc_offsets, inverse_norms(query_emb), inv_doc)
    else:
        sim = query_doc_sim.to(device=device, dtype=torch.float32).contiguous()
    owner = segment_owners(claim_offsets, n_claims)

    grid = (triton.cdiv(n_claims, BLOCK_C),)
    with device_of(claim_emb):
        _claim_relevance_kernel[grid](
            claim_emb, doc_emb, inv_claim, inv_doc, sim, owner, doc_offsets, out,
            n_claims, dim, claim_emb.stride(0), doc_emb.stride(0),
            CLIP=bool(clip), BLOCK_C=BLOCK_C, BLOCK_DOC=BLOCK_DOC, BLOCK_K=BLOCK_K, num_warps=NUM_WARPS,
        )
    return out
