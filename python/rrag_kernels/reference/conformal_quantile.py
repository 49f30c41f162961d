"""Float64 truth for :func:`rrag_kernels.ops.conformal_quantile`."""

from __future__ import annotations

import math

import numpy as np

__all__ = ["conformal_quantile_ref", "conformal_rank"]


def conformal_rank(n: int, alpha: float) -> int:
    """``k = ceil((n + 1) * (1 - alpha))`` with the product rounded in float64 (as in C++)."""
    return math.ceil(float(n + 1) * (1.0 - float(alpha)))


def conformal_quantile_ref(r, alphas, raise_if_too_few: bool = False) -> np.ndarray:
    """For each alpha: the k-th smallest of ``r`` by integer rank (never ``np.quantile``),
    +inf when ``k > n`` (ValueError with ``raise_if_too_few``) -> (n_alphas,) float64."""
    r = np.sort(np.asarray(r, dtype=np.float64))
    n = r.shape[0]
    out = []
    for alpha in np.atleast_1d(np.asarray(alphas, dtype=np.float64)).tolist():
        k = conformal_rank(n, alpha)
        if k > n:
            if raise_if_too_few:
                raise ValueError(f"alpha: alpha = {alpha} needs rank k = {k} > n = {n} r-scores")
            out.append(np.inf)
        else:
            out.append(r[k - 1])
    return np.asarray(out, dtype=np.float64)
