"""topk_cosine(queries (Q, d), corpus (N, d), k) -> (scores (Q, k) float32, indices (Q, k) int64).

Tie-break (contract): equal scores come out lower corpus index first. Indices are checked
exactly wherever they are well defined (see helpers.check_topk); exact ties are built
from data whose cosines are exact in floating point.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import assert_bitwise_equal, assert_close, check_topk, random_rows

import rrag_kernels as rk
from rrag_kernels.reference import cosine_matrix_ref


def _run(queries, corpus, k, backend):
    scores, indices = rk.topk_cosine(queries, corpus, k, backend=backend)
    assert isinstance(scores, np.ndarray) and isinstance(indices, np.ndarray)
    return scores, indices


HEAVY = pytest.mark.interp_heavy


# (Q, N, d, k): N = 1, odd primes, block-1/block/block+1 for 16/32/64/128/256, k = 1,
# k = N and in between, d off the SIMD widths, Q past a 16-query block.
CASES = [
    (1, 1, 1, 1),
    (2, 3, 3, 1),
    (3, 17, 17, 5),
    pytest.param(5, 31, 16, 31, marks=HEAVY),
    (4, 32, 385, 7),
    (3, 33, 383, 33),
    (17, 33, 17, 4),
    (2, 63, 64, 10),
    pytest.param(2, 64, 3, 64, marks=HEAVY),
    (3, 65, 32, 1),
    (2, 127, 17, 20),
    pytest.param(2, 128, 128, 100, marks=HEAVY),
    (2, 129, 1, 3),
    pytest.param(1, 255, 17, 128, marks=HEAVY),
    pytest.param(1, 257, 17, 256, marks=HEAVY),
    pytest.param(7, 199, 65, 13, marks=HEAVY),
    (2, 300, 17, 280),
    (2, 401, 17, 3),
]


def _case_id(case) -> str:
    q, n, d, k = case.values if hasattr(case, "values") else case
    return f"Q{q}-N{n}-d{d}-k{k}"


@pytest.mark.parametrize("q,n,d,k", CASES, ids=[_case_id(c) for c in CASES])
def test_random(backend, rng, q, n, d, k):
    queries = random_rows(rng, q, d)
    corpus = random_rows(rng, n, d, zero_rows=n // 20)
    scores, indices = _run(queries, corpus, k, backend)
    check_topk(scores, indices, queries, corpus, k, exact_ties=backend != "reference")


@pytest.mark.interp_heavy
@pytest.mark.parametrize("k", [1, 10, 129, 1000, "N"])
def test_large_corpus(backend, rng, k, interpreted):
    # Big enough for the kernels to tile the corpus and merge partial top-k lists. The
    # interpreter runs 4 stage-1 programs whatever N, so 2011 rows give it several tiles per
    # program, the merge and the large-k path as 20011 do on a GPU, at a tenth of the time.
    n = 2011 if interpreted else 20011
    k = n if k == "N" else k
    queries = random_rows(rng, 5, 64)
    corpus = random_rows(rng, n, 64, zero_rows=3)
    scores, indices = _run(queries, corpus, k, backend)
    check_topk(scores, indices, queries, corpus, k, exact_ties=backend != "reference")


def _grouped_corpus(rng, n, d, groups, q):
    """A corpus whose rows are exact copies of ``groups`` distinct vectors, and queries
    whose cosines with the groups are far apart (>= ~0.1).

    Group g is the g-th column of a random orthogonal matrix R scaled by a random factor;
    query j is R @ a_j with a_j a random permutation of linspace(-1, 1, groups) plus a
    small component along the remaining columns, so cos(query_j, group g) ~ a_j[g] / |a_j|.
    """
    r, _ = np.linalg.qr(rng.standard_normal((d, d)))
    vectors = (r[:, :groups].T * 10.0 ** rng.uniform(-1, 1, size=(groups, 1))).astype(np.float32)
    coeff = np.stack([rng.permutation(np.linspace(-1.0, 1.0, groups)) for _ in range(q)])
    queries = coeff @ r[:, :groups].T + 0.05 * rng.standard_normal((q, d - groups)) @ r[:, groups:].T
    group_of_row = rng.integers(groups, size=n)
    return queries.astype(np.float32), vectors[group_of_row], vectors, group_of_row


@pytest.mark.parametrize("n,k", [(2, 2), (33, 33), (65, 7), (129, 16),
                                 pytest.param(129, 64, marks=HEAVY), pytest.param(200, 200, marks=HEAVY),
                                 pytest.param(3001, 300, marks=HEAVY), pytest.param(3001, 3001, marks=HEAVY)])
@pytest.mark.bitwise_ties
def test_duplicate_rows_tie_exactly_in_index_order(backend, rng, n, k):
    groups, d = 9, 17
    queries, corpus, vectors, group_of_row = _grouped_corpus(rng, n, d, groups, q=4)
    # The expected ranking follows from the structure: by group score (the reference's
    # cosine with each distinct vector), then by index. It is well defined only if the
    # group scores are far apart, which the construction guarantees; check that it did.
    group_scores = cosine_matrix_ref(queries, vectors)  # (Q, groups)
    gaps = np.diff(np.sort(group_scores, axis=1), axis=1)
    assert gaps.min() > 1e-2, f"test data: group scores too close ({gaps.min():.3g})"
    scores, indices = _run(queries, corpus, k, backend)
    for qi in range(queries.shape[0]):
        expected = np.lexsort((np.arange(n), -group_scores[qi, group_of_row]))[:k]
        assert np.array_equal(indices[qi], expected), (
            f"query {qi}: got {indices[qi][:20]}..., expected {expected[:20]}..."
        )
        # Identical rows must get bitwise identical scores wherever they land in the
        # kernel's blocks.
        g = group_of_row[indices[qi]]
        for grp in np.unique(g):
            same = scores[qi, g == grp]
            assert_bitwise_equal(same, np.full_like(same, same[0]), name=f"query {qi} group {grp} scores")
    check_topk(scores, indices, queries, corpus, k)


def _basis_corpus(rng, n, d):
    """Rows are 0, or +-2**s e_i: every cosine against the queries below is exact in
    float32 (powers of two scale exactly), so ties are real ties for every backend."""
    rows = np.zeros((n, d), np.float32)
    axis = rng.integers(d, size=n)
    sign = rng.choice([-1.0, 1.0], size=n)
    scale = 2.0 ** rng.integers(-3, 4, size=n)
    rows[np.arange(n), axis] = sign * scale
    rows[rng.random(n) < 0.2] = 0.0
    return rows


EXACT_TIE_CASES = [
    (1, 1), (16, 16), (17, 5), (17, 17), (64, 21), (129, 1), (129, 9),
    pytest.param(65, 65, marks=HEAVY), pytest.param(128, 42, marks=HEAVY),
    pytest.param(129, 129, marks=HEAVY), pytest.param(4099, 1, marks=HEAVY),
    pytest.param(4099, 1365, marks=HEAVY), pytest.param(4099, 4099, marks=HEAVY),
]


@pytest.mark.parametrize("n,k", EXACT_TIE_CASES)
def test_exact_ties_from_orthogonal_and_identical_vectors(backend, rng, n, k):
    d = 17
    corpus = _basis_corpus(rng, n, d)
    e = np.eye(d, dtype=np.float32)
    queries = np.stack([
        e[0],                     # scores 1 (rows on +e_0), -1, and 0 for everything else
        e[0] + e[1],              # 1/sqrt(2) for +e_0 and +e_1 rows
        -4.0 * e[3],              # scaled query
        np.zeros(d, np.float32),  # zero query: every score is exactly 0
        e[16] - e[2],             # the tail lane of a 16-wide SIMD loop
    ]).astype(np.float32)
    ref = cosine_matrix_ref(queries, corpus)
    scores, indices = _run(queries, corpus, k, backend)
    for qi in range(queries.shape[0]):
        expected = np.lexsort((np.arange(n), -ref[qi]))[:k]
        assert np.array_equal(indices[qi], expected), (
            f"query {qi}: got {indices[qi][:20]}, expected {expected[:20]}"
        )
    assert np.all(scores[3] == 0.0), "a zero query scores exactly 0 against everything"
    assert np.array_equal(indices[3], np.arange(k)), "an all-tied row must be 0..k-1"
    check_topk(scores, indices, queries, corpus, k)


def test_zero_corpus(backend):
    corpus = np.zeros((37, 9), np.float32)
    queries = np.ones((2, 9), np.float32)
    scores, indices = _run(queries, corpus, 5, backend)
    assert np.all(scores == 0.0) and not np.isnan(scores).any()
    assert np.array_equal(indices, np.tile(np.arange(5), (2, 1)))


def test_k_equals_n_is_a_full_argsort(backend, rng):
    queries = random_rows(rng, 3, 33)
    corpus = random_rows(rng, 47, 33)
    scores, indices = _run(queries, corpus, 47, backend)
    assert np.array_equal(np.sort(indices, axis=1), np.tile(np.arange(47), (3, 1)))
    check_topk(scores, indices, queries, corpus, 47, exact_ties=backend != "reference")


def test_no_queries(backend, rng):
    scores, indices = _run(np.zeros((0, 17), np.float32), random_rows(rng, 10, 17), 3, backend)
    assert scores.shape == (0, 3) and indices.shape == (0, 3)
    assert scores.dtype == np.float32 and indices.dtype == np.int64


def test_hand_computed(backend):
    # Query (1, 0) against (0, 1) -> 0, (2, 0) -> 1, (-1, 0) -> -1, (1, 1) -> 1/sqrt(2),
    # (0, -3) -> 0. Top 4: index 1 (1), 3 (0.707), then the tie at 0 by index: 0, 4.
    corpus = np.array([[0, 1], [2, 0], [-1, 0], [1, 1], [0, -3]], np.float32)
    scores, indices = _run(np.array([[1, 0]], np.float32), corpus, 4, backend)
    assert indices.tolist() == [[1, 3, 0, 4]]
    assert_close(scores, [[1.0, 2**-0.5, 0.0, 0.0]], atol=1e-6, name="hand case")
