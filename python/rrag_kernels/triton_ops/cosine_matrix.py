"""Triton kernel for ``cosine_matrix`` and the row inverse-norm helper every op shares.

Design
------
Rows are normalised inside the kernels: each tile is multiplied by its rows' inverse
norms right after it is loaded, and the dot products are taken between unit vectors. This
keeps every intermediate bounded (no overflow of ``dot(a, b)`` for large-magnitude rows)
and makes a pair's cosine depend only on the two rows, never on where they sit in a tile,
so identical rows always get bitwise identical scores.

The inverse norm is computed with a max-abs rescale (``||x|| = m * ||x / m||``,
``m = max |x_i|``), so rows whose sum of squares would overflow or underflow float32 still
get a correct norm. A zero row gets inverse norm 0 (its cosine is 0, never NaN); so does a
row whose norm is below the float32 normal range (about 1e-38), whose reciprocal is not
representable.

``_cosine_matrix_kernel``: flat grid ``(cdiv(n, BLOCK_M) * cdiv(m, BLOCK_N),)``, row-block
major; each program owns one ``BLOCK_M x BLOCK_N`` output tile and loops over ``d`` in ``BLOCK_K`` steps, accumulating
``tl.dot(..., input_precision="ieee")`` in float32 (no TF32).

``_cosine_matrix_inv_norm_kernel``: grid ``(cdiv(n, BLOCK_R),)``; two passes over each
block of rows (max-abs, then the rescaled sum of squares), ``d`` in ``BLOCK_K`` steps.
"""

from __future__ import annotations

import contextlib

import torch
import triton
import triton.language as tl

__all__ = ["cosine_matrix", "cosine_matrix_with_norms", "device_of", "inverse_norms"]

# Tile constants measured on an H200 (benchmarks/gpu_tune.py, results/gpu_tune.csv): the
# fastest of the grid there at issue 2's size. BLOCK_K >= 16: Triton <= 3.6 refuses a float32
# tl.dot with K < 16 (tools/triton_compile_check.py --strict-dot checks it without a GPU).
# 128 x 128 tiles, BLOCK_K 16 and 4 warps took 0.85 ms at 2048 x 8192 x 384 against 2.1 ms
# for the earlier 64 x 64 / 8 / 8 warps (the ieee float32 dot runs on the FMA units). Compiled
# by Triton 3.9 for sm_90 those 4 warps spill 592 B of registers (255 per thread; 8 warps still
# spill 8 B), so 16 warps: 128 registers, no spill (tools/triton_compile_check.py; not yet
# timed on a device).
BLOCK_M = 128
BLOCK_N = 128
BLOCK_K = 16
NUM_WARPS = 16

NORM_BLOCK_R = 8
NORM_BLOCK_K = 128
NORM_NUM_WARPS = 4


