"""Float64 truth for :func:`rrag_kernels.ops.r_scores` (conformal-factuality r-scores)."""

from __future__ import annotations

import numpy as np

__all__ = ["r_score_one_ref", "r_scores_ref"]


def r_score_one_ref(s: np.ndarray, ok: np.ndarray, a: float = 1.0, sentinel: float = -np.inf) -> float:
    """The r-score of one response, literally as Mohri & Hashimoto (2024) define it.

    Scan the thresholds ``t`` over the response's scores in descending order; return the
    first ``t`` at which the supported fraction of the claims with ``s >= t`` (the float64
    division of two integer counts) is ``< a``; ``sentinel`` when there is none or no claims.
    """
    s = np.asarray(s, dtype=np.float64)
    ok = np.asarray(ok, dtype=bool)
    for t in sorted(set(s.tolist()), reverse=True):
        kept = s >= t
        n_kept = int(kept.sum())
        frac = float(np.float64(int(ok[kept].sum())) / np.float64(n_kept)) if n_kept else 1.0
        if frac < a:
            return float(t)
    return float(sentinel)


def r_scores_ref(scores, labels_ok, offsets, a: float = 1.0, sentinel: float = -np.inf) -> np.ndarray:
    """r-score of each response ``i`` (claims ``offsets[i]:offsets[i + 1]``) -> (n,) float64."""
    scores = np.asarray(scores, dtype=np.float64)
    labels_ok = np.asarray(labels_ok, dtype=bool)
    offsets = np.asarray(offsets, dtype=np.int64)
    n = offsets.shape[0] - 1
    out = np.empty(n, dtype=np.float64)
    for i in range(n):
        b, e = int(offsets[i]), int(offsets[i + 1])
        out[i] = r_score_one_ref(scores[b:e], labels_ok[b:e], a, sentinel)
    return out
