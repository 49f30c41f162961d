"""r_scores: exact equality with the literal definition in every backend (reference, cpp)."""

from __future__ import annotations

import numpy as np
import pytest
from conformal_data import backend_fixture, claims

from rrag_kernels.ops import r_scores
from rrag_kernels.reference import r_scores_ref

backend = backend_fixture()  # no Triton version: reference and cpp


def _brute(s, ok, off, a, sentinel):
    """O(p^2) restatement, independent of the reference's code."""
    out = []
    for i in range(len(off) - 1):
        ss, oo = s[off[i]:off[i + 1]], ok[off[i]:off[i + 1]]
        val = sentinel
        for t in sorted(set(ss.tolist()), reverse=True):
            k = ss >= t
            if np.float64(oo[k].sum()) / np.float64(k.sum()) < a:
                val = t
                break
        out.append(val)
    return np.array(out, dtype=np.float64)


@pytest.mark.parametrize("n", [0, 1, 2, 7, 113, 1023])
@pytest.mark.parametrize("a", [1.0, 0.9, 0.7, 0.5, 1 / 3, 1e-9])
def test_matches_definition(backend, rng, n, a):
    s, ok, off = claims(rng, n)
    got = r_scores(s, ok, off, a=a, sentinel=-100000.0, backend=backend)
    assert got.dtype == np.float64 and got.shape == (n,)
    np.testing.assert_array_equal(got, _brute(s, ok, off, a, -100000.0))
    np.testing.assert_array_equal(got, r_scores_ref(s, ok, off, a, -100000.0))


def test_a_one_is_largest_unsupported_score(backend, rng):
    s, ok, off = claims(rng, 500, ties=False)
    got = r_scores(s, ok, off, backend=backend)
    for i in range(500):
        bad = s[off[i]:off[i + 1]][~ok[off[i]:off[i + 1]]]
        assert got[i] == (bad.max() if bad.size else -np.inf)


def test_hand_cases_ties_and_sentinels(backend):
    # one response per case
    cases = [
        ([0.9, 0.9], [True, False], 0.5, -1.0),   # 1/2 < 0.5 is False -> sentinel
        ([0.9, 0.9], [True, False], 0.6, 0.9),    # the tie enters as a group
        ([0.9, 0.8, 0.7], [True, True, True], 1.0, -1.0),
        ([0.9, 0.8, 0.7], [False, True, True], 1.0, 0.9),
        ([0.9, 0.8, 0.7], [True, False, True], 0.6, 0.8),  # 1/2 < 0.6 at t = 0.8
        ([0.9, 0.8, 0.7], [True, False, True], 0.5, -1.0),  # 1/2, then 2/3
        ([], [], 1.0, -1.0),
        ([np.inf, -np.inf], [False, True], 1.0, np.inf),
    ]
    for sc, lab, a, want in cases:
        got = r_scores(np.array(sc, dtype=np.float64), np.array(lab, dtype=bool), np.array([0, len(sc)]), a=a,
                       sentinel=-1.0, backend=backend)
        assert got.tolist() == [want], (sc, lab, a)


def test_one_huge_segment_among_empty(backend, rng):
    s = np.round(rng.random(5000), 3)
    ok = rng.random(5000) < 0.97
    off = np.array([0] * 50 + [5000] * 50, dtype=np.int64)
    got = r_scores(s, ok, off, a=0.95, backend=backend)
    np.testing.assert_array_equal(got, r_scores_ref(s, ok, off, 0.95))


def test_thread_count_invariant(restore_threads_and_simd, rng):
    import rrag_kernels

    s, ok, off = claims(rng, 20011)
    rrag_kernels.set_num_threads(1)
    one = r_scores(s, ok, off, a=0.8, backend="cpp")
    rrag_kernels.set_num_threads(3)
    np.testing.assert_array_equal(r_scores(s, ok, off, a=0.8, backend="cpp"), one)


def test_accepts_lists_and_ints(backend):
    got = r_scores([3, 2, 1], [True, False, True], [0, 3], backend=backend)
    assert got.tolist() == [2.0]


def test_errors(backend):
    s, ok, off = np.array([0.1, 0.2]), np.array([True, False]), np.array([0, 2])
    with pytest.raises(ValueError, match="^labels_ok:"):
        r_scores(s, ok[:1], off, backend=backend)
    with pytest.raises(TypeError, match="^labels_ok:"):
        r_scores(s, np.array([1, 0]), off, backend=backend)
    with pytest.raises(TypeError, match="^scores:"):
        r_scores(np.array(["a", "b"]), ok, off, backend=backend)
    with pytest.raises(ValueError, match="^scores: contains NaN"):
        r_scores(np.array([0.1, np.nan]), ok, off, backend=backend)
    for a in (0.0, -0.5, 1.5, np.nan):
        with pytest.raises(ValueError, match="^a:"):
            r_scores(s, ok, off, a=a, backend=backend)
    with pytest.raises(ValueError, match="^sentinel: must not be NaN"):
        r_scores(s, ok, off, sentinel=np.nan, backend=backend)
    with pytest.raises(ValueError, match="^offsets:"):
        r_scores(s, ok, np.array([0, 3]), backend=backend)
    with pytest.raises(ValueError, match="^offsets:"):
        r_scores(s, ok, np.array([0, 2, 1, 2]), backend=backend)
    with pytest.raises(TypeError, match="^offsets:"):
        r_scores(s, ok, np.array([0.0, 2.0]), backend=backend)


def test_triton_backend_refused():
    with pytest.raises(ValueError, match="^backend:"):
        r_scores(np.array([0.1]), np.array([True]), np.array([0, 1]), backend="triton")


@pytest.mark.parametrize("a", [1.0, 0.6])
def test_cpp_rechecks_and_names_the_first_nan(core, rng, a):
    # The compiled entry point is called directly: its own checks, not the Python ones. A NaN
    # in a long response (past the insertion-sort length) must raise, never reach a sort.
    s = rng.random(40)
    s[[23, 31]] = np.nan
    ok, off = rng.random(40) < 0.5, np.array([0, 3, 40], dtype=np.int64)
    with pytest.raises(ValueError, match="^scores: contains NaN \\(first at index 23\\)"):
        core.r_scores(s, ok, off, a, -np.inf)
    with pytest.raises(ValueError, match="^sentinel: must not be NaN"):
        core.r_scores(s[:3], ok[:3], off[:2], a, np.nan)
