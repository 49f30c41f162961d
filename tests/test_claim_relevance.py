"""claim_relevance: R(c) = max over c's query's docs of sim(x, d) * cos(c, d), every backend."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import (
    assert_close,
    error_bound,
    naive_claim_relevance_f32,
    offsets_from_counts,
    random_counts,
    random_rows,
)

import rrag_kernels as rk
from rrag_kernels.reference import claim_relevance_ref, segmented_cosine_ref


def _check(args, backend, **kw):
    out = rk.claim_relevance(*args, backend=backend, **kw)
    assert isinstance(out, np.ndarray), f"numpy in must give numpy out, got {type(out)}"
    assert out.dtype == np.float32
    assert out.shape == (args[3].shape[0],)
    ref = claim_relevance_ref(*args, **kw)
    tol = error_bound(naive_claim_relevance_f32(*args, **kw), ref)
    assert_close(out, ref, atol=tol, name=f"claim_relevance {kw}")
    return out


def _make(rng, doc_counts, claim_counts, d, *, zero_rows=0):
    doc_offsets = offsets_from_counts(doc_counts)
    claim_offsets = offsets_from_counts(claim_counts)
    q = len(doc_counts)
    return (
        random_rows(rng, q, d),
        random_rows(rng, int(doc_offsets[-1]), d, zero_rows=zero_rows),
        doc_offsets,
        random_rows(rng, int(claim_offsets[-1]), d, zero_rows=zero_rows),
        claim_offsets,
    )


def _claims_of_queries_without_docs(doc_counts, claim_counts):
    owner = np.repeat(np.arange(len(claim_counts)), claim_counts)
    return np.asarray(doc_counts)[owner] == 0


# (Q, max docs, max claims, d)
CASES = [
    (1, 1, 1, 1),
    (1, 10, 8, 3),
    (2, 5, 3, 17),
    (7, 16, 16, 16),
    (13, 33, 5, 383),
    (17, 10, 8, 385),
    (31, 17, 9, 64),
    (64, 3, 4, 128),
]


@pytest.mark.parametrize("clip", [True, False])
@pytest.mark.parametrize("q,max_docs,max_claims,d", CASES, ids=[f"Q{c[0]}-D{c[1]}-C{c[2]}-d{c[3]}" for c in CASES])
def test_random_ragged(backend, rng, q, max_docs, max_claims, d, clip):
    doc_counts = random_counts(rng, q, max_count=max_docs, empty_frac=0.25)
    claim_counts = random_counts(rng, q, max_count=max_claims, empty_frac=0.25)
    _check(_make(rng, doc_counts, claim_counts, d), backend, clip=clip)


@pytest.mark.parametrize("clip", [True, False])
def test_query_doc_sim_override(backend, rng, clip):
    doc_counts = random_counts(rng, 23, max_count=12, empty_frac=0.2)
    claim_counts = random_counts(rng, 23, max_count=7, empty_frac=0.2)
    args = _make(rng, doc_counts, claim_counts, 65)
    # Multi-hop similarities: any sign, not tied to the query embedding at all.
    sim = rng.uniform(-1.0, 1.0, size=args[1].shape[0]).astype(np.float32)
    out = _check(args, backend, query_doc_sim=sim, clip=clip)
    default = claim_relevance_ref(*args, clip=clip)
    # The override must actually be used: on this data it changes the answer.
    assert np.abs(claim_relevance_ref(*args, query_doc_sim=sim, clip=clip) - default).max() > 1e-3
    assert out.shape == default.shape


def test_override_equal_to_own_similarity_changes_nothing(backend, rng):
    doc_counts = random_counts(rng, 19, max_count=9, empty_frac=0.2)
    claim_counts = random_counts(rng, 19, max_count=6, empty_frac=0.2)
    args = _make(rng, doc_counts, claim_counts, 17)
    sim = segmented_cosine_ref(*args[:3]).astype(np.float32)
    with_override = _check(args, backend, query_doc_sim=sim)
    without = _check(args, backend)
    # Each is within its own bound of its reference; the two references differ only by
    # the float32 rounding of sim (<= 1 ulp of a value in [-1, 1]).
    tol = (
        error_bound(naive_claim_relevance_f32(*args), claim_relevance_ref(*args))
        + error_bound(naive_claim_relevance_f32(*args, query_doc_sim=sim),
                      claim_relevance_ref(*args, query_doc_sim=sim))
        + 1.2e-7
    )
    assert_close(with_override, without, atol=tol, name="override == own cosine vs default")


def test_negative_values_survive_without_clip(backend, rng):
    # Query q owns one doc that points along the query (sim ~ 0.99), and claims built as
    # -doc + small noise (cos(c, d) ~ -0.98): R(c) ~ -0.97 unclipped, exactly 0 clipped.
    q, d = 9, 33
    queries = random_rows(rng, q, d)
    scale = np.linalg.norm(queries, axis=1, keepdims=True) / np.sqrt(d)
    docs = (queries + 0.1 * scale * rng.standard_normal((q, d))).astype(np.float32)
    claim_counts = np.array([1, 2, 3, 0, 1, 2, 3, 1, 4])
    owner = np.repeat(np.arange(q), claim_counts)
    claims = (-docs[owner] + 0.2 * scale[owner] * rng.standard_normal((owner.size, d))).astype(np.float32)
    args = (queries, docs, offsets_from_counts(np.ones(q, np.int64)), claims, offsets_from_counts(claim_counts))
    unclipped = _check(args, backend, clip=False)
    assert np.all(unclipped < -0.5), f"negative relevance must survive clip=False: {unclipped}"
    clipped = _check(args, backend, clip=True)
    assert np.all(clipped == 0.0), f"clip=True must give exactly 0 for negative R: {clipped}"


@pytest.mark.parametrize("clip", [True, False])
def test_queries_without_docs_give_exactly_zero(backend, rng, clip):
    doc_counts = np.array([0, 3, 0, 0, 5, 0, 1, 0])
    claim_counts = np.array([4, 2, 1, 0, 3, 6, 1, 2])
    args = _make(rng, doc_counts, claim_counts, 17)
    out = _check(args, backend, clip=clip)
    no_docs = _claims_of_queries_without_docs(doc_counts, claim_counts)
    assert no_docs.sum() == 13
    assert np.all(out[no_docs] == 0.0), f"claims of doc-less queries must be 0: {out[no_docs]}"
    # Also with an override of any sign: there is no doc to use it on.
    sim = rng.uniform(-1, 1, size=args[1].shape[0]).astype(np.float32)
    out = _check(args, backend, clip=clip, query_doc_sim=sim)
    assert np.all(out[no_docs] == 0.0)


def test_queries_with_docs_but_no_claims(backend, rng):
    doc_counts = np.array([5, 7, 1, 9, 4, 3])
    claim_counts = np.array([0, 3, 0, 0, 2, 0])
    _check(_make(rng, doc_counts, claim_counts, 31), backend)


@pytest.mark.parametrize("clip", [True, False])
def test_no_claims_at_all(backend, rng, clip):
    args = _make(rng, np.array([3, 0, 2]), np.array([0, 0, 0]), 17)
    out = _check(args, backend, clip=clip)
    assert out.shape == (0,)


def test_no_docs_at_all(backend, rng):
    args = _make(rng, np.array([0, 0, 0]), np.array([2, 0, 5]), 17)
    out = _check(args, backend, clip=False)
    assert np.all(out == 0.0)


def test_no_queries(backend):
    z = np.zeros((0, 8), np.float32)
    off = np.zeros(1, np.int64)
    out = rk.claim_relevance(z, z, off, z, off, backend=backend)
    assert out.shape == (0,) and out.dtype == np.float32


def test_block_edge_segment_sizes(backend, rng):
    doc_counts = np.array([1, 15, 16, 17, 31, 32, 33, 63, 64, 65, 0, 127, 128, 129])
    claim_counts = np.array([1, 17, 16, 15, 3, 33, 32, 1, 0, 2, 5, 7, 8, 9])
    _check(_make(rng, doc_counts, claim_counts, 17), backend, clip=False)


@pytest.mark.parametrize("where", ["first", "middle", "last"])
def test_one_huge_segment_among_empty_ones(backend, rng, max_rows, where):
    q = 129
    pos = {"first": 0, "middle": q // 2, "last": q - 1}[where]
    doc_counts = np.zeros(q, np.int64)
    doc_counts[pos] = min(3001, max_rows)
    # Claims sit both in the huge query and in queries that have no docs.
    claim_counts = np.zeros(q, np.int64)
    claim_counts[pos] = min(257, max_rows // 4)
    claim_counts[(pos + 1) % q] = 3
    claim_counts[(pos + 7) % q] = 1
    args = _make(rng, doc_counts, claim_counts, 65)
    out = _check(args, backend, clip=False)
    no_docs = _claims_of_queries_without_docs(doc_counts, claim_counts)
    assert np.all(out[no_docs] == 0.0)


def test_zero_vectors(backend, rng):
    # A zero claim has cos 0 with every doc, so R = max(sim * 0) = 0. A zero query has
    # sim 0 with every doc, so all its claims get 0. A zero doc contributes 0.
    doc_counts = np.array([4, 3, 5, 2])
    claim_counts = np.array([3, 2, 4, 3])
    qe, de, doff, ce, coff = _make(rng, doc_counts, claim_counts, 385)
    qe[1] = 0.0
    ce[[0, 5, 8]] = 0.0
    de[[2, 9]] = 0.0
    out = _check((qe, de, doff, ce, coff), backend, clip=False)
    assert not np.isnan(out).any()
    assert np.all(out[[0, 5, 8]] == 0.0), "zero claims must score exactly 0"
    assert np.all(out[coff[1]:coff[2]] == 0.0), "claims of a zero query must score exactly 0"


def test_hand_computed(backend):
    # One query x = (1, 0) with docs d1 = (1, 0) (cos 1) and d2 = (0, 1) (cos 0).
    # Claim (0, 1): max(1 * 0, 0 * 1) = 0.   Claim (1, 1): max(1 * 2**-0.5, 0) = 2**-0.5.
    # Claim (-1, 0): max(1 * -1, 0 * 0) = 0 (d2's zero product wins even unclipped).
    # A second query (0, 1) owning only d3 = (1, 0) (cos 0) with claim (1, 0): max(0 * 1) = 0;
    # with the override sim(d3) = -0.5 it is -0.5 unclipped, 0 clipped.
    args = (
        np.array([[1.0, 0.0], [0.0, 1.0]], np.float32),
        np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]], np.float32),
        np.array([0, 2, 3], np.int64),
        np.array([[0.0, 1.0], [1.0, 1.0], [-1.0, 0.0], [1.0, 0.0]], np.float32),
        np.array([0, 3, 4], np.int64),
    )
    assert_close(rk.claim_relevance(*args, clip=False, backend=backend),
                 [0.0, 2**-0.5, 0.0, 0.0], atol=1e-6, name="hand case")
    sim = np.array([1.0, 0.0, -0.5], np.float32)
    assert_close(rk.claim_relevance(*args, query_doc_sim=sim, clip=False, backend=backend),
                 [0.0, 2**-0.5, 0.0, -0.5], atol=1e-6, name="hand case, override")
    assert_close(rk.claim_relevance(*args, query_doc_sim=sim, clip=True, backend=backend),
                 [0.0, 2**-0.5, 0.0, 0.0], atol=1e-6, name="hand case, override, clipped")


def test_torch_blocks_and_groups_match_the_reference(rng, monkeypatch):
    """The torch formulation's planning at toy budgets: queries in padded groups, a query with
    many claims beside one with many docs (its own blocks, not the product of both widths)."""
    torch = pytest.importorskip("torch")
    import importlib

    module = importlib.import_module("rrag_kernels.torch_ops.claim_relevance")
    monkeypatch.setattr(module, "BLOCK_ENTRIES", 64)
    monkeypatch.setattr(module, "LARGE_ROWS", 5)
    for _ in range(40):
        n_q, d = int(rng.integers(1, 7)), int(rng.integers(1, 6))
        docs, claims = rng.integers(0, 4, n_q), rng.integers(0, 4, n_q)
        docs[rng.integers(n_q)], claims[rng.integers(n_q)] = rng.integers(0, 30), rng.integers(0, 30)
        d_off, c_off = np.concatenate([[0], np.cumsum(docs)]), np.concatenate([[0], np.cumsum(claims)])
        q, x, c = random_rows(rng, n_q, d), random_rows(rng, int(d_off[-1]), d), random_rows(rng, int(c_off[-1]), d)
        sim = rng.uniform(-1, 1, int(d_off[-1])) if rng.random() < 0.5 else None
        got = rk.claim_relevance(torch.from_numpy(q), torch.from_numpy(x), d_off, torch.from_numpy(c), c_off,
                                 query_doc_sim=sim, backend="torch")
        want = claim_relevance_ref(q, x, d_off, c, c_off, query_doc_sim=sim)
        assert_close(got.numpy(), want, atol=1e-5, name="claim_relevance at toy budgets")
