"""Triton kernels for ``topk_cosine``: the k corpus rows most cosine-similar to each query.

Ties: equal float32 scores are ordered by lower corpus index first, in every stage.

Design
------
Each (score, index) pair is encoded into one int64 key that sorts like the wanted order:
the float32 bits are mapped to a monotone int32 (negative floats get their magnitude bits
flipped), placed in the high 32 bits, and ``0xFFFFFFFF - index`` fills the low 32 bits. The
largest key is then the highest score with the lowest index, keys are unique, and any
exact top-k on keys (bitonic in-kernel, ``torch.topk`` in the large-k path) gives exactly
the required order with no tie handling. Scores are decoded from the keys bit for bit, so
``scores[q, i]`` is exactly the cosine the kernel computed for ``(q, indices[q, i])``. Zeros
are canonicalised to +0.0 first so that -0.0 and +0.0 tie by index.

The Q x N score matrix is never materialised:

``_topk_cosine_kernel`` (stage 1): grid ``(cdiv(Q, BLOCK_Q), n_chunks)``; each program
scores ``BLOCK_Q`` queries against one chunk of corpus rows, ``BLOCK_N`` rows at a time
(``tl.dot`` of normalised tiles, ``input_precision="ieee"``, ``d`` in ``BLOCK_K`` steps), and
keeps a running sorted top-``K_PAD`` list of keys per query (``K_PAD`` = next power of two
>= k): each tile's top ``K_PAD`` is merged into it with a max against the reversed list
followed by a bitonic merge. The list is written to a ``(Q, n_chunks * K_PAD)`` candidate
buffer.

``_topk_cosine_merge_kernel`` (stage 2): grid ``(cdiv(Q, MERGE_BLOCK_Q),)``; merges the
``n_chunks`` sorted lists of each query the same way and decodes the first k keys.

For ``K_PAD > MAX_K_PAD`` the per-program lists would not fit in registers; the launcher
then scores corpus chunks with ``_cosine_matrix_kernel`` into a bounded ``(Q, chunk)``
buffer and keeps a running top-k of keys with ``torch.topk`` (exact, since keys are
unique).

Limits: corpus indices must fit in 32 bits (N < 2**32).
"""

from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl

from ..torch_ops.common import decode_keys, encode_keys
from .cosine_matrix import cosine_matrix_with_norms, device_of, inverse_norms

__all__ = ["MAX_K_PAD", "topk_cosine"]

# Tile constants measured on an H200 (benchmarks/gpu_tune.py, results/gpu_tune.csv): the
# fastest of the grid there at issue 2's size. BLOCK_K >= 16: Triton <= 3.6 refuses a float32
# tl.dot with K < 16 (tools/triton_compile_check.py --strict-dot checks it without a GPU).
BLOCK_Q = 32
MIN_BLOCK_N = 64
BLOCK_K = 16
MERGE_BLOCK_Q = 16
# Largest per-query list kept in registers by the kernels; larger k takes the chunked path.
MAX_K_PAD = 256
# Scratch budget of the large-k path, in (query, corpus row) score entries per chunk.
LARGE_K_CHUNK_ENTRIES = 1 << 24
MAX_CORPUS_ROWS = (1 << 32) - 1
MAX_GRID_DIM_1 = 65535
# Programs per streaming multiprocessor the stage-1 grid aims for.
PROGRAMS_PER_SM = 2
# Stage-1 programs aimed for without a GPU (interpreter): a few chunks, so stage 2 runs.
INTERPRETER_PROGRAMS = 4


@triton.jit
def _topk_cosine_encode(score, index):
    """int64 key, ordered like (score descending, index ascending) read from largest key down."""
    bits = score.to(tl.int32, bitcast=True)
    mono = bits ^ ((bits >> 31) & 0x7FFFFFFF)
    low = tl.full(index.shape, 0xFFFFFFFF, tl.int64) - index.to(tl.int64)
    return (mono.to(tl.int64) << 32) | low


@triton.jit
def _topk_cosine_decode(key):
    """Inverse of ``_topk_cosine_encode``: (score float32, index int64)."""
    mono = (key >> 32).to(tl.int32)
    bits = mono ^ ((mono >> 31) & 0x7FFFFFFF)
    low_mask = tl.full(key.shape, 0xFFFFFFFF, tl.int64)
    return bits.to(tl.float32, bitcast=True), low_mask - (key & low_mask)


