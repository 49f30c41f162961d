"""Conformal factuality kernels: validate, then dispatch to the reference or C++ backend.

Split-conformal claim filtering (Mohri & Hashimoto 2024; Feng et al. 2025)::

    r = r_scores(scores, labels_ok, offsets, a=1.0)          # one r-score per response
    q_hat = conformal_quantile(r, alpha=0.1)                  # keep a claim iff s >= q_hat
    sweep = conformal_sweep(scores, labels_ok, offsets, alphas=[0.05, 0.1], n_splits=100, seed=0)

Conventions
-----------
* ``scores`` (C,) float (converted to float64; NaN raises ValueError), ``labels_ok`` (C,)
  bool (True = supported), ``offsets`` (n + 1,) integer CSR over the claims: response ``i``
  owns claims ``offsets[i]:offsets[i + 1]``.
* ``backend``: None/"auto" (C++ when built, else the reference), "reference" or "cpp". There
  is no Triton version: the work is a few comparisons per claim and a selection per split,
  memory-bound and branchy. Inputs may be numpy arrays, lists or torch tensors; outputs are
  numpy.
* Both backends return bitwise the same results: every output is an order statistic, an
  integer count, or one prescribed float64 expression of integer counts.
* Bad arguments raise TypeError (kind/dtype) or ValueError (shape/value) whose message starts
  with the argument's name.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import reference
from ._dispatch import core_cached as _core
from ._dispatch import cpu_plan as _cpu_plan
from ._validation import as_float64, as_index, check_csr, check_real
from .reference.conformal_sweep import calibration_size

__all__ = ["SweepResult", "conformal_quantile", "conformal_sweep", "r_scores"]

_U64_MAX = (1 << 64) - 1


def check_sentinel(sentinel: Any) -> float:
    """The r-score sentinel as a float; TypeError for a non-number, ValueError for NaN."""
    sentinel = check_real(sentinel, "sentinel")
    if np.isnan(sentinel):
        raise ValueError("sentinel: must not be NaN (use -inf, -100000.0 or -1.0)")
    return sentinel


def check_level_a(a: Any) -> float:
    """The factuality level a as a float in (0, 1]; TypeError / ValueError naming ``a``."""
    a = check_real(a, "a")
    if not (0.0 < a <= 1.0):
        raise ValueError(f"a: the factuality level must be in (0, 1], got {a}")
    return a


def _alphas(alpha: Any, name: str) -> tuple[np.ndarray, bool]:
    """(alphas as (A,) float64, whether a scalar was given); each in (0, 1)."""
    scalar = isinstance(alpha, numbers.Real) and not isinstance(alpha, bool)
    if isinstance(alpha, bool):
        raise TypeError(f"{name}: expected a float or a 1-d array of floats, got bool")
    if scalar:
        arr = np.array([float(alpha)], dtype=np.float64)
    else:
        if isinstance(alpha, (list, tuple)):
            alpha = np.asarray(alpha, dtype=np.float64) if len(alpha) else np.zeros(0)
        arr = as_float64(alpha, name, (None,), allow_int=True)
    bad = ~((arr > 0.0) & (arr < 1.0))
    if bad.any():
        raise ValueError(f"{name}: every alpha must be in (0, 1), got {arr[int(np.argmax(bad))]}")
    return arr, scalar


def as_claims(scores: Any, labels_ok: Any, offsets: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Claims in CSR form as (C,) float64, (C,) bool and (n + 1,) int64 numpy (shape and dtype
    checked; values -- NaN, offsets -- are checked by the kernels)."""
    s = as_float64(scores, "scores", (None,), allow_int=True)
    if isinstance(labels_ok, (list, tuple)):
        labels_ok = np.asarray(labels_ok, dtype=bool) if len(labels_ok) else np.zeros(0, dtype=bool)
    if hasattr(labels_ok, "detach"):
        labels_ok = labels_ok.detach().cpu().numpy()
    if not isinstance(labels_ok, np.ndarray):
        raise TypeError(f"labels_ok: expected a bool numpy array, got {type(labels_ok).__name__}")
    if labels_ok.dtype != np.bool_:
        raise TypeError(f"labels_ok: expected dtype bool, got {labels_ok.dtype}")
    if labels_ok.ndim != 1 or labels_ok.shape[0] != s.shape[0]:
        raise ValueError(f"labels_ok: expected shape ({s.shape[0]},) to match scores, got {labels_ok.shape}")
    off = as_index(offsets, "offsets")
    if off.shape[0] < 1:
        raise ValueError("offsets: expected length n + 1 >= 1, got 0")
    return s, np.ascontiguousarray(labels_ok), off


