"""Triton kernel for ``nli_graph``: MIRAGE edge weights and kinds from NLI probabilities.

Design
------
``_nli_graph_kernel``: grid ``(cdiv(P, BLOCK),)``; each program reads ``BLOCK`` rows of the
two (P, 3) float64 probability tensors (the entailment and contradiction columns only),
and writes ``w_supp``, ``w_contr`` (float64) and ``kind`` (int8). The arithmetic is the
reference's, in float64, operation for operation: ``max(0, 2 p - 1)`` (``2 p`` is exact, so
an FMA contraction rounds the same), then ``max`` or ``(a + b) * 0.5`` across directions.
So the outputs equal the C++ and reference outputs bitwise.

Per-claim counts and the CSR adjacency are integer bookkeeping, done with torch on the same
device (``torch_ops.nli_graph.graph_structure``: ``bincount``, ``cumsum`` and stable sorts):
deterministic, and exact.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..torch_ops.nli_graph import graph_structure
from .cosine_matrix import device_of

__all__ = ["nli_graph"]

BLOCK = 256
NUM_WARPS = 4


@triton.jit
def _nli_graph_kernel(
    fwd_ptr,
    bwd_ptr,
    w_supp_ptr,
    w_contr_ptr,
    kind_ptr,
    n_pairs,
    ENTAIL_COL: tl.constexpr,
    CONTR_COL: tl.constexpr,
    MEAN: tl.constexpr,
    BLOCK: tl.constexpr,
):
    pid = tl.program_id(0)
    rows = pid * BLOCK + tl.arange(0, BLOCK)
    mask = rows < n_pairs
    base = rows.to(tl.int64) * 3
    pe_f = tl.load(fwd_ptr + base + ENTAIL_COL, mask=mask, other=0.0)
    pe_b = tl.load(bwd_ptr + base + ENTAIL_COL, mask=mask, other=0.0)
    c_f = tl.load(fwd_ptr + base + CONTR_COL, mask=mask, other=0.0)
    c_b = tl.load(bwd_ptr + base + CONTR_COL, mask=mask, other=0.0)
    zero = tl.zeros([BLOCK], dtype=tl.float64)
    s_f = tl.maximum(pe_f * 2.0 - 1.0, zero)
    s_b = tl.maximum(pe_b * 2.0 - 1.0, zero)
    if MEAN:
        w_s = (s_f + s_b) * 0.5
        w_c = (c_f + c_b) * 0.5
    else:
        w_s = tl.maximum(s_f, s_b)
        w_c = tl.maximum(c_f, c_b)
    kind = tl.where(w_s > w_c, 1, tl.where(w_c > w_s, -1, 0)).to(tl.int8)
    tl.store(w_supp_ptr + rows, w_s, mask=mask)
    tl.store(w_contr_ptr + rows, w_c, mask=mask)
    tl.store(kind_ptr + rows, kind, mask=mask)


def nli_graph(
    i: torch.Tensor,
    j: torch.Tensor,
    probs_fwd: torch.Tensor,
    probs_bwd: torch.Tensor,
    n_claims: int,
    entail_col: int,
    contr_col: int,
    mean: bool,
) -> tuple[torch.Tensor, ...]:
    """Edge weights, kinds, per-claim counts and CSR adjacency on ``probs_fwd.device``.

    Arguments and results as :func:`rrag_kernels.torch_ops.nli_graph.nli_graph` (the same
    contract; inputs already validated, on the CUDA device or the CPU under the interpreter).
    """
    device = probs_fwd.device
    n_pairs = int(probs_fwd.shape[0])
    w_supp = torch.empty(n_pairs, dtype=torch.float64, device=device)
    w_contr = torch.empty(n_pairs, dtype=torch.float64, device=device)
    kind = torch.empty(n_pairs, dtype=torch.int8, device=device)
    if n_pairs:
        grid = (triton.cdiv(n_pairs, BLOCK),)
        with device_of(probs_fwd):
            _nli_graph_kernel[grid](
                probs_fwd, probs_bwd, w_supp, w_contr, kind, n_pairs,
                ENTAIL_COL=entail_col, CONTR_COL=contr_col, MEAN=bool(mean), BLOCK=BLOCK, num_warps=NUM_WARPS,
            )
    return (w_supp, w_contr, kind, *graph_structure(i, j, kind, n_claims))