@triton.jit
def _topk_cosine_merge_lists(best, other):
    """Top K of the union of two descending (rows, K) key lists, descending.

    The elementwise max of one list and the other reversed holds exactly the K largest of
    the union and is bitonic, so one bitonic merge sorts it.
    """
    return tl.bitonic_merge(tl.maximum(best, tl.flip(other, 1)), descending=True)


@triton.jit
def _topk_cosine_kernel(
    q_ptr,
    x_ptr,
    inv_q_ptr,
    inv_x_ptr,
    cand_ptr,
    n_queries,
    n_rows,
    dim,
    stride_q,
    stride_x,
    chunk_rows,
    stride_cand,
    BLOCK_Q: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    K_PAD: tl.constexpr,
):
    pid_q = tl.program_id(0)
    pid_c = tl.program_id(1)
    queries = pid_q * BLOCK_Q + tl.arange(0, BLOCK_Q)
    q_mask = queries < n_queries
    inv_q = tl.load(inv_q_ptr + queries, mask=q_mask, other=0.0)
    cols = tl.arange(0, BLOCK_K)
    q_ptrs = q_ptr + queries.to(tl.int64)[:, None] * stride_q + cols[None, :]
    row_lo = pid_c.to(tl.int64) * chunk_rows
    row_hi = tl.minimum(row_lo + chunk_rows, n_rows)

    best = tl.full([BLOCK_Q, K_PAD], -9223372036854775808, tl.int64)
    for n0 in range(row_lo, row_hi, BLOCK_N):
        rows = n0 + tl.arange(0, BLOCK_N)
        row_mask = rows < row_hi
        inv_x = tl.load(inv_x_ptr + rows, mask=row_mask, other=0.0)
        # (BLOCK_K, BLOCK_N) corpus tile so the dot needs no transpose.
        x_ptrs = x_ptr + rows[None, :] * stride_x + cols[:, None]
        acc = tl.zeros([BLOCK_Q, BLOCK_N], dtype=tl.float32)
        for k0 in range(0, dim, BLOCK_K):
            col_ok = (k0 + cols) < dim
            q = tl.load(q_ptrs + k0, mask=q_mask[:, None] & col_ok[None, :], other=0.0)
            x = tl.load(x_ptrs + k0, mask=col_ok[:, None] & row_mask[None, :], other=0.0)
            acc = tl.dot(q * inv_q[:, None], x * inv_x[None, :], acc, input_precision="ieee")
        # -0.0 and +0.0 must tie (and break the tie by index), so keep a single zero.
        acc = tl.where(acc == 0.0, 0.0, acc)
        keys = _topk_cosine_encode(acc, rows[None, :])
        keys = tl.where(row_mask[None, :], keys, -9223372036854775808)
        best = _topk_cosine_merge_lists(best, tl.topk(keys, K_PAD))

    slots = pid_c.to(tl.int64) * K_PAD + tl.arange(0, K_PAD)
    cand_ptrs = cand_ptr + queries.to(tl.int64)[:, None] * stride_cand + slots[None, :]
    tl.store(cand_ptrs, best, mask=q_mask[:, None])


@triton.jit
def _topk_cosine_merge_kernel(
    cand_ptr,
    scores_ptr,
    indices_ptr,
    n_queries,
    n_chunks,
    k,
    stride_cand,
    BLOCK_Q: tl.constexpr,
    K_PAD: tl.constexpr,
):
    pid = tl.program_id(0)
    queries = pid * BLOCK_Q + tl.arange(0, BLOCK_Q)
    q_mask = queries < n_queries
    slots = tl.arange(0, K_PAD)
    cand_ptrs = cand_ptr + queries.to(tl.int64)[:, None] * stride_cand + slots[None, :]
    best = tl.load(cand_ptrs, mask=q_mask[:, None], other=-9223372036854775808)
    for c in range(1, n_chunks):
        other = tl.load(cand_ptrs + c * K_PAD, mask=q_mask[:, None], other=-9223372036854775808)
        best = _topk_cosine_merge_lists(best, other)

    score, index = _topk_cosine_decode(best)
    out_offsets = queries.to(tl.int64)[:, None] * k + slots[None, :]
    out_mask = q_mask[:, None] & (slots[None, :] < k)
    tl.store(scores_ptr + out_offsets, score, mask=out_mask)
    tl.store(indices_ptr + out_offsets, index, mask=out_mask)


