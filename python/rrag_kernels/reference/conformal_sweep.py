"""Float64 truth for :func:`rrag_kernels.ops.conformal_sweep`, and the split generator.

The split generator (shared bit for bit with csrc/kernels/conformal_sweep.hpp)::

    mix(z) = SplitMix64's finaliser: z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
                                     z = (z ^ (z >> 27)) * 0x94D049BB133111EB
                                     return z ^ (z >> 31)         (uint64, mod 2**64)
    base_s = mix(seed + (s + 1) * G),  key_j = mix(base_s + (j + 1) * G),  G = 0x9E3779B97F4A7C15

Split ``s``'s calibration set is the ``m = floor(calib_fraction * n)`` responses with the
smallest keys (distinct within a split: G is odd and mix is a bijection); the others are the
test set.
"""

from __future__ import annotations

import math

import numpy as np

from .conformal_quantile import conformal_rank
from .r_scores import r_scores_ref

__all__ = ["calibration_mask_ref", "calibration_size", "conformal_sweep_ref", "split_base_ref", "split_keys_ref"]

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
#: G of the split generator (odd): key_j = mix(base + (j + 1) * G).
SPLIT_GAMMA = 0x9E3779B97F4A7C15
_G = np.uint64(SPLIT_GAMMA)
_MASK = (1 << 64) - 1


def _mix(z: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        z = (z ^ (z >> np.uint64(30))) * _M1
        z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


def split_base_ref(seed: int, split: int) -> int:
    """``base_s = mix(seed + (split + 1) * G)`` of split ``split``, as a Python int."""
    return int(_mix(np.array([(int(seed) + (split + 1) * int(_G)) & _MASK], dtype=np.uint64))[0])


def split_keys_ref(seed: int, split: int, n: int, *, gamma_multiples: np.ndarray | None = None) -> np.ndarray:
    """The (n,) uint64 keys of split ``split``.

    ``gamma_multiples``: the (n,) uint64 ``(j + 1) * G`` (mod 2**64), when many splits of the
    same n are drawn (the benchmarks' baselines); computed here otherwise.
    """
    with np.errstate(over="ignore"):
        if gamma_multiples is None:
            gamma_multiples = np.arange(1, n + 1, dtype=np.uint64) * _G
        return _mix(np.uint64(split_base_ref(seed, split)) + gamma_multiples)


def calibration_size(n: int, calib_fraction: float) -> int:
    """``m = floor(calib_fraction * n)``; ValueError unless 1 <= m <= n - 1."""
    if not (0.0 < calib_fraction < 1.0):
        raise ValueError(f"calib_fraction: must be in (0, 1), got {calib_fraction}")
    m = math.floor(float(calib_fraction) * float(n))
    if m < 1:
        raise ValueError(f"calib_fraction: empty calibration set: floor(calib_fraction * n) = 0 for n = {n}")
    if m > n - 1:
        raise ValueError(f"calib_fraction: empty test set: floor(calib_fraction * n) = n = {n}")
    return m


def calibration_mask_ref(seed: int, split: int, n: int, calib_fraction: float) -> np.ndarray:
    """(n,) bool: True for split ``split``'s calibration responses."""
    m = calibration_size(n, calib_fraction)
    keys = split_keys_ref(seed, split, n)
    mask = np.zeros(n, dtype=bool)
    mask[np.argsort(keys, kind="stable")[:m]] = True
    return mask


def conformal_sweep_ref(scores, labels_ok, offsets, alphas, n_splits: int, calib_fraction: float = 0.5,
                        seed: int = 0, a: float = 1.0, sentinel: float = -np.inf, groups=None,
                        n_groups: int = 1) -> dict:
    """Every split and alpha, from the definitions (see ``conformal_sweep``'s docstring).

    Returns a dict of q_hat (n_splits, n_alphas, n_groups), fully_supported, retention,
    non_empty, supported_given_non_empty (n_splits, n_alphas) float64 and n_calib
    (n_splits, n_groups) int64.
    """
    scores = np.asarray(scores, dtype=np.float64)
    labels_ok = np.asarray(labels_ok, dtype=bool)
    offsets = np.asarray(offsets, dtype=np.int64)
    alphas = np.asarray(alphas, dtype=np.float64)
    n = offsets.shape[0] - 1
    A = alphas.shape[0]
    if groups is None:
        gid, G = np.zeros(n, dtype=np.int64), 1
    else:
        gid, G = np.asarray(groups, dtype=np.int64), int(n_groups)
    r = r_scores_ref(scores, labels_ok, offsets, a, sentinel)
    p = np.diff(offsets)
    resp = np.repeat(np.arange(n), p)
    out = {
        "q_hat": np.empty((n_splits, A, G)),
        "fully_supported": np.empty((n_splits, A)),
        "retention": np.empty((n_splits, A)),
        "non_empty": np.empty((n_splits, A)),
        "supported_given_non_empty": np.empty((n_splits, A)),
        "n_calib": np.empty((n_splits, G), dtype=np.int64),
    }
    for s in range(n_splits):
        cal = calibration_mask_ref(seed, s, n, calib_fraction)
        test = ~cal
        n_test = int(test.sum())
        for g in range(G):
            rg = np.sort(r[cal & (gid == g)])
            out["n_calib"][s, g] = rg.shape[0]
            for ai, alpha in enumerate(alphas.tolist()):
                k = conformal_rank(rg.shape[0], alpha)
                out["q_hat"][s, ai, g] = np.inf if k > rg.shape[0] else rg[k - 1]
        for ai in range(A):
            q_claim = out["q_hat"][s, ai, gid[resp]]
            keep = scores >= q_claim
            kept = np.zeros(n, dtype=np.int64)
            np.add.at(kept, resp[keep], 1)
            bad = np.zeros(n, dtype=np.int64)
            np.add.at(bad, resp[keep & ~labels_ok], 1)
            fs = (bad == 0) & test
            ne = (kept > 0) & test
            c_ne = int(ne.sum())
            out["fully_supported"][s, ai] = float(fs.sum()) / float(n_test)
            out["non_empty"][s, ai] = float(c_ne) / float(n_test)
            out["supported_given_non_empty"][s, ai] = float((fs & ne).sum()) / float(c_ne) if c_ne else np.nan
            acc = 0.0
            for pv in np.unique(p).tolist():
                if pv > 0:
                    acc += float(int(kept[test & (p == pv)].sum())) / float(pv)
            n0 = int((test & (p == 0)).sum())
            out["retention"][s, ai] = (acc + float(n0)) / float(n_test)
    return out
