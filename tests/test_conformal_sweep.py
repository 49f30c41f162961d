"""conformal_sweep: every split x alpha in one call, bitwise equal in reference and cpp."""

from __future__ import annotations

import numpy as np
import pytest
from conformal_data import backend_fixture, claims

from rrag_kernels.ops import conformal_quantile, conformal_sweep, r_scores
from rrag_kernels.reference import calibration_mask_ref, conformal_sweep_ref, split_base_ref, split_keys_ref

backend = backend_fixture()

FIELDS = ("q_hat", "fully_supported", "retention", "non_empty", "supported_given_non_empty", "n_calib")
ALPHAS = np.array([0.05, 0.1, 0.2, 0.35, 0.5])


def _equal(x, y):
    for f in FIELDS:
        np.testing.assert_array_equal(getattr(x, f), getattr(y, f), err_msg=f)


@pytest.mark.parametrize("n", [2, 3, 61, 400])
@pytest.mark.parametrize("a", [1.0, 0.75])
@pytest.mark.parametrize("sentinel", [-np.inf, -1.0])
def test_cpp_equals_reference(core, rng, n, a, sentinel):
    s, ok, off = claims(rng, n)
    kw = dict(alphas=ALPHAS, n_splits=6, seed=int(rng.integers(2**63)) * 2 + 1, a=a, sentinel=sentinel)
    _equal(conformal_sweep(s, ok, off, backend="cpp", **kw), conformal_sweep(s, ok, off, backend="reference", **kw))


@pytest.mark.parametrize("n_groups", [1, 3, 17])
def test_groups_cpp_equals_reference(core, rng, n_groups):
    s, ok, off = claims(rng, 300)
    groups = np.array([f"g{x}" for x in rng.integers(0, n_groups, 300)])
    kw = dict(alphas=ALPHAS, n_splits=5, seed=3, calib_fraction=0.3, groups=groups)
    x = conformal_sweep(s, ok, off, backend="cpp", **kw)
    _equal(x, conformal_sweep(s, ok, off, backend="reference", **kw))
    assert x.q_hat.shape == (5, 5, len(set(groups.tolist())))
    assert list(x.groups) == sorted(set(groups.tolist()))


def test_q_hat_is_the_quantile_of_the_calibration_split(backend, rng):
    s, ok, off = claims(rng, 101)
    sw = conformal_sweep(s, ok, off, alphas=ALPHAS, n_splits=4, seed=11, calib_fraction=0.4, backend=backend)
    r = r_scores(s, ok, off)
    for sp in range(4):
        cal = calibration_mask_ref(11, sp, 101, 0.4)
        assert cal.sum() == 40 == sw.n_calib[sp, 0]
        np.testing.assert_array_equal(sw.q_hat[sp, :, 0], conformal_quantile(r[cal], ALPHAS))
        # metrics from the definition on the test split
        keep = s >= sw.q_hat[sp, 1, 0]
        test = np.flatnonzero(~cal)
        fs = [not (keep[off[i]:off[i + 1]] & ~ok[off[i]:off[i + 1]]).any() for i in test]
        assert sw.fully_supported[sp, 1] == np.mean(fs)


@pytest.fixture
def sweep_tuning(core):
    yield core._set_sweep_tuning
    core._set_sweep_tuning(8.0, 8.0, True)


@pytest.mark.parametrize("tuning", [(8.0, 8.0, True), (0.0, 0.0, True), (-1.0, -1.0, False), (0.0, 0.5, False)])
@pytest.mark.parametrize("grouped", [False, True])
def test_fast_paths_equal_reference_at_scale(sweep_tuning, rng, tuning, grouped):
    # At this size most responses are split-invariant (their scores miss every alpha's band of
    # thresholds), so the class path carries most of the counts, and the key window and r-score
    # bands hit. Width 0 makes the window and the bands miss often (radix select, exact
    # quantile selection); < 0 turns them off. Every setting must give the same bits.
    n = 20_000
    s, ok, off = claims(rng, n, ties=False)
    s[rng.random(s.shape[0]) < 0.02] = -np.inf  # scores at the sentinel's value
    s[rng.random(s.shape[0]) < 0.005] = np.inf  # and at the too-few-calibration threshold
    groups = rng.integers(0, 3, n) if grouped else None
    kw = dict(alphas=np.array([0.3, 0.05, 0.1]), n_splits=7, seed=int(rng.integers(2**62)), groups=groups)
    sweep_tuning(*tuning)
    got = conformal_sweep(s, ok, off, backend="cpp", **kw)
    _equal(got, conformal_sweep(s, ok, off, backend="reference", **kw))


def test_sampled_band_ends_equal_reference(core, rng):
    # Groups above 2 * 65,536 responses take their band ends from a strided sample.
    n = 140_000
    s, ok, off = claims(rng, n, max_p=4, ties=False)
    kw = dict(alphas=np.array([0.1, 0.25]), n_splits=2, seed=4)
    _equal(conformal_sweep(s, ok, off, backend="cpp", **kw), conformal_sweep(s, ok, off, backend="reference", **kw))