def _topk_large_k(
    queries: torch.Tensor,
    corpus: torch.Tensor,
    k: int,
    inv_q: torch.Tensor,
    inv_x: torch.Tensor,
    chunk_rows: int | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Chunked path for ``next_pow2(k) > MAX_K_PAD``: bounded (Q, chunk) score buffers."""
    n_queries = queries.shape[0]
    n_rows = corpus.shape[0]
    if chunk_rows is None:
        chunk_rows = max(k, LARGE_K_CHUNK_ENTRIES // max(n_queries, 1))
    best = torch.empty((n_queries, 0), dtype=torch.int64, device=queries.device)
    for r0 in range(0, n_rows, chunk_rows):
        r1 = min(r0 + chunk_rows, n_rows)
        scores = cosine_matrix_with_norms(queries, corpus[r0:r1], inv_q, inv_x[r0:r1])
        keys = torch.cat([best, encode_keys(scores, r0)], dim=1)
        best = torch.topk(keys, min(k, keys.shape[1]), dim=1, sorted=True).values
    scores, indices = decode_keys(best)
    return scores.contiguous(), indices.contiguous()


@functools.lru_cache(maxsize=None)
def _multiprocessor_count(device: torch.device) -> int:
    return torch.cuda.get_device_properties(device).multi_processor_count


def _chunk_tiles(n_queries: int, n_tiles: int, device: torch.device) -> int:
    """Corpus tiles per stage-1 program: enough chunks to fill the device, no more."""
    if device.type == "cuda":
        target = PROGRAMS_PER_SM * _multiprocessor_count(device)
    else:
        target = INTERPRETER_PROGRAMS
    n_chunks = max(1, min(n_tiles, triton.cdiv(target, triton.cdiv(n_queries, BLOCK_Q))))
    return triton.cdiv(n_tiles, n_chunks)


def topk_cosine(
    queries: torch.Tensor, corpus: torch.Tensor, k: int, *, chunk_rows: int | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """The k corpus rows most cosine-similar to each query, without a Q x N matrix.

    Arguments and results as :func:`rrag_kernels.torch_ops.topk_cosine.topk_cosine` (the same
    contract; inputs already validated, on the CUDA device or the CPU under the interpreter),
    except ``chunk_rows``: corpus rows per stage-1 program (rounded up to the tile size) or,
    for large k, per scoring chunk; a tuning and testing knob the result does not depend on.
    """
    device = queries.device
    n_queries, dim = queries.shape
    n_rows = corpus.shape[0]
    if not 1 <= k <= n_rows:
        raise ValueError(f"k: must satisfy 1 <= k <= N={n_rows}, got {k}")
    if n_rows > MAX_CORPUS_ROWS:
        raise ValueError(f"corpus: the triton backend supports at most {MAX_CORPUS_ROWS} rows, got {n_rows}")
    scores = torch.empty((n_queries, k), dtype=torch.float32, device=device)
    indices = torch.empty((n_queries, k), dtype=torch.int64, device=device)
    if n_queries == 0:
        return scores, indices

    inv_q = inverse_norms(queries)
    inv_x = inverse_norms(corpus)
    k_pad = triton.next_power_of_2(k)
    if k_pad > MAX_K_PAD:
        return _topk_large_k(queries, corpus, k, inv_q, inv_x, chunk_rows)

    block_n = max(MIN_BLOCK_N, k_pad)
    n_tiles = triton.cdiv(n_rows, block_n)
    if chunk_rows is None:
        tiles = _chunk_tiles(n_queries, n_tiles, device)
    else:
        tiles = max(1, triton.cdiv(chunk_rows, block_n))
    # The chunks are the grid's second dimension, which CUDA caps at 65535 blocks.
    tiles = max(tiles, triton.cdiv(n_tiles, MAX_GRID_DIM_1))
    chunk = tiles * block_n
    n_chunks = triton.cdiv(n_rows, chunk)
    num_warps = 4 if k_pad <= 64 else 8

    cand = torch.empty((n_queries, n_chunks * k_pad), dtype=torch.int64, device=device)
    with device_of(queries):
        _topk_cosine_kernel[(triton.cdiv(n_queries, BLOCK_Q), n_chunks)](
            queries, corpus, inv_q, inv_x, cand, n_queries, n_rows, dim, queries.stride(0), corpus.stride(0),
            chunk, cand.stride(0),
            BLOCK_Q=BLOCK_Q, BLOCK_N=block_n, BLOCK_K=BLOCK_K, K_PAD=k_pad, num_warps=num_warps,
        )
        _topk_cosine_merge_kernel[(triton.cdiv(n_queries, MERGE_BLOCK_Q),)](
            cand, scores, indices, n_queries, n_chunks, k, cand.stride(0),
            BLOCK_Q=MERGE_BLOCK_Q, K_PAD=k_pad, num_warps=num_warps,
        )
    return scores, indices