def _value_checks(s: np.ndarray, off: np.ndarray) -> None:
    check_csr(off, "offsets", s.shape[0])
    nan = np.isnan(s)
    if nan.any():
        raise ValueError(f"scores: contains NaN (first at index {int(np.argmax(nan))})")


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
    scores : (C,) float64; labels_ok : (C,) bool; offsets : (n + 1,) int64
    a : float in (0, 1]
    sentinel : float
    backend : {None, "auto", "reference", "cpp"}

    Returns
    -------
    (n,) float64
    """
    s, ok, off = as_claims(scores, labels_ok, offsets)
    a = check_level_a(a)
    sentinel = check_sentinel(sentinel)
    p = _cpu_plan({}, backend, "r_scores")
    if p.backend == "cpp":
        return _core().r_scores(s, ok, off, a, sentinel)
    _value_checks(s, off)
    return reference.r_scores_ref(s, ok, off, a, sentinel)


def conformal_quantile(r: Any, alpha: Any, *, on_too_few: str = "inf", backend: str | None = None) -> Any:
    """Split-conformal threshold: the k-th smallest r-score, ``k = ceil((n + 1)(1 - alpha))``.

    ``k`` is computed in float64 and the order statistic selected by integer rank (never
    ``np.quantile``, whose "higher"/"inverted_cdf" idioms are off by one for some n). When
    ``k > n`` the threshold is +inf (nothing is kept), or ValueError with
    ``on_too_few="raise"``.

    Parameters
    ----------
    r : (n,) float64, n >= 1, no NaN (-inf allowed)
    alpha : float in (0, 1), or (A,) array of them
    on_too_few : {"inf", "raise"}
    backend : {None, "auto", "reference", "cpp"}

    Returns
    -------
    float for a scalar alpha, else (A,) float64
    """
    arr = as_float64(r, "r", (None,), allow_int=True)
    alphas, scalar = _alphas(alpha, "alpha")
    if on_too_few not in ("inf", "raise"):
        raise ValueError(f"on_too_few: expected 'inf' or 'raise', got {on_too_few!r}")
    if arr.shape[0] == 0:
        raise ValueError("r: empty calibration set (no r-scores)")
    raise_ = on_too_few == "raise"
    p = _cpu_plan({}, backend, "conformal_quantile")
    if p.backend == "cpp":
        out = _core().conformal_quantile(arr, alphas, raise_)
    else:
        nan = np.isnan(arr)
        if nan.any():
            raise ValueError(f"r: contains NaN (first at index {int(np.argmax(nan))})")
        out = reference.conformal_quantile_ref(arr, alphas, raise_)
    return float(out[0]) if scalar else out


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
            with np.errstate(all="ignore"), __import__("warnings").catch_warnings():
                __import__("warnings").simplefilter("ignore", RuntimeWarning)
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
    ``n_splits >= threads``. At n = 10^6 x 8 claims, 5 alphas x 100 splits: ~0.3 s on 2
    cores (``benchmarks/bench_conformal.py``).

    Parameters
    ----------
    scores : (C,) float64; labels_ok : (C,) bool; offsets : (n + 1,) int64
    alphas : (A,) floats in (0, 1)
    n_splits : int >= 0
    calib_fraction : float in (0, 1), with 1 <= floor(calib_fraction * n) <= n - 1
    seed : int in [0, 2**64)
    a : float in (0, 1]; sentinel : float
    groups : (n,) labels (any hashable numpy values) or None
    backend : {None, "auto", "reference", "cpp"}

    Returns
    -------
    SweepResult
    """
    s, ok, off = as_claims(scores, labels_ok, offsets)
    n = off.shape[0] - 1
    al, _ = _alphas(alphas, "alphas")
    if isinstance(n_splits, bool) or not isinstance(n_splits, numbers.Integral):
        raise TypeError(f"n_splits: expected an int, got {type(n_splits).__name__}")
    if n_splits < 0:
        raise ValueError(f"n_splits: must be >= 0, got {n_splits}")
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise TypeError(f"seed: expected an int, got {type(seed).__name__}")
    if not (0 <= int(seed) <= _U64_MAX):
        raise ValueError(f"seed: must be in [0, 2**64), got {seed}")
    cf = check_real(calib_fraction, "calib_fraction")
    calibration_size(n, cf)  # ValueError naming calib_fraction
    a = check_level_a(a)
    sentinel = check_sentinel(sentinel)
    labels, gid, n_groups = None, None, 1
    if groups is not None:
        g = np.asarray(groups.detach().cpu().numpy() if hasattr(groups, "detach") else groups)
        if g.ndim != 1 or g.shape[0] != n:
            raise ValueError(f"groups: expected shape ({n},) (one label per response), got {g.shape}")
        labels, inv = np.unique(g, return_inverse=True)
        gid = np.ascontiguousarray(inv.reshape(-1), dtype=np.int64)
        n_groups = max(int(labels.shape[0]), 1)
    p = _cpu_plan({}, backend, "conformal_sweep")
    if p.backend == "cpp":
        d = _core().conformal_sweep(s, ok, off, al, int(n_splits), cf, int(seed), a, sentinel, gid, n_groups)
    else:
        _value_checks(s, off)
        d = reference.conformal_sweep_ref(s, ok, off, al, int(n_splits), cf, int(seed), a, sentinel, gid, n_groups)
    meta = {"n": n, "calib_fraction": cf, "seed": int(seed), "a": a, "sentinel": sentinel, "n_splits": int(n_splits)}
    return SweepResult(alphas=al, groups=labels, meta=meta, **d)
