"""``conformal_quantile``: the split-conformal threshold q_hat, by integer rank."""

from __future__ import annotations

from typing import Any

from .. import reference
from ._dispatch import core_cached, cpu_plan
from ._validation import as_float64, check_alphas, check_choice, check_no_nan

__all__ = ["conformal_quantile"]


def conformal_quantile(r: Any, alpha: Any, *, on_too_few: str = "inf", backend: str | None = None) -> Any:
    """Split-conformal threshold: the k-th smallest r-score, ``k = ceil((n + 1)(1 - alpha))``.

    ``k`` is computed in float64 and the order statistic selected by integer rank (never
    ``np.quantile``, whose "higher"/"inverted_cdf" idioms are off by one for some n). When
    ``k > n`` the threshold is +inf (nothing is kept), or ValueError with
    ``on_too_few="raise"``.

    Parameters
    ----------
    r : float array, shape (n,), n >= 1, no NaN (-inf allowed)
    alpha : float in (0, 1), or float array of them, shape (A,)
    on_too_few : {"inf", "raise"}
    backend : {None, "auto", "reference", "cpp"}

    Returns
    -------
    float for a scalar alpha, else ndarray, shape (A,), float64
    """
    arr = as_float64(r, "r", (None,), allow_int=True)
    alphas, scalar = check_alphas(alpha, "alpha")
    check_choice(on_too_few, "on_too_few", ("inf", "raise"))
    if arr.shape[0] == 0:
        raise ValueError("r: empty calibration set (no r-scores)")
    raise_if_too_few = on_too_few == "raise"
    p = cpu_plan({}, backend, "conformal_quantile")
    if p.backend == "cpp":
        out = core_cached().conformal_quantile(arr, alphas, raise_if_too_few)
    else:
        check_no_nan(arr, "r")
        out = reference.conformal_quantile_ref(arr, alphas, raise_if_too_few)
    return float(out[0]) if scalar else out
