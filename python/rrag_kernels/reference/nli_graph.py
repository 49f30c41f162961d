"""Reference for ``nli_graph``: the MIRAGE claim graph from NLI probabilities."""

from __future__ import annotations

import numpy as np


def nli_graph_ref(
    i: np.ndarray,
    j: np.ndarray,
    probs_fwd: np.ndarray,
    probs_bwd: np.ndarray,
    n_claims: int,
    entail_col: int,
    contr_col: int,
    reduce: str = "max",
) -> tuple[np.ndarray, ...]:
    """Edge weights, kinds, per-claim counts and the CSR adjacency of the non-ignored edges.

    Per direction ``w_supp = max(0, 2 * p_entail - 1)`` and ``w_contr = p_contr``; the two
    directions are combined by ``max`` (``reduce="max"``) or ``(a + b) * 0.5`` ("mean").
    ``kind = +1`` if ``w_supp > w_contr``, ``-1`` if ``w_contr > w_supp``, else ``0``.

    Parameters
    ----------
    i, j : ndarray, shape (P,), int64, ends in [0, n_claims), ``i != j``
    probs_fwd, probs_bwd : ndarray, shape (P, 3), float64
        NLI probabilities of ``i -> j`` and ``j -> i``; column ``entail_col`` holds
        p_entail, column ``contr_col`` p_contr.
    n_claims : int
    reduce : {"max", "mean"}

    Returns
    -------
    w_supp, w_contr : (P,) float64
    kind : (P,) int8
    support_count, contradiction_count : (n_claims,) int64
        Support / contradiction edges touching each claim.
    indptr : (n_claims + 1,) int64
    neighbors, edge_ids : (2 * E',) int64
        Row ``c`` (``indptr[c]:indptr[c + 1]``) lists every non-ignored edge at ``c`` as
        (other end, edge index), sorted by other end, then edge index.
    """
    fwd = np.asarray(probs_fwd, dtype=np.float64)
    bwd = np.asarray(probs_bwd, dtype=np.float64)
    s_f = np.maximum(0.0, 2.0 * fwd[:, entail_col] - 1.0)
    s_b = np.maximum(0.0, 2.0 * bwd[:, entail_col] - 1.0)
    c_f, c_b = fwd[:, contr_col], bwd[:, contr_col]
    if reduce == "max":
        w_supp, w_contr = np.maximum(s_f, s_b), np.maximum(c_f, c_b)
    else:
        w_supp, w_contr = (s_f + s_b) * 0.5, (c_f + c_b) * 0.5
    kind = np.where(w_supp > w_contr, 1, np.where(w_contr > w_supp, -1, 0)).astype(np.int8)

    support = np.zeros(n_claims, dtype=np.int64)
    contradiction = np.zeros(n_claims, dtype=np.int64)
    rows: list[list[tuple[int, int]]] = [[] for _ in range(n_claims)]
    for e in range(len(kind)):
        if kind[e] == 0:
            continue
        a, b = int(i[e]), int(j[e])
        count = support if kind[e] > 0 else contradiction
        count[a] += 1
        count[b] += 1
        rows[a].append((b, e))
        rows[b].append((a, e))
    indptr = np.zeros(n_claims + 1, dtype=np.int64)
    neighbors: list[int] = []
    edge_ids: list[int] = []
    for c in range(n_claims):
        for other, e in sorted(rows[c]):
            neighbors.append(other)
            edge_ids.append(e)
        indptr[c + 1] = len(neighbors)
    return (
        w_supp.astype(np.float64), w_contr.astype(np.float64), kind, support, contradiction, indptr,
        np.asarray(neighbors, dtype=np.int64), np.asarray(edge_ids, dtype=np.int64),
    )
