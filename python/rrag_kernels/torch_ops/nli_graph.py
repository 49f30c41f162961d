"""``nli_graph`` in torch: MIRAGE edge weights and kinds from NLI probabilities, then the
per-claim counts and CSR adjacency (integer bookkeeping the Triton launcher shares).

The arithmetic is the reference's, in float64, operation for operation: ``max(0, 2 p - 1)``
(``2 p`` is exact), then ``max`` or ``(a + b) * 0.5`` across directions; so the outputs
equal every other backend's bitwise.
"""

from __future__ import annotations

import torch

__all__ = ["graph_structure", "nli_graph"]


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

    Parameters
    ----------
    i, j : torch.Tensor, shape (P,), int64, validated ends (in range, no self-loops)
    probs_fwd, probs_bwd : torch.Tensor, shape (P, 3), float64, validated
    n_claims : int
    entail_col, contr_col : int
        Columns of p_entail and p_contr.
    mean : bool
        Combine the two directions by ``(a + b) * 0.5`` instead of ``max``.

    Returns
    -------
    tuple of torch.Tensor
        ``(w_supp (P,) f64, w_contr (P,) f64, kind (P,) i8, support_count (n,) i64,
        contradiction_count (n,) i64, indptr (n + 1,) i64, neighbors (2E',) i64,
        edge_ids (2E',) i64)`` as in ``rrag_kernels.reference.nli_graph_ref``.
    """
    s_f = torch.clamp_min(probs_fwd[:, entail_col] * 2.0 - 1.0, 0.0)
    s_b = torch.clamp_min(probs_bwd[:, entail_col] * 2.0 - 1.0, 0.0)
    c_f, c_b = probs_fwd[:, contr_col], probs_bwd[:, contr_col]
    if mean:
        w_supp, w_contr = (s_f + s_b) * 0.5, (c_f + c_b) * 0.5
    else:
        w_supp, w_contr = torch.maximum(s_f, s_b), torch.maximum(c_f, c_b)
    kind = torch.where(w_supp > w_contr, 1, torch.where(w_contr > w_supp, -1, 0)).to(torch.int8)
    return (w_supp.contiguous(), w_contr.contiguous(), kind, *graph_structure(i, j, kind, n_claims))


def graph_structure(i: torch.Tensor, j: torch.Tensor, kind: torch.Tensor, n_claims: int) -> tuple[torch.Tensor, ...]:
    """Per-claim counts and the CSR adjacency of the edges whose ``kind`` is not 0.

    Parameters
    ----------
    i, j : torch.Tensor, shape (P,), int64
    kind : torch.Tensor, shape (P,), int8, 1 support / -1 contradiction / 0 none
    n_claims : int

    Returns
    -------
    tuple of torch.Tensor
        ``(support_count (n,) i64, contradiction_count (n,) i64, indptr (n + 1,) i64,
        neighbors (2E',) i64, edge_ids (2E',) i64)``; a row's neighbours in (neighbour, edge
        id) order.
    """
    device = kind.device
    i = i.to(device=device, dtype=torch.int64)
    j = j.to(device=device, dtype=torch.int64)
    sup, con = kind == 1, kind == -1
    support_count = torch.bincount(i[sup], minlength=n_claims) + torch.bincount(j[sup], minlength=n_claims)
    contradiction_count = torch.bincount(i[con], minlength=n_claims) + torch.bincount(j[con], minlength=n_claims)
    edges = torch.nonzero(kind != 0).reshape(-1)
    rows = torch.cat([i[edges], j[edges]])
    others = torch.cat([j[edges], i[edges]])
    eids = torch.cat([edges, edges])
    # Order by (row, neighbor, edge id): stable sorts from the last key to the first.
    perm = torch.sort(eids, stable=True).indices
    perm = perm[torch.sort(others[perm], stable=True).indices]
    perm = perm[torch.sort(rows[perm], stable=True).indices]
    indptr = torch.zeros(n_claims + 1, dtype=torch.int64, device=device)
    indptr[1:] = torch.cumsum(torch.bincount(rows, minlength=n_claims), 0)
    return (support_count.to(torch.int64), contradiction_count.to(torch.int64), indptr,
            others[perm].contiguous(), eids[perm].contiguous())