@triton.jit
def _cosine_matrix_inv_norm_kernel(
    x_ptr,
    out_ptr,
    n_rows,
    dim,
    stride_x,
    BLOCK_R: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    pid = tl.program_id(0)
    rows = pid * BLOCK_R + tl.arange(0, BLOCK_R)
    row_mask = rows < n_rows
    # int64 row offsets: n_rows * dim can exceed 2**31 for large corpora.
    row_ptrs = x_ptr + rows.to(tl.int64)[:, None] * stride_x
    cols = tl.arange(0, BLOCK_K)

    max_abs = tl.zeros([BLOCK_R], dtype=tl.float32)
    for k0 in range(0, dim, BLOCK_K):
        mask = row_mask[:, None] & ((k0 + cols)[None, :] < dim)
        x = tl.load(row_ptrs + (k0 + cols)[None, :], mask=mask, other=0.0)
        max_abs = tl.maximum(max_abs, tl.max(tl.abs(x), axis=1))

    # Dividing by the largest magnitude keeps every square in [0, 1]: the sum cannot
    # overflow, and the largest term (exactly 1) cannot underflow.
    scale = tl.where(max_abs > 0.0, max_abs, 1.0)
    sum_sq = tl.zeros([BLOCK_R], dtype=tl.float32)
    for k0 in range(0, dim, BLOCK_K):
        mask = row_mask[:, None] & ((k0 + cols)[None, :] < dim)
        x = tl.load(row_ptrs + (k0 + cols)[None, :], mask=mask, other=0.0)
        y = x / scale[:, None]
        sum_sq += tl.sum(y * y, axis=1)

    norm = max_abs * tl.sqrt_rn(sum_sq)
    inv = tl.div_rn(tl.full([BLOCK_R], 1.0, tl.float32), tl.where(max_abs > 0.0, norm, 1.0))
    # Zero rows, and rows so small that 1 / norm overflows, count as zero vectors.
    inv = tl.where((max_abs > 0.0) & (inv < float("inf")), inv, 0.0)
    tl.store(out_ptr + rows, inv, mask=row_mask)


@triton.jit
def _cosine_matrix_kernel(
    a_ptr,
    b_ptr,
    inv_a_ptr,
    inv_b_ptr,
    out_ptr,
    n,
    m,
    dim,
    stride_a,
    stride_b,
    stride_out,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    # A flat grid: the second grid dimension of CUDA stops at 65535 blocks, too few for a
    # long m. Consecutive programs share one block of a rows.
    pid = tl.program_id(0)
    n_blocks_n = tl.cdiv(m, BLOCK_N)
    pid_m = pid // n_blocks_n
    pid_n = pid % n_blocks_n
    rows_a = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rows_b = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mask_a = rows_a < n
    mask_b = rows_b < m
    cols = tl.arange(0, BLOCK_K)
    inv_a = tl.load(inv_a_ptr + rows_a, mask=mask_a, other=0.0)
    inv_b = tl.load(inv_b_ptr + rows_b, mask=mask_b, other=0.0)
    a_ptrs = a_ptr + rows_a.to(tl.int64)[:, None] * stride_a + cols[None, :]
    # b is read as a (BLOCK_K, BLOCK_N) tile so the dot needs no transpose.
    b_ptrs = b_ptr + rows_b.to(tl.int64)[None, :] * stride_b + cols[:, None]

    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k0 in range(0, dim, BLOCK_K):
        col_ok = (k0 + cols) < dim
        a = tl.load(a_ptrs + k0, mask=mask_a[:, None] & col_ok[None, :], other=0.0)
        b = tl.load(b_ptrs + k0, mask=col_ok[:, None] & mask_b[None, :], other=0.0)
        acc = tl.dot(a * inv_a[:, None], b * inv_b[None, :], acc, input_precision="ieee")

    # -0.0 would sort below +0.0 as a bit pattern; keep a single zero.
    acc = tl.where(acc == 0.0, 0.0, acc)
    out_ptrs = out_ptr + rows_a.to(tl.int64)[:, None] * stride_out + rows_b[None, :]
    tl.store(out_ptrs, acc, mask=mask_a[:, None] & mask_b[None, :])


def inverse_norms(x: torch.Tensor) -> torch.Tensor:
    """Inverse L2 norm of each row (0 for a zero row).

    Parameters
    ----------
    x : torch.Tensor, shape (n, d), float32, contiguous

    Returns
    -------
    torch.Tensor, shape (n,), float32, on ``x.device``
    """
    n, dim = x.shape
    out = torch.empty(n, dtype=torch.float32, device=x.device)
    if n == 0:
        return out
    grid = (triton.cdiv(n, NORM_BLOCK_R),)
    with device_of(x):
        _cosine_matrix_inv_norm_kernel[grid](
            x, out, n, dim, x.stride(0), BLOCK_R=NORM_BLOCK_R, BLOCK_K=NORM_BLOCK_K, num_warps=NORM_NUM_WARPS
        )
    return out


def cosine_matrix_with_norms(
    a: torch.Tensor, b: torch.Tensor, inv_a: torch.Tensor, inv_b: torch.Tensor
) -> torch.Tensor:
    """All-pairs cosine from precomputed inverse norms (used by ``topk_cosine`` for large k).

    Parameters
    ----------
    a : torch.Tensor, shape (n, d), float32, contiguous
    b : torch.Tensor, shape (m, d), float32, contiguous
    inv_a : torch.Tensor, shape (n,), float32
    inv_b : torch.Tensor, shape (m,), float32

    Returns
    -------
    torch.Tensor, shape (n, m), float32
    """
    n, dim = a.shape
    m = b.shape[0]
    out = torch.empty((n, m), dtype=torch.float32, device=a.device)
    if n == 0 or m == 0:
        return out
    grid = (triton.cdiv(n, BLOCK_M) * triton.cdiv(m, BLOCK_N),)
    with device_of(a):
        _cosine_matrix_kernel[grid](
            a, b, inv_a, inv_b, out, n, m, dim, a.stride(0), b.stride(0), out.stride(0),
            BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, num_warps=NUM_WARPS,
        )
    return out


def cosine_matrix(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """All-pairs cosine similarity.

    Parameters
    ----------
    a : torch.Tensor, shape (n, d), float32, contiguous
    b : torch.Tensor, shape (m, d), float32, contiguous, same device as ``a``

    Returns
    -------
    torch.Tensor, shape (n, m), float32, on ``a.device``
        ``out[i, j] = cos(a[i], b[j])``; 0 where either row is the zero vector.
    """
    if a.shape[0] == 0 or b.shape[0] == 0:
        return torch.zeros((a.shape[0], b.shape[0]), dtype=torch.float32, device=a.device)
    return cosine_matrix_with_norms(a, b, inverse_norms(a), inverse_norms(b))


def device_of(x: torch.Tensor) -> contextlib.AbstractContextManager:
    """Make ``x``'s CUDA device current for a launch (triton launches on the current one)."""
    return torch.cuda.device(x.device) if x.device.type == "cuda" else contextlib.nullcontext()