def test_ties_and_sentinels_through_narrow_bands(sweep_tuning, rng):
    # Rounded scores: many equal r-scores straddle every band edge; a = 0.75 and a finite
    # sentinel give r-scores that are not claim maxima.
    s, ok, off = claims(rng, 5000, ties=True)
    kw = dict(alphas=ALPHAS, n_splits=5, seed=9, a=0.75, sentinel=-1.0, groups=rng.integers(0, 5, 5000))
    want = conformal_sweep(s, ok, off, backend="reference", **kw)
    for tuning in [(8.0, 8.0, True), (0.0, 0.0, True)]:
        sweep_tuning(*tuning)
        _equal(conformal_sweep(s, ok, off, backend="cpp", **kw), want)


def test_split_generator():
    k = split_keys_ref(7, 0, 100000)
    assert np.unique(k).size == 100000
    assert not np.array_equal(k, split_keys_ref(7, 1, 100000))
    assert not np.array_equal(k, split_keys_ref(8, 0, 100000))
    # first keys pinned: the generator is part of the API (C++ shares it)
    assert split_keys_ref(0, 0, 2).tolist() == split_keys_ref(0, 0, 3)[:2].tolist()
    assert calibration_mask_ref(0, 0, 10, 0.5).sum() == 5


def test_reproducible_and_seed_dependent(backend, rng):
    s, ok, off = claims(rng, 200)
    kw = dict(alphas=ALPHAS, n_splits=3, backend=backend)
    _equal(conformal_sweep(s, ok, off, seed=5, **kw), conformal_sweep(s, ok, off, seed=5, **kw))
    a, b = conformal_sweep(s, ok, off, seed=5, **kw), conformal_sweep(s, ok, off, seed=6, **kw)
    assert not np.array_equal(a.q_hat, b.q_hat)
    big = conformal_sweep(s, ok, off, seed=2**64 - 1, **kw)
    assert big.q_hat.shape == (3, 5, 1)


def test_thread_count_invariant(restore_threads_and_simd, rng):
    import rrag_kernels

    s, ok, off = claims(rng, 5003)
    groups = rng.integers(0, 4, 5003)
    kw = dict(alphas=ALPHAS, n_splits=9, seed=1, groups=groups, backend="cpp")
    rrag_kernels.set_num_threads(1)
    one = conformal_sweep(s, ok, off, **kw)
    rrag_kernels.set_num_threads(3)
    _equal(conformal_sweep(s, ok, off, **kw), one)


def test_sentinel_minus_inf_keeps_everything(backend):
    # every response fully supported -> r = -inf -> q_hat = -inf: all kept, all fully supported
    s = np.array([0.3, 0.2, 0.5, 0.1, 0.9, 0.4])
    ok = np.ones(6, dtype=bool)
    off = np.array([0, 2, 2, 4, 5, 6, 6])
    sw = conformal_sweep(s, ok, off, alphas=[0.5], n_splits=3, seed=0, backend=backend)
    assert (sw.q_hat == -np.inf).all()
    assert (sw.fully_supported == 1.0).all() and (sw.retention == 1.0).all()


def test_coverage_property(backend, rng):
    """On exchangeable data the mean test fully-supported rate is >= 1 - alpha (up to noise)."""
    s, ok, off = claims(rng, 2000, ties=False, p_ok=0.85, empty_share=0.0)
    n_splits = 100 if backend == "cpp" else 10
    sw = conformal_sweep(s, ok, off, alphas=ALPHAS[:4], n_splits=n_splits, seed=2, backend=backend)
    tol = 3 * np.sqrt(ALPHAS[:4] * (1 - ALPHAS[:4]) / 1000 / n_splits) + 0.005
    assert (sw.fully_supported.mean(0) >= 1 - ALPHAS[:4] - tol).all()
    summ = sw.summary()
    assert (summ["fully_supported"]["lo"] <= summ["fully_supported"]["mean"]).all()


def test_zero_splits(backend, rng):
    s, ok, off = claims(rng, 10)
    sw = conformal_sweep(s, ok, off, alphas=ALPHAS, n_splits=0, seed=0, backend=backend)
    assert sw.fully_supported.shape == (0, 5)


