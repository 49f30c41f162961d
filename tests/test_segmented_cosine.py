"""segmented_cosine(queries (Q, d), docs (D, d), doc_offsets (Q+1,)) -> (D,) float32."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import (
    assert_close,
    error_bound,
    naive_segmented_cosine_f32,
    offsets_from_counts,
    random_counts,
    random_rows,
)

import rrag_kernels as rk
from rrag_kernels.reference import segmented_cosine_ref


def _check(queries, docs, offsets, backend):
    out = rk.segmented_cosine(queries, docs, offsets, backend=backend)
    assert isinstance(out, np.ndarray), f"numpy in must give numpy out, got {type(out)}"
    assert out.dtype == np.float32
    assert out.shape == (docs.shape[0],)
    ref = segmented_cosine_ref(queries, docs, offsets)
    tol = error_bound(naive_segmented_cosine_f32(queries, docs, offsets), ref)
    assert_close(out, ref, atol=tol, name="segmented_cosine")
    return out


# (Q, max docs per query, d)
CASES = [
    (1, 1, 1),
    (1, 5, 3),
    (2, 3, 17),
    (7, 16, 16),
    (13, 33, 383),
    (17, 8, 385),
    (31, 20, 64),
    (64, 4, 128),
    (129, 3, 32),
]


@pytest.mark.parametrize("q,max_docs,d", CASES, ids=[f"Q{q}-max{m}-d{d}" for q, m, d in CASES])
def test_random_ragged(backend, rng, q, max_docs, d):
    counts = random_counts(rng, q, max_count=max_docs, empty_frac=0.3)
    offsets = offsets_from_counts(counts)
    queries = random_rows(rng, q, d)
    docs = random_rows(rng, int(offsets[-1]), d)
    _check(queries, docs, offsets, backend)


def test_segment_sizes_at_block_edges(backend, rng):
    counts = [1, 15, 16, 17, 0, 31, 32, 33, 0, 0, 63, 64, 65, 127, 128, 129]
    offsets = offsets_from_counts(counts)
    queries = random_rows(rng, len(counts), 17)
    docs = random_rows(rng, int(offsets[-1]), 17)
    _check(queries, docs, offsets, backend)


@pytest.mark.parametrize("where", ["first", "middle", "last"])
def test_one_huge_segment_among_empty_ones(backend, rng, max_rows, where):
    q = 257
    counts = np.zeros(q, dtype=np.int64)
    pos = {"first": 0, "middle": q // 2, "last": q - 1}[where]
    counts[pos] = min(5003, max_rows)
    offsets = offsets_from_counts(counts)
    queries = random_rows(rng, q, 65)
    docs = random_rows(rng, int(offsets[-1]), 65)
    _check(queries, docs, offsets, backend)


def test_all_segments_empty(backend, rng):
    out = rk.segmented_cosine(random_rows(rng, 5, 17), np.zeros((0, 17), np.float32),
                              np.zeros(6, dtype=np.int64), backend=backend)
    assert out.shape == (0,) and out.dtype == np.float32


def test_no_queries(backend):
    out = rk.segmented_cosine(np.zeros((0, 9), np.float32), np.zeros((0, 9), np.float32),
                              np.zeros(1, dtype=np.int64), backend=backend)
    assert out.shape == (0,) and out.dtype == np.float32


def test_zero_vectors_are_exactly_zero(backend, rng):
    q, d = 11, 383
    counts = random_counts(rng, q, max_count=9, empty_frac=0.2)
    counts[[0, 3]] = 4  # two queries that will be zero vectors but own docs
    offsets = offsets_from_counts(counts)
    queries = random_rows(rng, q, d)
    queries[[0, 3]] = 0.0
    docs = random_rows(rng, int(offsets[-1]), d, zero_rows=5)
    out = _check(queries, docs, offsets, backend)
    assert not np.isnan(out).any()
    owner = np.repeat(np.arange(q), counts)
    zero = ~docs.any(axis=1) | ~queries[owner].any(axis=1)
    assert zero.any()
    assert np.all(out[zero] == 0.0), "a zero query or doc must give exactly 0"


def test_hand_computed(backend):
    # Query 0 = (1, 0) owns docs (1, 1) -> 1/sqrt(2) and (-2, 0) -> -1; query 1 = (0, 2)
    # owns nothing; query 2 = (0, 2) owns (0, 5) -> 1.
    queries = np.array([[1.0, 0.0], [0.0, 2.0], [0.0, 2.0]], np.float32)
    docs = np.array([[1.0, 1.0], [-2.0, 0.0], [0.0, 5.0]], np.float32)
    out = rk.segmented_cosine(queries, docs, np.array([0, 2, 2, 3], np.int64), backend=backend)
    assert_close(out, [2**-0.5, -1.0, 1.0], atol=1e-6, name="segmented_cosine hand case")


def test_rows_of_any_magnitude(backend, rng):
    # Row scales from 1e-15 to 1e15 (the squared norms stay in float32's range, which the
    # checks require: ops docs): the cosine does not depend on them.
    counts = random_counts(rng, 9, max_count=6, empty_frac=0.2)
    offsets = offsets_from_counts(counts)
    queries = (rng.standard_normal((9, 33)) * 10.0 ** rng.uniform(-15, 15, (9, 1))).astype(np.float32)
    docs = (rng.standard_normal((int(offsets[-1]), 33)) * 10.0 ** rng.uniform(-15, 15, (int(offsets[-1]), 1)))
    _check(queries, docs.astype(np.float32), offsets, backend)
