"""``conformal_sweep``: every calibration/test split and alpha of split-conformal factuality."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import reference
from ..reference import calibration_size
from ._dispatch import core_cached, cpu_plan
from ._memory import check_memory_budget
from ._validation import (
    as_buffer,
    as_claims,
    check_alphas,
    check_claim_values,
    check_int,
    check_level_a,
    check_real,
    check_sentinel,
)

__all__ = ["SweepResult", "conformal_sweep"]

_U64_MAX = (1 << 64) - 1


@dataclass
class SweepResult:
    """Output of :func:`conformal_sweep`.

    Attributes
    ----------
    alphas : (A,) float64
    groups : the group labels (index g of ``q_hat``'s last axis), or None
    q_hat : (S, A, G) float64 -- G = 1 without groups
    fully_supported, retention, non_empty, supported_given_non_empty : (S, A) float64
    n_calib : (S, G) int64 -- calibration responses per group and split
    meta : dict -- n, calib_fraction, seed, a, sentinel, n_splits
    """

    alphas: np.ndarray
    groups: Any
    q_hat: np.ndarray
    fully_supported: np.ndarray
    retention: np.ndarray
    non_empty: np.ndarray
    supported_given_non_empty: np.ndarray
    n_calib: np.ndarray
    meta: dict = field(default_factory=dict)

    METRICS = ("fully_supported", "retention", "non_empty", "supported_given_non_empty")

    def summary(self, level: float = 0.95) -> dict[str, dict[str, np.ndarray]]:
        """Per metric: mean over splits, and the central ``level`` interval (percentiles over
        splits), each (A,); NaN splits (no non-empty response) are left out."""
        lo, hi = 50 * (1 - level), 50 * (1 + level)
        out = {}
        for name in self.METRICS:
            x = getattr(self, name)
            # An all-NaN column (no split with a non-empty response) is a NaN summary, not a warning.
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                out[name] = {
                    "mean": np.nanmean(x, axis=0) if x.size else np.full(x.shape[1], np.nan),
                    "lo": np.nanpercentile(x, lo, axis=0) if x.size else np.full(x.shape[1], np.nan),
                    "hi": np.nanpercentile(x, hi, axis=0) if x.size else np.full(x.shape[1], np.nan),
                }
        return out


def conformal_sweep(scores: Any, labels_ok: Any, offsets: Any, *, alphas: Any, n_splits: int,
                    calib_fraction: float = 0.5, seed: int, a: float = 1.0, sentinel: float = -np.inf,
                    groups: Any = None, backend: str | None = None) -> SweepResult:
    """All random calibration/test splits and all alphas of split-conformal factuality, in one call.

    Split ``s`` (0 <= s < n_splits) of ``seed``: the ``m = floor(calib_fraction * n)``
    responses with the smallest SplitMix64 keys ``mix(mix(seed + (s+1) G) + (j+1) G)`` are the
    calibration set (see :mod:`rrag_kernels.reference.conformal_sweep`), the rest the test set.
    On it: ``q_hat`` = the k-th smallest calibration r-score (per group when ``groups`` is
    given, Mondrian), and over the test responses, each filtered at its group's ``q_hat``:

    * ``fully_supported``: share whose kept claims are all supported (an empty filtered
      response counts as fully supported);
    * ``retention``: 1 - mean removed fraction, as ``(n0 + sum_p K_p / p) / n_test`` over the
      distinct claim counts ``p > 0`` in ascending order (``K_p`` = kept claims of the test
      responses with ``p`` claims; ``n0`` = responses with no claims, nothing removed);
    * ``non_empty``: share with at least one kept claim;
    * ``supported_given_non_empty``: fully supported among the non-empty (NaN when none).

    A group with no calibration response in a split gets ``q_hat = +inf``. Results are
    identical at any thread count, SIMD level and in both backends.

    Cost (C++): per split, two SIMD passes over n keys and a few popcounts; per response, a
    one-time pass over its claims; exact per-split work only for the responses with a score
    inside the range of thresholds the splits produce (a few percent at large n). About 100
    bytes per response of scratch at 5 alphas. Splits run in parallel, so use
    ``n_splits >= threads``. At n = 10^6 x 8 claims, 5 alphas x 100 splits: ~0.2-0.3 s on 2
    cores (``benchmarks/bench_conformal.py``; 0.18 s on the AMD EPYC VM of this stop).

    Parameters
    ----------
    scores : float array, shape (C,), no NaN
    labels_ok : bool array, shape (C,), True = supported
    offsets : integer array, shape (n + 1,)
        CSR: response ``i`` owns claims ``offsets[i]:offsets[i + 1]``.
    alphas : float array, shape (A,), each in (0, 1)
    n_splits : int >= 0
    calib_fraction : float in (0, 1), with 1 <= floor(calib_fraction * n) <= n - 1
    seed : int in [0, 2**64)
    a : float in (0, 1]
    sentinel : float, not NaN
    groups : array of labels (any hashable numpy values), shape (n,), or None
    backend : {None, "auto", "reference", "cpp"}

    Returns
    -------
    SweepResult
    """
    s, ok, off = as_claims(scores, labels_ok, offsets)
    n = off.shape[0] - 1
    al, _ = check_alphas(alphas, "alphas")
    n_splits = check_int(n_splits, "n_splits")
    seed = check_int(seed, "seed", maximum=_U64_MAX)
    cf = check_real(calib_fraction, "calib_fraction")
    calibration_size(n, cf)  # ValueError naming calib_fraction
    a = check_level_a(a)
    sentinel = check_sentinel(sentinel)
    labels, gid, n_groups = None, None, 1
    if groups is not None:
        try:
            g = np.asarray(groups.detach().cpu().numpy() if hasattr(groups, "detach") else groups)
        except (ValueError, TypeError) as exc:  # a ragged list
            raise ValueError(f"groups: expected one label per response ({exc})") from None
        if g.ndim != 1 or g.shape[0] != n:
            raise ValueError(f"groups: expected shape ({n},) (one label per response), got {g.shape}")
        try:
            labels, inv = np.unique(g, return_inverse=True)
        except TypeError as exc:  # labels that do not compare, e.g. None among ints
            raise TypeError(f"groups: the labels must be mutually comparable ({exc})") from None
        gid = as_buffer(inv.reshape(-1), np.int64)
        n_groups = max(int(labels.shape[0]), 1)
    per_split = 8 * (al.shape[0] * n_groups + 4 * al.shape[0] + n_groups)  # q_hat, 4 metrics, n_calib
    check_memory_budget(n_splits * per_split, "n_splits", "the per-split outputs")
    p = cpu_plan({}, backend, "conformal_sweep")
    if p.backend == "cpp":
        d = core_cached().conformal_sweep(s, ok, off, al, n_splits, cf, seed, a, sentinel, gid, n_groups)
    else:
        check_claim_values(s, off)
        d = reference.conformal_sweep_ref(s, ok, off, al, n_splits, cf, seed, a, sentinel, gid, n_groups)
    meta = {"n": n, "calib_fraction": cf, "seed": seed, "a": a, "sentinel": sentinel, "n_splits": n_splits}
    return SweepResult(alphas=al, groups=labels, meta=meta, **d)