def test_errors(backend, rng):
    s, ok, off = claims(rng, 10)
    kw = dict(alphas=ALPHAS, n_splits=2, seed=0, backend=backend)
    with pytest.raises(ValueError, match="^calib_fraction: empty calibration set"):
        conformal_sweep(s, ok, off, calib_fraction=0.05, **kw)
    with pytest.raises(ValueError, match="^calib_fraction: empty calibration set"):
        conformal_sweep(s[:0], ok[:0], [0], **kw)
    with pytest.raises(ValueError, match="^calib_fraction:"):
        conformal_sweep(s, ok, off, calib_fraction=1.0, **kw)
    with pytest.raises(ValueError, match="^alphas:"):
        conformal_sweep(s, ok, off, alphas=[0.1, 1.0], n_splits=2, seed=0, backend=backend)
    with pytest.raises(ValueError, match="^a:"):
        conformal_sweep(s, ok, off, a=0.0, **kw)
    with pytest.raises(ValueError, match="^n_splits:"):
        conformal_sweep(s, ok, off, alphas=ALPHAS, n_splits=-1, seed=0, backend=backend)
    with pytest.raises(ValueError, match="^seed:"):
        conformal_sweep(s, ok, off, alphas=ALPHAS, n_splits=1, seed=-1, backend=backend)
    with pytest.raises(TypeError, match="^seed:"):
        conformal_sweep(s, ok, off, alphas=ALPHAS, n_splits=1, seed=1.5, backend=backend)
    with pytest.raises(ValueError, match="^groups:"):
        conformal_sweep(s, ok, off, groups=np.zeros(3), **kw)
    with pytest.raises(ValueError, match="^labels_ok:"):
        conformal_sweep(s, ok[:-1], off, **kw)
    with pytest.raises(ValueError, match="^sentinel:"):
        conformal_sweep(s, ok, off, sentinel=np.nan, **kw)
    bad = s.copy()
    bad[0] = np.nan
    with pytest.raises(ValueError, match="^scores: contains NaN"):
        conformal_sweep(bad, ok, off, **kw)


def test_every_simd_level_equals_reference(restore_threads_and_simd, rng):
    # The split keys and unsupported maxima have one implementation per ISA; each must give the
    # reference's bits, at 1 and 3 threads.
    import rrag_kernels

    core = restore_threads_and_simd
    s, ok, off = claims(rng, 3001)  # 3001: a partial last word of 64 keys
    want_r = {a: r_scores(s, ok, off, a=a, backend="reference") for a in (1.0, 0.7)}
    # without groups the keys of phase A follow the response index, with groups a permutation
    for groups in (None, rng.integers(0, 2, 3001)):
        kw = dict(alphas=ALPHAS, n_splits=4, seed=77, groups=groups)
        want = conformal_sweep(s, ok, off, backend="reference", **kw)
        for level in core.available_simd_levels():
            core.set_simd_level(level)
            for threads in (1, 3):
                rrag_kernels.set_num_threads(threads)
                _equal(conformal_sweep(s, ok, off, backend="cpp", **kw), want)
                for a, want_a in want_r.items():
                    np.testing.assert_array_equal(r_scores(s, ok, off, a=a, backend="cpp"), want_a, err_msg=level)


def test_many_classes_and_long_responses(core, rng):
    # Hundreds of distinct claim counts make more than 512 classes (the class table grows) and
    # responses longer than the pairwise r-score path (> 16 claims) at a < 1.
    n = 3000
    p = rng.integers(0, 120, n)
    off = np.r_[0, np.cumsum(p)].astype(np.int64)
    s = rng.random(int(off[-1]))
    ok = rng.random(s.shape[0]) < 0.9
    for a in (1.0, 0.8):
        kw = dict(alphas=np.array([0.1, 0.3]), n_splits=3, seed=21, a=a)
        _equal(conformal_sweep(s, ok, off, backend="cpp", **kw), conformal_sweep(s, ok, off, backend="reference", **kw))


@pytest.mark.parametrize("count", [0, 1, 63, 64, 65, 130, 1001])
def test_split_key_bits_every_level(restore_threads_and_simd, rng, count):
    # The SIMD key passes, bit by bit against the reference generator: a wrong window would
    # only slow the sweep down (its exact fallback still gives the right answer).
    core = restore_threads_and_simd
    seed, split = int(rng.integers(2**63)), 3
    keys = split_keys_ref(seed, split, max(count, 1))[:count]
    base = split_base_ref(seed, split)
    perm = rng.permutation(count).astype(np.int64)
    lo = int(np.quantile(keys, 0.4)) if count else 2**63
    span = 2**60
    for level in core.available_simd_levels():
        core.set_simd_level(level)
        for p in (None, perm):
            k = keys if p is None else keys[p]
            below, window = core._split_key_bits(base, p, count, lo, span)
            want_below = np.zeros((count + 63) // 64, dtype=np.uint64)
            want_window = np.zeros_like(want_below)
            for t in range(count):
                if int(k[t]) < lo:
                    want_below[t // 64] |= np.uint64(1 << (t % 64))
                if 0 <= int(k[t]) - lo <= span:
                    want_window[t // 64] |= np.uint64(1 << (t % 64))
            np.testing.assert_array_equal(below, want_below, err_msg=f"below at {level}")
            np.testing.assert_array_equal(window, want_window, err_msg=f"window at {level}")
