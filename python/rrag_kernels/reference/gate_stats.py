"""Reference for ``gate_stats``: MIRAGE gate statistics of a defended claim set."""

from __future__ import annotations

import numpy as np


def gate_stats_ref(
    keep: np.ndarray,
    edge_i: np.ndarray,
    edge_j: np.ndarray,
    kind: np.ndarray,
    domain_ids: np.ndarray,
    eps: float = 1e-9,
    count_unknown: bool = True,
) -> dict:
    """Counts and ratio the MIRAGE gate reads.

    Parameters
    ----------
    keep : (N,) bool
    edge_i, edge_j : (E,) int64, ends in [0, N)
    kind : (E,) int8 in {-1, 0, +1}
    domain_ids : (N,) int64
        A negative id means "unknown domain": all kept unknown claims together count as
        ONE domain when ``count_unknown`` (the paper's ``dom(c) = "unknown"``), as none
        otherwise.
    eps : float, >= 0

    Returns
    -------
    dict
        ``n_kept``; ``n_support`` / ``n_contradiction``: edges of kind +1 / -1 with both
        ends kept; ``r_contr = n_contradiction / (n_support + n_contradiction + eps)``
        (0.0 when that denominator is 0); ``n_domains``: distinct domains of kept claims.
    """
    kept = [bool(k) for k in keep]
    n_support = n_contradiction = 0
    for a, b, k in zip(edge_i, edge_j, kind):
        if kept[int(a)] and kept[int(b)]:
            if k > 0:
                n_support += 1
            elif k < 0:
                n_contradiction += 1
    domains = {int(d) if d >= 0 else -1 for d, k in zip(domain_ids, kept) if k}
    if not count_unknown:
        domains.discard(-1)
    denom = n_support + n_contradiction + eps
    return {
        "n_kept": sum(kept),
        "n_support": n_support,
        "n_contradiction": n_contradiction,
        "r_contr": n_contradiction / denom if denom > 0 else 0.0,
        "n_domains": len(domains),
    }
