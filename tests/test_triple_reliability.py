"""triple_reliability(query_emb (B, d), triple_emb (T, d), credibility (T,), alpha, used (B, T), k)
and triple_reliability_segmented(..., triple_offsets (Q + 1,), chain_question (B,), used ragged)
-> (scores (B, k) float32, indices (B, k) int64), R = alpha cos(q, t) + (1 - alpha) c(t) / 10.

Contract: per chain its unused triples by R descending, equal R by lower triple index first,
then index -1 / score -inf. Indices are compared exactly wherever the float64 reference's gaps
exceed twice the tolerance earned from a naive float32 computation (helpers.check_reliability);
exact ties are built from identical triples with equal credibility, from exact cosines
(alpha = 1) and from integer credibilities (alpha = 0).

The C++ tiling these sizes aim at: a task is up to 60 chains of one question (64 at the scalar
SIMD level; a question with more chains takes the packed GEMM with shared triple norms, fewer
take dot_tile), triples stream in blocks of 256, the guessed-threshold path serves questions
of one block and k <= 32.
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from helpers import (
    assert_bitwise_equal,
    check_reliability,
    offsets_from_counts,
    random_counts,
    random_rows,
)

import rrag_kernels as rk
from rrag_kernels.reference import (
    cosine_matrix_ref,
    triple_reliability_ref,
    triple_reliability_segmented_ref,
)

HEAVY = pytest.mark.interp_heavy
ALPHA = 0.4


def _single(rng, b, t, d, *, zero_rows=0):
    q = random_rows(rng, b, d, zero_rows=min(1, b))
    return q, random_rows(rng, t, d, zero_rows=zero_rows), rng.uniform(0, 10, t)


def _mask(rng, shape, kind):
    if kind == "none":
        return None
    if kind == "all":
        return np.ones(shape, dtype=bool)
    return rng.random(shape) < 0.3


def _run(backend, q, t, c, **kw):
    scores, indices = rk.triple_reliability(q, t, c, backend=backend, **kw)
    assert isinstance(scores, np.ndarray) and isinstance(indices, np.ndarray)
    return scores, indices


def _run_segmented(backend, q, t, c, off, cq, **kw):
    scores, indices = rk.triple_reliability_segmented(q, t, c, off, cq, backend=backend, **kw)
    assert isinstance(scores, np.ndarray) and isinstance(indices, np.ndarray)
    return scores, indices


def _check_single(out, q, t, c, *, alpha=ALPHA, used=None, k, backend):
    ref = triple_reliability_ref(q, t, c, alpha=alpha, used=used, k=max(t.shape[0], 1))
    return check_reliability(*out, ref, q, t, c, alpha, k, exact_ties=backend != "reference")


def _check_segmented(out, q, t, c, off, cq, *, alpha=ALPHA, used=None, k, backend):
    full = max(int(np.diff(off).max(initial=0)), 1)
    ref = triple_reliability_segmented_ref(q, t, c, off, cq, alpha=alpha, used=used, k=full)
    return check_reliability(*out, ref, q, t, c, alpha, k, exact_ties=backend != "reference")


# --------------------------------------------------------------------------- single form

# (B, T, d, k): B = 0, 1, odd, 59/60/61 and 63/64/65 (a task's chains); T = 0, 1, odd primes,
# 255/256/257 (the triple block); d = 1, odd, 384; k = 1, k = T, k > T (padding), k past the
# guessed path.
CASES = [
    (1, 1, 1, 1),
    (0, 5, 3, 2),       # no chains
    (3, 0, 4, 2),       # no triples: all padding
    (2, 3, 3, 1),
    (5, 17, 17, 5),
    (3, 31, 385, 31),   # k = T
    (7, 13, 384, 20),   # k > T: padding
    (11, 101, 7, 40),   # k past the guessed-threshold path
    (59, 255, 33, 20),  # block - 1
    (60, 256, 17, 20),  # block: one task of 60 chains (dot_tile), one block of 256 triples
    (61, 257, 17, 7),   # block + 1: two tasks sharing packed triples, two blocks
    (63, 129, 9, 5),
    (64, 64, 17, 64),   # one task at the scalar level, two (packed GEMM) at the others
    (65, 200, 31, 20),
    (3, 257, 9, 257),
    (2, 300, 16, 400),
    pytest.param(129, 199, 65, 13, marks=HEAVY),
    pytest.param(130, 513, 33, 600, marks=HEAVY),
    pytest.param(200, 61, 384, 33, marks=HEAVY),
]


def _case_id(case) -> str:
    b, t, d, k = case.values if hasattr(case, "values") else case
    return f"B{b}-T{t}-d{d}-k{k}"


@pytest.mark.parametrize("mask", ["none", "random"])
@pytest.mark.parametrize("b,t,d,k", CASES, ids=[_case_id(c) for c in CASES])
def test_random(backend, rng, b, t, d, k, mask):
    q, triples, c = _single(rng, b, t, d, zero_rows=t // 20)
    used = _mask(rng, (b, t), mask)
    out = _run(backend, q, triples, c, used=used, k=k)
    _check_single(out, q, triples, c, used=used, k=k, backend=backend)


@pytest.mark.parametrize("k", [1, 20, 300])
def test_every_triple_used_gives_padding(backend, rng, k):
    q, triples, c = _single(rng, 5, 40, 9)
    scores, indices = _run(backend, q, triples, c, used=np.ones((5, 40), dtype=bool), k=k)
    assert scores.shape == indices.shape == (5, k)
    assert np.all(indices == -1) and np.all(scores == -np.inf)


def test_used_triples_never_return(backend, rng):
    # Chain b has used every triple but b: k = 3 returns b, then padding.
    q, triples, c = _single(rng, 6, 6, 5)
    used = ~np.eye(6, dtype=bool)
    scores, indices = _run(backend, q, triples, c, used=used, k=3)
    assert indices.tolist() == [[b, -1, -1] for b in range(6)]
    assert np.all(np.isfinite(scores[:, 0])) and np.all(scores[:, 1:] == -np.inf)


def test_defaults_are_alpha_04_and_k_20(backend, rng):
    q, triples, c = _single(rng, 4, 50, 16)
    scores, indices = _run(backend, q, triples, c)
    assert scores.shape == (4, 20)
    _check_single((scores, indices), q, triples, c, alpha=0.4, k=20, backend=backend)


def test_hand_computed(backend):
    # q = (1, 0). Triples (2, 0) cos 1, (0, 1) cos 0, (-1, 0) cos -1, (0, 0) zero vector: cos 0.
    # alpha = 0.5: R = 0.5 cos + 0.05 c with c = (0, 10, 10, 4): 0.5, 0.5, 0, 0.2. Tie 0.5: index 0 first.
    q = np.array([[1, 0]], np.float32)
    triples = np.array([[2, 0], [0, 1], [-1, 0], [0, 0]], np.float32)
    scores, indices = _run(backend, q, triples, np.array([0, 10, 10, 4]), alpha=0.5, k=5)
    assert indices.tolist() == [[0, 1, 3, 2, -1]]
    np.testing.assert_allclose(scores[0, :4], [0.5, 0.5, 0.2, 0.0], atol=1e-7)
    assert scores[0, 4] == -np.inf


# --------------------------------------------------------------------------- exact ties


def _grouped_triples(rng, n, d, groups, b):
    """Triples that are exact copies of `groups` distinct vectors, each group with its own
    credibility, and chains whose reliabilities for the groups are far apart.

    Group g is the g-th column of a random orthogonal matrix (random scale); chain j is
    R @ a_j with a_j a permutation of linspace(-1, 1, groups) (plus a small orthogonal part),
    so cos(chain j, group g) ~ a_j[g] / |a_j|: distinct groups differ by >~ 0.1 in cosine.
    """
    r, _ = np.linalg.qr(rng.standard_normal((d, d)))
    vectors = (r[:, :groups].T * 10.0 ** rng.uniform(-1, 1, size=(groups, 1))).astype(np.float32)
    coeff = np.stack([rng.permutation(np.linspace(-1.0, 1.0, groups)) for _ in range(b)])
    chains = coeff @ r[:, :groups].T + 0.05 * rng.standard_normal((b, d - groups)) @ r[:, groups:].T
    # Credibilities 4..5 move R by < 0.03: the groups' order stays the cosine's (gaps >~ 0.06).
    group_cred = rng.uniform(4, 5, groups)
    group_of_row = rng.integers(groups, size=n)
    return (chains.astype(np.float32), vectors[group_of_row], group_cred[group_of_row], vectors, group_cred,
            group_of_row)


@pytest.mark.parametrize("n,k", [(2, 2), (33, 33), (65, 7), (129, 16), (257, 40),
                                 pytest.param(300, 300, marks=HEAVY), pytest.param(1001, 64, marks=HEAVY)])
@pytest.mark.bitwise_ties
def test_identical_triples_tie_exactly_in_index_order(backend, rng, n, k):
    groups, d, b = 9, 17, 5
    alpha = 0.7  # the cosine term dominates: group reliabilities >~ 0.07 apart
    q, triples, c, vectors, group_cred, group_of_row = _grouped_triples(rng, n, d, groups, b)
    used = rng.random((b, n)) < 0.25
    # Reliability of each group from the reference on the distinct vectors (all ranked).
    gs, gi = triple_reliability_ref(q, vectors, group_cred, alpha=alpha, k=groups)
    group_score = np.empty((b, groups))
    np.put_along_axis(group_score, gi, gs, axis=1)
    gaps = np.diff(np.sort(group_score, axis=1), axis=1)
    assert gaps.min() > 1e-2, f"test data: group reliabilities too close ({gaps.min():.3g})"
    scores, indices = _run(backend, q, triples, c, alpha=alpha, used=used, k=k)
    for j in range(b):
        available = np.flatnonzero(~used[j])
        expected = available[np.lexsort((available, -group_score[j, group_of_row[available]]))][:k]
        got = indices[j, : len(expected)]
        assert np.array_equal(got, expected), f"chain {j}: got {got[:20]}, expected {expected[:20]}"
        assert np.all(indices[j, len(expected):] == -1)
        # Identical triples get bitwise identical scores wherever they land in the kernel's tiles.
        g = group_of_row[got]
        for grp in np.unique(g):
            same = scores[j, : len(expected)][g == grp]
            assert_bitwise_equal(same, np.full_like(same, same[0]), name=f"chain {j} group {grp} scores")
    _check_single((scores, indices), q, triples, c, alpha=alpha, used=used, k=k, backend=backend)


@pytest.mark.parametrize("n,k", [(1, 1), (17, 5), (64, 21), (129, 129), (300, 33),
                                 pytest.param(4099, 100, marks=HEAVY)])
def test_alpha_zero_ranks_by_credibility_with_exact_ties(backend, rng, n, k):
    # R = c / 10 exactly (the same float32 in every backend); integer credibilities tie often.
    q, triples, _ = _single(rng, 6, n, 9, zero_rows=2)
    c = rng.integers(0, 11, size=n)
    used = rng.random((6, n)) < 0.2
    scores, indices = _run(backend, q, triples, c, alpha=0.0, used=used, k=k)
    for j in range(6):
        available = np.flatnonzero(~used[j])
        expected = available[np.lexsort((available, -c[available]))][:k]
        assert np.array_equal(indices[j, : len(expected)], expected), f"chain {j}"
        assert_bitwise_equal(scores[j, : len(expected)], (c[expected] / 10.0).astype(np.float32),
                             name=f"chain {j} scores")
        assert np.all(indices[j, len(expected):] == -1) and np.all(scores[j, len(expected):] == -np.inf)


def _basis_triples(rng, n, d):
    """Rows are 0 or +-2**s e_i: every cosine with the chains below is exact in float32."""
    rows = np.zeros((n, d), np.float32)
    axis, sign = rng.integers(d, size=n), rng.choice([-1.0, 1.0], size=n)
    rows[np.arange(n), axis] = sign * 2.0 ** rng.integers(-3, 4, size=n)
    rows[rng.random(n) < 0.2] = 0.0
    return rows


@pytest.mark.parametrize("n,k", [(1, 1), (17, 17), (65, 30), (129, 9), (257, 257)])
def test_alpha_one_ranks_by_cosine_with_exact_ties(backend, rng, n, k):
    d = 17
    triples = _basis_triples(rng, n, d)
    e = np.eye(d, dtype=np.float32)
    q = np.stack([e[0], e[0] + e[1], -4.0 * e[3], np.zeros(d, np.float32), e[16] - e[2]]).astype(np.float32)
    c = rng.uniform(0, 10, n)  # ignored at alpha = 1
    cos = cosine_matrix_ref(q, triples)
    scores, indices = _run(backend, q, triples, c, alpha=1.0, k=k)
    for j in range(q.shape[0]):
        expected = np.lexsort((np.arange(n), -cos[j]))[:k]
        assert np.array_equal(indices[j, :n], expected[:n]), (
            f"chain {j}: got {indices[j][:20]}, expected {expected[:20]}")
    assert np.all(scores[3, :n] == 0.0) and np.array_equal(indices[3, :n], np.arange(min(k, n))), \
        "a zero chain scores 0 against everything, so its row is 0 .. k-1"
    _check_single((scores, indices), q, triples, c, alpha=1.0, k=k, backend=backend)


@pytest.mark.parametrize("alpha", [0.0, 1.0])
def test_alpha_extremes_random(backend, rng, alpha):
    q, triples, c = _single(rng, 9, 67, 33, zero_rows=2)
    used = rng.random((9, 67)) < 0.3
    out = _run(backend, q, triples, c, alpha=alpha, used=used, k=12)
    _check_single(out, q, triples, c, alpha=alpha, used=used, k=12, backend=backend)


# --------------------------------------------------------------------------- segmented form


def _segmented(rng, n_questions, chains, d, *, max_count, empty_frac=0.3):
    counts = random_counts(rng, n_questions, max_count=max_count, empty_frac=empty_frac)
    off = offsets_from_counts(counts)
    q = random_rows(rng, chains, d, zero_rows=1)
    triples = random_rows(rng, int(off[-1]), d, zero_rows=int(off[-1]) // 20)
    c = rng.uniform(0, 10, int(off[-1]))
    cq = rng.integers(0, n_questions, size=chains).astype(np.int64) if n_questions else np.zeros(0, np.int64)
    return q, triples, c, off, cq


def _ragged_mask(rng, off, cq, kind):
    total = int(np.diff(off)[cq].sum())
    return _mask(rng, (total,), kind)


# (Q questions, B chains, d, max triples per question, k)
SEG_CASES = [
    (1, 1, 1, 1, 1),
    (3, 0, 5, 4, 2),
    (7, 13, 17, 9, 3),
    (5, 40, 33, 40, 20),
    (4, 31, 9, 260, 7),
    (2, 150, 17, 70, 40),
    (17, 60, 384, 20, 25),
    pytest.param(31, 101, 65, 300, 33, marks=HEAVY),
]


@pytest.mark.parametrize("mask", ["none", "random", "all"])
@pytest.mark.parametrize("nq,b,d,max_count,k", SEG_CASES, ids=[f"Q{c[0]}-B{c[1]}-d{c[2]}-n{c[3]}-k{c[4]}"
                                                              if not hasattr(c, "values") else
                                                              "Q{}-B{}-d{}-n{}-k{}".format(*c.values)
                                                              for c in SEG_CASES])
def test_segmented_random(backend, rng, nq, b, d, max_count, k, mask):
    q, triples, c, off, cq = _segmented(rng, nq, b, d, max_count=max_count)
    used = _ragged_mask(rng, off, cq, mask)
    out = _run_segmented(backend, q, triples, c, off, cq, used=used, k=k)
    _check_segmented(out, q, triples, c, off, cq, used=used, k=k, backend=backend)
    # Indices are global rows of the chain's own question.
    for j in range(b):
        got = out[1][j][out[1][j] >= 0]
        assert np.all((got >= off[cq[j]]) & (got < off[cq[j] + 1])), f"chain {j}: rows outside its question"
    if mask == "all":
        assert np.all(out[1] == -1) and np.all(out[0] == -np.inf)


def test_segmented_empty_questions_and_no_questions(backend, rng):
    d = 5
    q = random_rows(rng, 4, d)
    # Every question empty: all padding.
    off = np.zeros(4, dtype=np.int64)
    scores, indices = _run_segmented(backend, q, np.zeros((0, d), np.float32), np.zeros(0), off,
                                     np.array([0, 2, 1, 2]), k=3)
    assert np.all(indices == -1) and np.all(scores == -np.inf) and scores.shape == (4, 3)
    # No questions and no chains.
    scores, indices = _run_segmented(backend, q[:0], np.zeros((0, d), np.float32), np.zeros(0),
                                     np.zeros(1, np.int64), np.zeros(0, np.int64), k=2)
    assert scores.shape == indices.shape == (0, 2)


@pytest.mark.parametrize("huge", [257, pytest.param(3001, marks=HEAVY)])
def test_one_huge_question_among_many_empty(backend, rng, huge):
    counts = np.zeros(50, dtype=np.int64)
    counts[23] = huge
    off = offsets_from_counts(counts)
    d = 17
    triples = random_rows(rng, huge, d, zero_rows=3)
    c = rng.uniform(0, 10, huge)
    cq = np.array([23, 0, 23, 49, 23, 7, 23], dtype=np.int64)
    q = random_rows(rng, len(cq), d)
    used = _ragged_mask(rng, off, cq, "random")
    for k in (1, 20, huge + 5):
        out = _run_segmented(backend, q, triples, c, off, cq, used=used, k=k)
        _check_segmented(out, q, triples, c, off, cq, used=used, k=k, backend=backend)
        assert np.all(out[1][[1, 3, 5]] == -1), "chains of empty questions get padding only"


def test_single_form_is_the_segmented_form_with_one_question(backend, rng):
    q, triples, c = _single(rng, 70, 45, 19)
    used = rng.random((70, 45)) < 0.3
    single = _run(backend, q, triples, c, used=used, k=9)
    seg = _run_segmented(backend, q, triples, c, np.array([0, 45]), np.zeros(70, np.int64),
                         used=used.reshape(-1), k=9)
    assert_bitwise_equal(single[0], seg[0], name="scores")
    assert_bitwise_equal(single[1], seg[1], name="indices")


def test_segmented_ragged_used_layout(backend, rng):
    # Two chains of one question and one of another, listed out of question order: each chain
    # has its own slice of `used`, in chain order, indexed by local triple position.
    d = 7
    off = np.array([0, 3, 5], dtype=np.int64)  # question 0: rows 0-2, question 1: rows 3-4
    triples = random_rows(rng, 5, d)
    q = random_rows(rng, 3, d)
    cq = np.array([1, 0, 0], dtype=np.int64)
    used = np.array([True, False,          # chain 0 (question 1): row 3 used
                     False, True, True,    # chain 1 (question 0): rows 1, 2 used
                     True, True, False])   # chain 2 (question 0): rows 0, 1 used
    scores, indices = _run_segmented(backend, q, triples, np.full(5, 5.0), off, cq, used=used, k=3)
    assert indices.tolist() == [[4, -1, -1], [0, -1, -1], [2, -1, -1]]


# --------------------------------------------------------------------------- inputs and outputs


def test_torch_cpu_tensors_in_torch_out(backend, rng, torch):
    q, triples, c = _single(rng, 9, 23, 11)
    used = rng.random((9, 23)) < 0.3
    scores, indices = rk.triple_reliability(torch.from_numpy(q), torch.from_numpy(triples), torch.from_numpy(c),
                                            used=torch.from_numpy(used), k=6, backend=backend)
    assert isinstance(scores, torch.Tensor) and isinstance(indices, torch.Tensor)
    assert scores.dtype == torch.float32 and indices.dtype == torch.int64 and scores.device.type == "cpu"
    _check_single((scores.numpy(), indices.numpy()), q, triples, c, used=used, k=6, backend=backend)
    q2, t2, c2, off, cq = _segmented(rng, 5, 12, 11, max_count=9)
    scores, indices = rk.triple_reliability_segmented(
        torch.from_numpy(q2), torch.from_numpy(t2), c2, torch.from_numpy(off), torch.from_numpy(cq), k=4,
        backend=backend)
    assert isinstance(scores, torch.Tensor) and isinstance(indices, torch.Tensor)
    _check_segmented((scores.numpy(), indices.numpy()), q2, t2, c2, off, cq, k=4, backend=backend)


@pytest.mark.parametrize("dtype", [np.float16, np.float64], ids=["float16", "float64"])
def test_float16_and_float64_inputs(backend, rng, dtype):
    q, triples, c = _single(rng, 7, 29, 13)
    q, triples = q.astype(dtype), triples.astype(dtype)
    out = _run(backend, q, triples, c.astype(np.float32), k=5)
    # The kernel ranks the float32-converted embeddings; so does the reference here.
    _check_single(out, q.astype(np.float32), triples.astype(np.float32), c.astype(np.float32), k=5,
                  backend=backend)


def test_non_contiguous_inputs(backend, rng):
    q, triples, c = _single(rng, 14, 60, 22)
    used = rng.random((60, 14)) < 0.3  # transposed below: a non-contiguous (14, 60) view
    q_view, t_view, c_view = q[::2, ::2], triples[::2, ::2], c[::2]
    out = _run(backend, q_view, t_view, c_view, used=used.T[::2, ::2], k=6)
    _check_single(out, np.ascontiguousarray(q_view), np.ascontiguousarray(t_view), c_view,
                  used=used.T[::2, ::2], k=6, backend=backend)


def test_pickled_and_list_inputs(backend, rng):
    q, triples, c = _single(rng, 5, 19, 7)
    used = rng.random((5, 19)) < 0.3
    expected = _run(backend, q, triples, c, used=used, k=4)
    roundtrip = [pickle.loads(pickle.dumps(x)) for x in (q, triples, c, used)]
    got = _run(backend, *roundtrip[:3], used=roundtrip[3], k=4)
    assert_bitwise_equal(got[0], expected[0], name="scores")
    assert_bitwise_equal(got[1], expected[1], name="indices")
    got = _run(backend, q, triples, c.tolist(), used=used.tolist(), k=4)
    assert_bitwise_equal(got[1], expected[1], name="indices from lists")


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # NaN arithmetic is the point
def test_check_finite_false_leaves_other_chains_alone(backend, rng):
    q, triples, c = _single(rng, 4, 30, 9)
    q[1, 2] = np.nan
    scores, indices = _run(backend, q, triples, c, k=5, check_finite=False)
    assert scores.shape == indices.shape == (4, 5)
    ok = [0, 2, 3]
    _check_single((scores[ok], indices[ok]), q[ok], triples, c, k=5, backend=backend)
    assert np.all((indices[1] >= -1) & (indices[1] < 30)), "the NaN chain's indices stay in range"


@pytest.mark.parametrize("arg", ["query_emb", "triple_emb"])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf], ids=["nan", "inf", "-inf"])
def test_non_finite_embeddings_raise(backend, rng, arg, bad):
    q, triples, c = _single(rng, 4, 30, 9)
    x = {"query_emb": q, "triple_emb": triples}[arg]
    x[x.shape[0] // 2, 3] = bad
    with pytest.raises(ValueError, match=rf"^{arg}:"):
        _run(backend, q, triples, c)
    off, cq = np.array([0, 10, 30]), np.array([0, 1, 1, 0])
    with pytest.raises(ValueError, match=rf"^{arg}:"):
        _run_segmented(backend, q, triples, c, off, cq)


def test_non_finite_triple_of_a_question_without_chains_raises(backend, rng):
    q, triples, c = _single(rng, 3, 30, 9)
    triples[25, 0] = np.nan  # question 1 (rows 10..29) has no chain
    with pytest.raises(ValueError, match=r"^triple_emb:"):
        _run_segmented(backend, q, triples, c, np.array([0, 10, 30]), np.zeros(3, np.int64))


# --------------------------------------------------------------------------- bad arguments


def _valid(rng):
    q, triples, c = _single(rng, 3, 6, 5)
    return {"query_emb": q, "triple_emb": triples, "credibility": c}


def _valid_segmented(rng):
    kw = _valid(rng)
    kw["triple_offsets"] = np.array([0, 2, 2, 6], np.int64)
    kw["chain_question"] = np.array([2, 0, 2], np.int64)
    return kw  # used: 4 + 2 + 4 = 10 entries


def _call(form, kw, backend):
    fn = rk.triple_reliability if form == "single" else rk.triple_reliability_segmented
    return fn(**{"backend": backend, **kw})  # a "backend" in kw (the bad-argument case) wins


BAD = [
    # (argument, value, error)
    ("query_emb", "abc", TypeError),
    ("query_emb", np.ones((3, 5), np.int64), TypeError),
    ("query_emb", np.ones(5, np.float32), ValueError),
    ("query_emb", np.ones((3, 5, 1), np.float32), ValueError),
    ("triple_emb", np.ones((6, 4), np.float32), ValueError),  # d mismatch
    ("triple_emb", None, TypeError),
    ("credibility", np.full(5, 1.0), ValueError),
    ("credibility", np.full((6, 1), 1.0), ValueError),
    ("credibility", np.ones(6, bool), TypeError),
    ("credibility", "abc", TypeError),
    ("credibility", np.array([1, 2, 3, np.nan, 5, 6.0]), ValueError),
    ("credibility", np.array([1, 2, 3, np.inf, 5, 6.0]), ValueError),
    ("credibility", np.array([1, 2, 3, -0.5, 5, 6.0]), ValueError),
    ("credibility", np.array([1, 2, 3, 10.5, 5, 6.0]), ValueError),
    ("alpha", -0.1, ValueError),
    ("alpha", 1.5, ValueError),
    ("alpha", float("nan"), ValueError),
    ("alpha", "0.4", TypeError),
    ("alpha", None, TypeError),
    ("alpha", True, TypeError),
    ("k", 0, ValueError),
    ("k", -3, ValueError),
    ("k", 2.0, TypeError),
    ("k", "3", TypeError),
    ("k", None, TypeError),
    ("check_finite", 1, TypeError),
    ("backend", "fortran", ValueError),
]


@pytest.mark.parametrize("form", ["single", "segmented"])
@pytest.mark.parametrize("arg,value,error", BAD, ids=[f"{a}-{i}" for i, (a, _, _) in enumerate(BAD)])
def test_bad_argument(backend, rng, form, arg, value, error):
    kw = _valid(rng) if form == "single" else _valid_segmented(rng)
    assert _call(form, kw, backend)[0].shape == (3, 20)  # the valid baseline passes
    kw[arg] = value
    with pytest.raises(error, match=rf"^{arg}:"):
        _call(form, kw, backend)


USED_BAD_SINGLE = [(np.ones((3, 7), bool), ValueError), (np.ones(18, bool), ValueError),
                   (np.ones((3, 6), np.float32), TypeError), ("yes", TypeError)]
USED_BAD_SEGMENTED = [(np.ones(9, bool), ValueError), (np.ones(11, bool), ValueError),
                      (np.ones((2, 5), bool), ValueError), (np.ones(10, np.int64), TypeError), (3.0, TypeError)]


@pytest.mark.parametrize("value,error", USED_BAD_SINGLE, ids=["wide", "flat", "float", "str"])
def test_bad_used_single(backend, rng, value, error):
    kw = _valid(rng)
    assert _call("single", {**kw, "used": np.zeros((3, 6), bool)}, backend)[0].shape == (3, 20)
    with pytest.raises(error, match=r"^used:"):
        _call("single", {**kw, "used": value}, backend)


@pytest.mark.parametrize("value,error", USED_BAD_SEGMENTED, ids=["short", "long", "2d", "int", "float"])
def test_bad_used_segmented(backend, rng, value, error):
    kw = _valid_segmented(rng)
    assert _call("segmented", {**kw, "used": np.zeros(10, bool)}, backend)[0].shape == (3, 20)
    with pytest.raises(error, match=r"^used:"):
        _call("segmented", {**kw, "used": value}, backend)


OFFSETS_BAD = [
    (np.zeros(0, np.int64), ValueError),
    (np.array([1, 2, 2, 6]), ValueError),
    (np.array([0, 3, 2, 6]), ValueError),
    (np.array([0, 2, 2, 5]), ValueError),
    (np.array([0, 2, 2, 7]), ValueError),
    (np.array([[0, 2, 2, 6]]), ValueError),
    (np.array([0, 2, 2, 6.0]), TypeError),
    ("0,2,2,6", TypeError),
]
CHAIN_QUESTION_BAD = [
    (np.array([2, 0, 3]), ValueError),
    (np.array([2, -1, 0]), ValueError),
    (np.array([2, 0]), ValueError),
    (np.array([2.0, 0.0, 1.0]), TypeError),
]


@pytest.mark.parametrize("value,error", OFFSETS_BAD,
                         ids=["empty", "first", "decreasing", "short-last", "long-last", "2d", "float", "str"])
def test_bad_triple_offsets(backend, rng, value, error):
    kw = _valid_segmented(rng)
    kw["triple_offsets"] = value
    with pytest.raises(error, match=r"^triple_offsets:"):
        _call("segmented", kw, backend)


@pytest.mark.parametrize("value,error", CHAIN_QUESTION_BAD, ids=["too-large", "negative", "short", "float"])
def test_bad_chain_question(backend, rng, value, error):
    kw = _valid_segmented(rng)
    kw["chain_question"] = value
    with pytest.raises(error, match=r"^chain_question:"):
        _call("segmented", kw, backend)


@pytest.mark.parametrize("form", ["single", "segmented"])
def test_k_beyond_the_memory_budget_is_refused(backend, rng, form):
    kw = _valid(rng) if form == "single" else _valid_segmented(rng)
    for k in (2**40, 2**62, 2**63 - 1):
        with pytest.raises(ValueError, match=r"^k: the \(len\(query_emb\), k\) outputs would need"):
            _call(form, {**kw, "k": k}, backend)
    # With no chains the outputs are empty whatever k.
    kw["query_emb"] = kw["query_emb"][:0]
    if form == "segmented":
        kw["chain_question"] = kw["chain_question"][:0]
    assert _call(form, {**kw, "k": 2**40}, backend)[0].shape == (0, 2**40)


# --------------------------------------------------------------------------- the C++ re-checks


def test_core_rechecks_values(core, rng):
    """A direct _core call (no Python validation) gets the same argument-named errors."""
    q, triples, c = _single(rng, 3, 6, 5)
    off, cq = np.array([0, 2, 2, 6], np.int64), np.array([2, 0, 2], np.int64)
    ok = dict(used=None, alpha=0.4, k=3, check_finite=True)
    assert core.triple_reliability(q, triples, c, **ok)[1].shape == (3, 3)
    assert core.triple_reliability_segmented(q, triples, c, off, cq, **ok)[1].shape == (3, 3)
    cases = [
        ("alpha", dict(ok, alpha=1.5)), ("alpha", dict(ok, alpha=float("nan"))), ("k", dict(ok, k=0)),
        ("credibility", dict(ok)), ("used", dict(ok, used=np.ones((3, 5), bool))),
        ("used", dict(ok, used=np.ones((3, 6), np.uint8))),
    ]
    for arg, kw in cases:
        cred = np.where(np.arange(6) == 4, np.nan, c) if arg == "credibility" else c
        with pytest.raises((ValueError, TypeError), match=rf"^{arg}:"):
            core.triple_reliability(q, triples, cred, **kw)
    seg_cases = [
        ("triple_offsets", np.array([0, 3, 2, 6]), cq, None),
        ("triple_offsets", np.array([0, 2, 2, 5]), cq, None),
        ("triple_offsets", np.zeros(0, np.int64), cq, None),
        ("chain_question", off, np.array([2, 0, 3]), None),
        ("chain_question", off, np.array([2, -1, 0]), None),
        ("used", off, cq, np.ones(9, bool)),
        ("used", off, cq, np.ones(11, bool)),
    ]
    for arg, o, c_q, used in seg_cases:
        with pytest.raises(ValueError, match=rf"^{arg}:"):
            core.triple_reliability_segmented(q, triples, c, o, c_q, **dict(ok, used=used))
    with pytest.raises(ValueError, match=r"^k: the \(len\(query_emb\), k\) outputs would need"):
        core.triple_reliability(q, triples, c, **dict(ok, k=2**62))
    with pytest.raises(TypeError, match=r"^credibility: expected dtype float64"):
        core.triple_reliability(q, triples, c.astype(np.float32), **ok)


def test_torch_blocks_and_groups_match_the_reference(rng, monkeypatch):
    """The torch formulation's planning at toy budgets: questions in padded groups (the last
    one padded), a question with many chains or triples in its own column blocks."""
    pytest.importorskip("torch")
    import importlib

    module = importlib.import_module("rrag_kernels.torch_ops.triple_reliability")
    monkeypatch.setattr(module, "BLOCK_ENTRIES", 64)
    monkeypatch.setattr(module, "LARGE_ROWS", 5)
    for _ in range(40):
        n_q, d, k = int(rng.integers(1, 6)), int(rng.integers(1, 6)), int(rng.integers(1, 35))
        sizes = rng.integers(0, 4, n_q)
        sizes[rng.integers(n_q)] = rng.integers(0, 30)
        offsets = np.concatenate([[0], np.cumsum(sizes)])
        chains = rng.integers(0, n_q, int(rng.integers(0, 12)))
        q, t = random_rows(rng, len(chains), d), random_rows(rng, int(offsets[-1]), d)
        cred = rng.integers(0, 3, int(offsets[-1])).astype(float)  # alpha 0 below: exact ties
        used = rng.random(int(sizes[chains].sum())) < 0.4 if rng.random() < 0.7 else None
        for alpha in (0.0, 0.4):
            got = rk.triple_reliability_segmented(q, t, cred, offsets, chains, alpha=alpha, used=used, k=k,
                                                  backend="torch")
            want = rk.triple_reliability_segmented(q, t, cred, offsets, chains, alpha=alpha, used=used, k=k,
                                                   backend="reference")
            if alpha == 0.0:
                assert np.array_equal(got[1], want[1]), "alpha 0: the exact tie order"
            np.testing.assert_allclose(got[0], want[0], atol=1e-5, err_msg="scores at toy budgets")


def test_torch_an_inf_embedding_never_turns_an_available_triple_into_padding():
    # check_finite=False: the scores of the inf triple are unspecified, its index is not -1.
    q = np.array([[1.0, 0.0]], np.float32)
    t = np.array([[1.0, 0.0], [np.inf, 1.0], [0.0, 1.0]], np.float32)
    used = np.array([[True, False, False]])
    for backend in ("torch", "reference"):
        with np.errstate(invalid="ignore"):  # inf / inf in the float64 reference
            _, indices = rk.triple_reliability(q, t, np.full(3, 5.0), used=used, k=3, check_finite=False,
                                               backend=backend)
        assert indices[0].tolist() == [2, 1, -1], backend
