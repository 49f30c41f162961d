"""cosine_matrix(a (n, d), b (m, d)) -> (n, m) float32, every backend, against float64."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import assert_close, error_bound, naive_cosine_matrix_f32, random_rows

import rrag_kernels as rk
from rrag_kernels.reference import cosine_matrix_ref

# (n, m, d): empty sides, 1, odd primes, block-1/block/block+1 for 16/32/64/128 on both
# row axes, and d off every SIMD width (1, 3, 17, 383, 385) as well as on it.
SHAPES = [
    (0, 5, 8),
    (5, 0, 8),
    (0, 0, 3),
    (1, 1, 1),
    (1, 1, 3),
    (1, 7, 17),
    (2, 3, 16),
    (13, 7, 383),
    (15, 16, 17),
    (16, 17, 385),
    (17, 15, 16),
    (31, 33, 32),
    (32, 32, 64),
    (33, 31, 65),
    (63, 65, 383),
    (64, 64, 1),
    (65, 63, 128),
    (127, 129, 17),
    (128, 128, 3),
    (129, 127, 385),
    (3, 257, 31),
]


def _check(a, b, backend):
    out = rk.cosine_matrix(a, b, backend=backend)
    assert isinstance(out, np.ndarray), f"numpy in must give numpy out, got {type(out)}"
    assert out.dtype == np.float32
    assert out.shape == (a.shape[0], b.shape[0])
    ref = cosine_matrix_ref(a, b)
    assert_close(out, ref, atol=error_bound(naive_cosine_matrix_f32(a, b), ref), name="cosine_matrix")
    return out


@pytest.mark.parametrize("n,m,d", SHAPES, ids=[f"n{n}-m{m}-d{d}" for n, m, d in SHAPES])
def test_random_shapes(backend, rng, n, m, d):
    _check(random_rows(rng, n, d), random_rows(rng, m, d), backend)


def test_hand_computed(backend):
    # a = (3, 4) has norm 5. Against (4, 3): 24/25; the zero row: 0 by definition;
    # (-3, -4): exactly opposite, -1; (1, 0): 3/5.
    a = np.array([[3.0, 4.0]], dtype=np.float32)
    b = np.array([[4.0, 3.0], [0.0, 0.0], [-3.0, -4.0], [1.0, 0.0]], dtype=np.float32)
    out = rk.cosine_matrix(a, b, backend=backend)
    assert_close(out, [[0.96, 0.0, -1.0, 0.6]], atol=1e-6, name="cosine_matrix hand case")
    assert out[0, 1] == 0.0


@pytest.mark.parametrize("d", [1, 3, 17, 383, 385])
def test_zero_rows_are_exactly_zero(backend, rng, d):
    a = random_rows(rng, 37, d, zero_rows=5)
    b = random_rows(rng, 33, d, zero_rows=4)
    # Make sure the edges of a block are zero too.
    a[[0, -1]] = 0.0
    b[[0, -1]] = 0.0
    out = _check(a, b, backend)
    assert not np.isnan(out).any(), "zero rows must give 0, never NaN"
    za = ~a.any(axis=1)
    zb = ~b.any(axis=1)
    assert np.all(out[za, :] == 0.0), "rows of a that are zero must give exactly 0"
    assert np.all(out[:, zb] == 0.0), "rows of b that are zero must give exactly 0"


def test_all_zero_inputs(backend):
    out = rk.cosine_matrix(np.zeros((3, 17), np.float32), np.zeros((4, 17), np.float32), backend=backend)
    assert out.shape == (3, 4) and out.dtype == np.float32
    assert np.all(out == 0.0)


def test_same_input_twice(backend, rng):
    # cos(x, x) = 1 for nonzero rows; the kernel must not be confused by a is b.
    a = random_rows(rng, 33, 65, zero_rows=2)
    out = _check(a, a, backend)
    nonzero = a.any(axis=1)
    tol = error_bound(naive_cosine_matrix_f32(a, a), cosine_matrix_ref(a, a))
    assert_close(np.diag(out)[nonzero], np.ones(nonzero.sum()), atol=tol, name="diagonal")


def test_non_contiguous_inputs(backend, rng):
    base = random_rows(rng, 40, 2 * 33, zero_rows=1)
    a = base[::2, ::2]  # strided in both axes
    b = np.asfortranarray(random_rows(rng, 19, 33))
    assert not a.flags.c_contiguous and not b.flags.c_contiguous
    _check(a, b, backend)
