"""Triton kernel for ``segmented_cosine``: each doc's cosine with the query that owns it.

Design
------
The doc -> query map (``doc_query[j] = q`` with ``doc_offsets[q] <= j < doc_offsets[q + 1]``)
is built on device with ``torch.searchsorted``, so the kernel is a flat pass over docs and
empty segments cost nothing. Inverse norms come from the shared helper in
``cosine_matrix.py``.

``_segmented_cosine_kernel``: grid ``(cdiv(D, BLOCK_D),)``; each program owns ``BLOCK_D``
docs, gathers each doc's query row, and loops over ``d`` in ``BLOCK_K`` steps accumulating
the dot product of the two normalised rows in float32. The op is memory bound, so it uses
plain loads and a row reduction rather than ``tl.dot``.
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

    Parameters
    ----------
    queries : torch.Tensor, shape (Q, d), float32, contiguous
    docs : torch.Tensor, shape (D, d), float32, contiguous, same device
    doc_offsets : torch.Tensor, shape (Q + 1,), int64
        CSR offsets: the docs of query ``q`` are ``docs[doc_offsets[q]:doc_offsets[q + 1]]``.

    Returns
    -------
    torch.Tensor, shape (D,), float32, on ``docs.device``
        0 where the doc or its query is the zero vector.
    """
    if docs.shape[0] == 0:
        return torch.zeros(0, dtype=torch.float32, device=docs.device)
    return segmented_cosine_with_norms(queries, docs, doc_offsets, inverse_norms(queries), inverse_norms(docs))
