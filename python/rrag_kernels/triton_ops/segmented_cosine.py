"""Triton kernels for ``segmented_cosine``: each doc's cosine with the query that owns it.

Design
------
The op is memory bound: the floor is one read of the docs (the query rows are few and stay
in L2), so the design that wins reads each doc row once and launches once.

``_segmented_cosine_fused_kernel`` (``d <= MAX_FUSED_DIM``): grid ``(cdiv(D, rows),)``, one
launch. Each program owns ``rows`` docs with their whole rows in registers
(``BLOCK_DIM = next_pow2(d)`` columns, the pattern of Liger-Kernel's row kernels), finds each
doc's query by a binary search of ``doc_offsets`` (no map tensor, no extra launch), loads the
query row, and from the two rows in registers forms, in one pass, the max-abs rescaled rows
(``x / max|x|``: no square overflows or underflows, so a row of tiny or huge entries gets the
float64 reference's cosine), their squared norms and their dot: ``cos = dot / sqrt(nx * ny)``,
0 where either row is zero. ``rows`` and ``num_warps`` follow the row width (about 4096
elements of each operand per program).

``_segmented_cosine_kernel`` (wider rows, and ``claim_relevance``'s similarity pass): the doc
-> query map from ``torch.searchsorted``, inverse norms from the shared helper in
``cosine_matrix.py``, then a loop over ``d`` in ``BLOCK_K`` steps per block of ``BLOCK_D`` docs.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..torch_ops.common import segment_owners
from .cosine_matrix import device_of, inverse_norms

__all__ = ["segmented_cosine", "segmented_cosine_with_norms"]

BLOCK_D = 8
BLOCK_K = 256
NUM_WARPS = 4
#: Widest row the fused kernel holds in registers; wider rows take the looped kernel.
MAX_FUSED_DIM = 8192
#: Elements of each operand a fused program holds (rows x next_pow2(d)).
FUSED_ELEMENTS = 4096


@triton.jit
def _segmented_cosine_fused_kernel(
    q_ptr,
    doc_ptr,
    offsets_ptr,
    out_ptr,
    n_docs,
    n_queries,
    search_steps,
    dim,
    stride_q,
    stride_doc,
    ROWS: tl.constexpr,
    BLOCK_DIM: tl.constexpr,
):
    docs = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    doc_mask = docs < n_docs
    # The owner: the largest q with offsets[q] <= doc (repeated offsets of empty segments
    # resolve to the last, the non-empty one), by a branch-free binary search over [0, Q).
    lo = tl.zeros([ROWS], dtype=tl.int64)
    hi = tl.full([ROWS], 0, tl.int64) + (n_queries - 1)
    for _ in range(search_steps):
        mid = (lo + hi + 1) // 2
        go = tl.load(offsets_ptr + mid, mask=doc_mask, other=0) <= docs
        lo = tl.where(go, mid, lo)
        hi = tl.where(go, hi, mid - 1)
    cols = tl.arange(0, BLOCK_DIM)
    mask = doc_mask[:, None] & (cols[None, :] < dim)
    x = tl.load(doc_ptr + docs.to(tl.int64)[:, None] * stride_doc + cols[None, :], mask=mask, other=0.0)
    y = tl.load(q_ptr + lo[:, None] * stride_q + cols[None, :], mask=mask, other=0.0)
    # Divide by the largest magnitude: every square is in [0, 1], the largest exactly 1.
    max_x = tl.max(tl.abs(x), axis=1)
    max_y = tl.max(tl.abs(y), axis=1)
    x = x / tl.where(max_x > 0.0, max_x, 1.0)[:, None]
    y = y / tl.where(max_y > 0.0, max_y, 1.0)[:, None]
    nx = tl.sum(x * x, axis=1)
    ny = tl.sum(y * y, axis=1)
    dot = tl.sum(x * y, axis=1)
    both = (nx > 0.0) & (ny > 0.0)
    cos = tl.where(both, dot / tl.sqrt(tl.where(both, nx * ny, 1.0)), 0.0)
    tl.store(out_ptr + docs, tl.where(cos == 0.0, 0.0, cos), mask=doc_mask)


@triton.jit
def _segmented_cosine_kernel(
    q_ptr,
    doc_ptr,
    inv_q_ptr,
    inv_doc_ptr,
    doc_query_ptr,
    out_ptr,
    n_docs,
    dim,
    stride_q,
    stride_doc,
    BLOCK_D: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    pid = tl.program_id(0)
    docs = pid * BLOCK_D + tl.arange(0, BLOCK_D)
    doc_mask = docs < n_docs
    owner = tl.load(doc_query_ptr + docs, mask=doc_mask, other=0)
    inv_doc = tl.load(inv_doc_ptr + docs, mask=doc_mask, other=0.0)
    inv_q = tl.load(inv_q_ptr + owner, mask=doc_mask, other=0.0)
    cols = tl.arange(0, BLOCK_K)
    doc_ptrs = doc_ptr + docs.to(tl.int64)[:, None] * stride_doc + cols[None, :]
    q_ptrs = q_ptr + owner.to(tl.int64)[:, None] * stride_q + cols[None, :]

    acc = tl.zeros([BLOCK_D], dtype=tl.float32)
    for k0 in range(0, dim, BLOCK_K):
        mask = doc_mask[:, None] & ((k0 + cols)[None, :] < dim)
        x = tl.load(doc_ptrs + k0, mask=mask, other=0.0) * inv_doc[:, None]
        y = tl.load(q_ptrs + k0, mask=mask, other=0.0) * inv_q[:, None]
        acc += tl.sum(x * y, axis=1)
    tl.store(out_ptr + docs, acc, mask=doc_mask)


def segmented_cosine_with_norms(
    queries: torch.Tensor,
    docs: torch.Tensor,
    doc_offsets: torch.Tensor,
    inv_q: torch.Tensor,
    inv_doc: torch.Tensor,
) -> torch.Tensor:
    """``segmented_cosine`` from precomputed inverse norms (shared with ``claim_relevance``).

    Parameters
    ----------
    queries : torch.Tensor, shape (Q, d), float32, contiguous
    docs : torch.Tensor, shape (D, d), float32, contiguous
    doc_offsets : torch.Tensor, shape (Q + 1,), int64
    inv_q : torch.Tensor, shape (Q,), float32
    inv_doc : torch.Tensor, shape (D,), float32

    Returns
    -------
    torch.Tensor, shape (D,), float32
    """
    n_docs, dim = docs.shape
    out = torch.zeros(n_docs, dtype=torch.float32, device=docs.device)
    if n_docs == 0:
        return out
    owner = segment_owners(doc_offsets.to(device=docs.device, dtype=torch.int64), n_docs)
    grid = (triton.cdiv(n_docs, BLOCK_D),)
    with device_of(docs):
        _segmented_cosine_kernel[grid](
            queries, docs, inv_q, inv_doc, owner, out, n_docs, dim, queries.stride(0), docs.stride(0),
            BLOCK_D=BLOCK_D, BLOCK_K=BLOCK_K, num_warps=NUM_WARPS,
        )
    return out


def segmented_cosine(queries: torch.Tensor, docs: torch.Tensor, doc_offsets: torch.Tensor) -> torch.Tensor:
    """Cosine of each doc with the query that owns it.

    Arguments and results as :func:`rrag_kernels.torch_ops.segmented_cosine.segmented_cosine` (the same
    contract; inputs already validated, on the CUDA device or the CPU under the interpreter).
    """
    n_docs, dim = docs.shape
    if n_docs == 0:
        return torch.zeros(0, dtype=torch.float32, device=docs.device)
    if dim > MAX_FUSED_DIM:
        return segmented_cosine_with_norms(queries, docs, doc_offsets, inverse_norms(queries), inverse_norms(docs))
    n_queries = queries.shape[0]
    out = torch.empty(n_docs, dtype=torch.float32, device=docs.device)
    offsets = doc_offsets.to(device=docs.device, dtype=torch.int64).contiguous()
    block_dim = triton.next_power_of_2(max(dim, 1))
    rows = max(1, min(FUSED_ELEMENTS // block_dim, triton.next_power_of_2(n_docs)))
    num_warps = 4 if block_dim <= 1024 else 8 if block_dim <= 4096 else 16
    with device_of(docs):
        _segmented_cosine_fused_kernel[(triton.cdiv(n_docs, rows),)](
            queries, docs, offsets, out, n_docs, n_queries, max(1, n_queries.bit_length()), dim,
            queries.stride(0), docs.stride(0), ROWS=rows, BLOCK_DIM=block_dim, num_warps=num_warps,
        )
    return out
