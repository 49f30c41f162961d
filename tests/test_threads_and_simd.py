"""The cpp backend: bitwise identical results for any thread count, at every SIMD level;
within tolerance of the reference at each level.

Thread count must not change a single bit (each output's reduction order may not depend
on how work is split). SIMD levels may round differently (FMA, lane count), so across
levels only the earned tolerance applies.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import (
    assert_bitwise_equal,
    assert_close,
    check_reliability,
    check_topk,
    error_bound,
    naive_claim_relevance_f32,
    naive_cosine_matrix_f32,
    naive_segmented_cosine_f32,
    offsets_from_counts,
    random_counts,
    random_rows,
)

import rrag_kernels as rk
from rrag_kernels.reference import (
    claim_relevance_ref,
    cosine_matrix_ref,
    segmented_cosine_ref,
    triple_reliability_ref,
    triple_reliability_segmented_ref,
)


def _levels() -> list[str]:
    try:
        from rrag_kernels import _core

        return list(_core.available_simd_levels())
    except Exception:
        # The `core` fixture skips these tests with the import error as the reason.
        return ["unavailable"]


LEVELS = _levels()
THREADS = (1, 2, 3)


def _inputs(rng):
    """Sizes that split unevenly over 2 and 3 threads and leave SIMD tails (d = 385)."""
    d = 385
    q = 101
    doc_counts = random_counts(rng, q, max_count=40, empty_frac=0.2)
    doc_counts[q // 2] = 700  # one segment much larger than the rest
    claim_counts = random_counts(rng, q, max_count=9, empty_frac=0.2)
    doc_off, claim_off = offsets_from_counts(doc_counts), offsets_from_counts(claim_counts)
    return {
        "a": random_rows(rng, 203, d, zero_rows=3),
        "b": random_rows(rng, 113, d, zero_rows=2),
        "queries": random_rows(rng, q, d, zero_rows=1),
        "docs": random_rows(rng, int(doc_off[-1]), d, zero_rows=4),
        "doc_offsets": doc_off,
        "claims": random_rows(rng, int(claim_off[-1]), d, zero_rows=2),
        "claim_offsets": claim_off,
        "sim": rng.uniform(-1, 1, int(doc_off[-1])).astype(np.float32),
        "corpus": random_rows(rng, 3001, d, zero_rows=5),
        # triple_reliability: the queries as chains against the first 300 corpus rows (two
        # tasks of chains sharing the triples, three triple blocks), and the claims as chains of
        # their query's docs (empty questions, and one of 700 triples).
        "corpus_credibility": rng.uniform(0, 10, 300),
        "used": rng.uniform(size=(q, 300)) < 0.3,
        "doc_credibility": rng.uniform(0, 10, int(doc_off[-1])),
        "claim_query": np.repeat(np.arange(q), claim_counts),
    }


def _run_all(x) -> dict[str, np.ndarray]:
    cr_args = (x["queries"], x["docs"], x["doc_offsets"], x["claims"], x["claim_offsets"])
    scores, indices = rk.topk_cosine(x["queries"][:13], x["corpus"], 17, backend="cpp")
    return {
        "cosine_matrix": rk.cosine_matrix(x["a"], x["b"], backend="cpp"),
        "segmented_cosine": rk.segmented_cosine(x["queries"], x["docs"], x["doc_offsets"], backend="cpp"),
        "claim_relevance": rk.claim_relevance(*cr_args, backend="cpp"),
        "claim_relevance_override": rk.claim_relevance(*cr_args, query_doc_sim=x["sim"], clip=False, backend="cpp"),
        "topk_scores": scores,
        "topk_indices": indices,
        **_run_triple_reliability(x),
    }


def _run_triple_reliability(x) -> dict[str, np.ndarray]:
    single = rk.triple_reliability(x["queries"], x["corpus"][:300], x["corpus_credibility"], used=x["used"],
                                   k=20, backend="cpp")
    long_k = rk.triple_reliability(x["queries"], x["corpus"][:300], x["corpus_credibility"], k=70, backend="cpp")
    seg = rk.triple_reliability_segmented(x["claims"], x["docs"], x["doc_credibility"], x["doc_offsets"],
                                          x["claim_query"], alpha=0.7, k=9, backend="cpp")
    return {"triple_scores": single[0], "triple_indices": single[1], "triple_k70_scores": long_k[0],
            "triple_k70_indices": long_k[1], "triple_seg_scores": seg[0], "triple_seg_indices": seg[1]}


@pytest.mark.parametrize("level", LEVELS)
def test_bitwise_identical_across_thread_counts(restore_threads_and_simd, rng, level):
    core = restore_threads_and_simd
    core.set_simd_level(level)
    assert core.simd_level() == level
    x = _inputs(rng)
    results = {}
    for n in THREADS:
        rk.set_num_threads(n)
        assert rk.get_num_threads() == n
        results[n] = _run_all(x)
    for n in THREADS[1:]:
        for name, value in results[n].items():
            assert_bitwise_equal(value, results[THREADS[0]][name],
                                 name=f"{name} at {n} threads vs 1 thread (SIMD {level})")


@pytest.mark.parametrize("level", LEVELS)
def test_each_level_within_tolerance(restore_threads_and_simd, rng, level):
    core = restore_threads_and_simd
    core.set_simd_level(level)
    rk.set_num_threads(2)
    x = _inputs(rng)
    out = _run_all(x)

    ref = cosine_matrix_ref(x["a"], x["b"])
    assert_close(out["cosine_matrix"], ref, atol=error_bound(naive_cosine_matrix_f32(x["a"], x["b"]), ref),
                 name=f"cosine_matrix ({level})")

    seg = (x["queries"], x["docs"], x["doc_offsets"])
    ref = segmented_cosine_ref(*seg)
    assert_close(out["segmented_cosine"], ref, atol=error_bound(naive_segmented_cosine_f32(*seg), ref),
                 name=f"segmented_cosine ({level})")

    cr = (*seg, x["claims"], x["claim_offsets"])
    ref = claim_relevance_ref(*cr)
    assert_close(out["claim_relevance"], ref, atol=error_bound(naive_claim_relevance_f32(*cr), ref),
                 name=f"claim_relevance ({level})")
    ref = claim_relevance_ref(*cr, query_doc_sim=x["sim"], clip=False)
    naive = naive_claim_relevance_f32(*cr, query_doc_sim=x["sim"], clip=False)
    assert_close(out["claim_relevance_override"], ref, atol=error_bound(naive, ref),
                 name=f"claim_relevance with override ({level})")

    check_topk(out["topk_scores"], out["topk_indices"], x["queries"][:13], x["corpus"], 17)

    corpus, cred = x["corpus"][:300], x["corpus_credibility"]
    check_reliability(out["triple_scores"], out["triple_indices"],
                      triple_reliability_ref(x["queries"], corpus, cred, used=x["used"], k=300),
                      x["queries"], corpus, cred, 0.4, 20)
    check_reliability(out["triple_k70_scores"], out["triple_k70_indices"],
                      triple_reliability_ref(x["queries"], corpus, cred, k=300), x["queries"], corpus, cred, 0.4, 70)
    seg = (x["claims"], x["docs"], x["doc_credibility"], x["doc_offsets"], x["claim_query"])
    check_reliability(out["triple_seg_scores"], out["triple_seg_indices"],
                      triple_reliability_segmented_ref(*seg, alpha=0.7, k=700),
                      x["claims"], x["docs"], x["doc_credibility"], 0.7, 9)


def test_levels_agree_on_exact_cases(restore_threads_and_simd):
    # Cosines of +-2**s basis vectors are exact in float32, so every SIMD level must give
    # exactly the same values, tails included (d = 17 leaves one lane past a 16-wide loop).
    core = restore_threads_and_simd
    d = 17
    e = np.eye(d, dtype=np.float32)
    a = np.concatenate([e, -2.0 * e, np.zeros((1, d), np.float32)])
    b = np.concatenate([4.0 * e, 0.5 * e[::-1]])
    outs = {}
    for level in core.available_simd_levels():
        core.set_simd_level(level)
        outs[level] = rk.cosine_matrix(a, b, backend="cpp")
    first = next(iter(outs))
    for level, out in outs.items():
        # Equal values (a zero may carry either sign, depending on how a level accumulates).
        assert_close(out, outs[first], atol=0.0, name=f"cosine_matrix at {level} vs {first}")
    assert_close(outs[first], cosine_matrix_ref(a, b), atol=0.0, name="exact basis cosines")


@pytest.mark.parametrize("level", LEVELS)
def test_cpp_topk_scores_are_cosine_matrix_bits(core, restore_threads_and_simd, level, rng):
    """The documented promise of the C++ backend: topk_cosine's scores are bitwise the
    cosine_matrix entries at the returned indices (one GEMM micro-kernel, one scaling order),
    at every SIMD level and for odd sizes that leave edge tiles."""
    if level == "unavailable":
        pytest.skip("rrag_kernels._core is not built")
    core.set_simd_level(level)
    queries = random_rows(rng, 131, 385, zero_rows=1)
    corpus = random_rows(rng, 1031, 385, zero_rows=2)
    scores, indices = rk.topk_cosine(queries, corpus, 7, backend="cpp")
    full = rk.cosine_matrix(queries, corpus, backend="cpp")
    assert_bitwise_equal(scores, np.take_along_axis(full, indices, axis=1), name="topk scores")
