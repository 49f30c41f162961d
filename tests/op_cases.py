"""One small valid call of every public op, for tests that run all ops the same way
(pickled inputs, worker processes, thread counts, concurrency).

``OP_CASES[name](rng)`` returns ``(inputs, kwargs)``: the array arguments (positional, in
order) and the scalar keyword arguments; :func:`call` runs the op on them. Everything here
is importable by a spawned child process (module-level functions only).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import numpy as np

import rrag_kernels as rk


def _offsets(rng: np.random.Generator, n_segments: int, max_count: int) -> np.ndarray:
    counts = rng.integers(0, max_count + 1, size=n_segments)
    return np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)


def _embeddings(rng, n, d=37):
    return rng.standard_normal((n, d)).astype(np.float32)


def _cosine_matrix(rng):
    return [_embeddings(rng, 41), _embeddings(rng, 29)], {}


def _segmented_cosine(rng):
    off = _offsets(rng, 23, 9)
    return [_embeddings(rng, 23), _embeddings(rng, int(off[-1])), off], {}


def _claim_relevance(rng):
    d_off, c_off = _offsets(rng, 17, 8), _offsets(rng, 17, 5)
    n_docs = int(d_off[-1])
    return ([_embeddings(rng, 17), _embeddings(rng, n_docs), d_off, _embeddings(rng, int(c_off[-1])), c_off],
            {"query_doc_sim": rng.uniform(-1, 1, n_docs).astype(np.float32)})


def _topk_cosine(rng):
    return [_embeddings(rng, 13), _embeddings(rng, 301)], {"k": 7}


def _triple_reliability(rng):
    return ([_embeddings(rng, 19), _embeddings(rng, 83), rng.uniform(0, 10, size=83)],
            {"used": rng.uniform(size=(19, 83)) < 0.3, "alpha": 0.3, "k": 7})


def _triple_reliability_segmented(rng):
    off = _offsets(rng, 11, 30)
    questions = rng.integers(0, 11, size=29).astype(np.int64)
    n_used = int(np.diff(off)[questions].sum())
    return ([_embeddings(rng, 29), _embeddings(rng, int(off[-1])), rng.uniform(0, 10, size=int(off[-1])), off,
             questions], {"used": rng.uniform(size=n_used) < 0.3, "k": 9})


_WORDS = ["the", "river", "flooded", "in", "1990", "city", "council", "said", "not", "north", "bank", "rain"]


def _texts(rng, n):
    return [" ".join(rng.choice(_WORDS, size=int(rng.integers(0, 9)))) for _ in range(n)]


def _claim_token_ids(rng):
    return [_texts(rng, 31)], {}


def _select_pairs(rng):
    ids, off = rk.claim_token_ids(_texts(rng, 60))
    return [ids, off, rng.integers(0, 5, size=60).astype(np.int64)], {"tau": 0.4, "max_pairs": 50}


def _edges(rng, n_claims, n_edges):
    i = rng.integers(0, n_claims, size=n_edges)
    j = (i + rng.integers(1, n_claims, size=n_edges)) % n_claims
    return i.astype(np.int64), j.astype(np.int64)


def _probs(rng, n):
    p = rng.uniform(0, 1, size=(n, 3))
    return p / p.sum(axis=1, keepdims=True)


def _nli_graph(rng):
    i, j = _edges(rng, 40, 90)
    return [i, j, _probs(rng, 90), _probs(rng, 90)], {"n_claims": 40}


def _greedy_prune(rng):
    i, j = _edges(rng, 40, 90)
    return [rng.uniform(-1, 2, size=40), i, j, rng.uniform(-1, 1, size=90)], {}


def _gate_stats(rng):
    i, j = _edges(rng, 40, 90)
    return ([rng.uniform(size=40) < 0.7, i, j, rng.integers(-1, 2, size=90).astype(np.int8),
             rng.integers(-1, 6, size=40).astype(np.int64)], {})


def _lexical_opcodes(rng):
    off_a, off_b = _offsets(rng, 25, 12), _offsets(rng, 25, 12)
    tokens_a = rng.integers(0, 6, size=int(off_a[-1])).astype(np.int64)
    tokens_b = rng.integers(0, 6, size=int(off_b[-1])).astype(np.int64)
    return [tokens_a, off_a, tokens_b, off_b], {"trim_affixes": True}


def _claims(rng, n_responses=70):
    off = _offsets(rng, n_responses, 9)
    n = int(off[-1])
    return rng.uniform(0, 1, size=n), rng.uniform(size=n) < 0.6, off


def _r_scores(rng):
    return list(_claims(rng)), {"a": 1.0}


def _conformal_quantile(rng):
    return [rng.uniform(-1, 1, size=57)], {"alpha": 0.1}


def _conformal_sweep(rng):
    return list(_claims(rng)), {"alphas": [0.1, 0.3], "n_splits": 6, "seed": 3}


def _beam_step(rng):
    off = _offsets(rng, 40, 12)
    b = int(off[-1])
    probs = rng.choice([0.0, 0.125, 0.25, 0.5, np.nan], size=(b, 9))  # exact score ties, NaN entries
    probs[rng.uniform(size=b) < 0.1] = np.nan
    return ([2.0 ** -rng.integers(0, 4, size=b), rng.uniform(size=b) < 0.2, probs,
             rng.integers(0, 9, size=b).astype(np.int64), off], {"beams": 3, "max_chains": 7})


OP_CASES: dict[str, Callable[[np.random.Generator], tuple[list[Any], dict[str, Any]]]] = {
    "cosine_matrix": _cosine_matrix,
    "segmented_cosine": _segmented_cosine,
    "claim_relevance": _claim_relevance,
    "topk_cosine": _topk_cosine,
    "triple_reliability": _triple_reliability,
    "triple_reliability_segmented": _triple_reliability_segmented,
    "claim_token_ids": _claim_token_ids,
    "select_pairs": _select_pairs,
    "nli_graph": _nli_graph,
    "greedy_prune": _greedy_prune,
    "gate_stats": _gate_stats,
    "lexical_opcodes": _lexical_opcodes,
    "r_scores": _r_scores,
    "conformal_quantile": _conformal_quantile,
    "conformal_sweep": _conformal_sweep,
    "beam_step": _beam_step,
}


def make_case(name: str, seed: int = 0) -> tuple[list[Any], dict[str, Any]]:
    return OP_CASES[name](np.random.default_rng(seed))


def call(name: str, inputs: list[Any], kwargs: dict[str, Any]) -> Any:
    """Run op ``name`` of the public face on the inputs."""
    return getattr(rk, name)(*inputs, **kwargs)


def as_plain(result: Any) -> Any:
    """A result as nested tuples / dicts of numpy arrays and Python scalars (comparable)."""
    if dataclasses.is_dataclass(result):
        return {f.name: as_plain(getattr(result, f.name)) for f in dataclasses.fields(result)}
    if isinstance(result, dict):
        return {k: as_plain(v) for k, v in result.items()}
    if isinstance(result, (tuple, list)):
        return tuple(as_plain(v) for v in result)
    return result


def assert_same(actual: Any, expected: Any, where: str = "result") -> None:
    """Exact equality (bitwise for floats, NaN equal to NaN), dtype included."""
    actual, expected = as_plain(actual), as_plain(expected)
    if isinstance(expected, dict):
        assert isinstance(actual, dict) and actual.keys() == expected.keys(), f"{where}: keys differ"
        for k in expected:
            assert_same(actual[k], expected[k], f"{where}[{k!r}]")
    elif isinstance(expected, tuple):
        assert isinstance(actual, tuple) and len(actual) == len(expected), f"{where}: lengths differ"
        for k, (a, e) in enumerate(zip(actual, expected)):
            assert_same(a, e, f"{where}[{k}]")
    elif isinstance(expected, np.ndarray):
        assert isinstance(actual, np.ndarray), f"{where}: expected an array, got {type(actual).__name__}"
        assert actual.dtype == expected.dtype and actual.shape == expected.shape, (
            f"{where}: {actual.dtype}{actual.shape} != {expected.dtype}{expected.shape}")
        assert np.array_equal(actual, expected, equal_nan=actual.dtype.kind in "fc"), f"{where}: values differ"
    elif isinstance(expected, float):
        assert isinstance(actual, float) and (actual == expected or (actual != actual and expected != expected)), (
            f"{where}: {actual!r} != {expected!r}")
    else:
        assert actual == expected, f"{where}: {actual!r} != {expected!r}"


def run_in_child(name: str, inputs: list[Any], kwargs: dict[str, Any], all_threads: bool) -> Any:
    """Child-process entry point: optionally make every kernel use the pool, then run the op."""
    if all_threads:
        from rrag_kernels import _core

        _core._set_min_work_scale(0.0)
        rk.set_num_threads(2)
    return as_plain(call(name, inputs, kwargs))


def make_in_child(name: str, seed: int) -> tuple[list[Any], dict[str, Any]]:
    """Child-process entry point: build the inputs there (they come back through pickle)."""
    return make_case(name, seed)


def start_pool() -> int:
    """Run one kernel that uses two threads; return how many pool threads this process has."""
    from rrag_kernels import _core

    rk.set_num_threads(2)
    docs = np.ones((4096, 8), dtype=np.float32)
    rk.segmented_cosine(docs[:1], docs, np.array([0, 4096]))
    return _core._pool_size()
