"""``r_scores``: the conformal-factuality r-score of each response."""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import reference
from ._dispatch import core_cached, cpu_plan
from ._validation import as_claims, check_claim_values, check_level_a, check_sentinel

__all__ = ["r_scores"]


def r_scores(scores: Any, labels_ok: Any, offsets: Any, *, a: float = 1.0, sentinel: float = -np.inf,
             backend: str | None = None) -> np.ndarray:
    """Conformal-factuality r-score of each response.

    Scan the thresholds ``t`` over response ``i``'s scores in descending order; ``S_i`` is
    the first ``t`` at which the supported fraction of the claims with ``s >= t`` is below
    ``a`` (equal scores enter together). No such ``t``, or no claims: ``sentinel``
    (-inf; -100000 and -1 reproduce Mohri et al.'s and Feng et al.'s code). For ``a = 1``,
    ``S_i`` is the largest unsupported score. Filtering at ``q_hat > S_i`` leaves response
    ``i`` with a supported fraction ``>= a``. O(p log p) per response.

    Parameters
    ----------
    scores : float array, shape (C,), no NaN
    labels_ok : bool array, shape (C,), True = supported
    offsets : integer array, shape (n + 1,)
        CSR: response ``i`` owns claims ``offsets[i]:offsets[i + 1]``.
    a : float in (0, 1]
    sentinel : float, not NaN
    backend : {None, "auto", "reference", "cpp"}

    Returns
    -------
    ndarray, shape (n,), float64
    """
    s, ok, off = as_claims(scores, labels_ok, offsets)
    a = check_level_a(a)
    sentinel = check_sentinel(sentinel)
    p = cpu_plan({}, backend, "r_scores")
    if p.backend == "cpp":
        return core_cached().r_scores(s, ok, off, a, sentinel)
    check_claim_values(s, off)
    return reference.r_scores_ref(s, ok, off, a, sentinel)
