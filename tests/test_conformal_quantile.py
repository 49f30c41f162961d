"""conformal_quantile: the k-th smallest by integer rank, k = ceil((n+1)(1-alpha)) in float64."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conformal_data import backend_fixture

from rrag_kernels.ops import conformal_quantile
from rrag_kernels.reference import conformal_quantile_ref, conformal_rank

backend = backend_fixture()

ALPHAS = np.round(np.arange(0.005, 1.0, 0.005), 3)


@pytest.mark.parametrize("n", [1, 2, 3, 10, 49, 50, 60, 113, 1000])
def test_rank_selection(backend, rng, n):
    r = np.round(rng.normal(size=n), 2)  # ties
    r[rng.random(n) < 0.1] = -np.inf
    got = conformal_quantile(r, ALPHAS, backend=backend)
    srt = np.sort(r)
    for alpha, q in zip(ALPHAS.tolist(), got.tolist()):
        k = math.ceil((n + 1) * (1 - alpha))
        assert q == (srt[k - 1] if k <= n else np.inf), (n, alpha)
    np.testing.assert_array_equal(got, conformal_quantile_ref(r, ALPHAS))


def test_scalar_returns_float_and_unsorted_alphas(backend, rng):
    r = rng.random(77)
    q = conformal_quantile(r, 0.1, backend=backend)
    assert isinstance(q, float) and q == np.sort(r)[conformal_rank(77, 0.1) - 1]
    al = np.array([0.3, 0.05, 0.3, 0.2])
    np.testing.assert_array_equal(conformal_quantile(r, al, backend=backend), conformal_quantile_ref(r, al))
    assert conformal_quantile(r, [], backend=backend).shape == (0,)


def test_too_few_inf_or_raise(backend):
    r = np.arange(5.0)
    assert conformal_quantile(r, 0.1, backend=backend) == np.inf  # k = ceil(6 * 0.9) = 6 > 5
    with pytest.raises(ValueError, match="^alpha:"):
        conformal_quantile(r, 0.1, on_too_few="raise", backend=backend)
    assert conformal_quantile(r, 0.2, on_too_few="raise", backend=backend) == 4.0


def test_the_np_quantile_trap_is_avoided(backend, rng):
    """method="higher" at level k/n returns a different order statistic for many n."""
    differs = 0
    for n in range(20, 120):
        r = rng.random(n)
        k = conformal_rank(n, 0.1)
        if k > n:
            continue
        ours = conformal_quantile(r, 0.1, backend=backend)
        assert ours == np.sort(r)[k - 1]
        differs += ours != np.quantile(r, k / n, method="higher")
    assert differs > 0


def test_errors(backend):
    with pytest.raises(ValueError, match="^r: empty calibration set"):
        conformal_quantile(np.zeros(0), 0.1, backend=backend)
    for alpha in (0.0, 1.0, -0.1, 1.1, np.nan):
        with pytest.raises(ValueError, match="^alpha:"):
            conformal_quantile(np.ones(3), alpha, backend=backend)
    with pytest.raises(ValueError, match="^alpha:"):
        conformal_quantile(np.ones(3), [0.1, 1.0], backend=backend)
    with pytest.raises(TypeError, match="^alpha:"):
        conformal_quantile(np.ones(3), True, backend=backend)
    with pytest.raises(ValueError, match="^r: contains NaN"):
        conformal_quantile(np.array([0.1, np.nan]), 0.1, backend=backend)
    with pytest.raises(ValueError, match="^on_too_few:"):
        conformal_quantile(np.ones(3), 0.1, on_too_few="clip", backend=backend)


def _large_inputs(rng, n):
    u = rng.random(n)
    heavy = u.copy()
    heavy[rng.random(n) < 0.6] = -np.inf  # most responses without a failing threshold
    return {
        "uniform": u,
        "ties": np.round(rng.normal(size=n), 1),
        "sentinel-heavy": heavy,
        "sorted": np.sort(u),
        "reversed": np.sort(u)[::-1].copy(),
        "constant": np.full(n, 0.25),
        "periodic": np.tile(np.arange(8.0), n // 8 + 1)[:n],  # period divides the sample stride
        "two-values": np.where(rng.random(n) < 0.93, 0.0, 1.0),
    }


@pytest.mark.parametrize("n", [65_535, 65_536, 300_007])
def test_large_n_band_selection_is_exact(rng, restore_threads_and_simd, n):
    """From 65,536 r-scores on, the C++ kernel reads each quantile off a narrow band of values
    (a strided sample, one parallel pass, a selection over the band); whatever the data, at
    every SIMD level and thread count, it equals the reference and the exact full selection."""
    core = restore_threads_and_simd
    alphas = np.array([0.001, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5, 0.9, 0.999])
    for kind, r in _large_inputs(rng, n).items():
        want = conformal_quantile_ref(r, alphas)
        core._set_quantile_bands(False)
        exact = conformal_quantile(r, alphas, backend="cpp")
        core._set_quantile_bands(True)
        np.testing.assert_array_equal(exact, want, err_msg=kind)
        for level in core.available_simd_levels():
            core.set_simd_level(level)
            for threads in (1, 3):
                core.set_num_threads(threads)
                got = conformal_quantile(r, alphas, backend="cpp")
                np.testing.assert_array_equal(got, want, err_msg=f"{kind} at {level}, {threads} threads")


def test_large_n_nan_is_found_by_the_band_pass(restore_threads_and_simd):
    r = np.linspace(0.0, 1.0, 100_000)
    r[77_777] = np.nan
    with pytest.raises(ValueError, match=r"^r: contains NaN \(first at index 77777\)"):
        conformal_quantile(r, 0.1, backend="cpp")
