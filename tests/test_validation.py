"""Bad input: ValueError / TypeError whose message begins with the argument's name.

Contract: "Every message begins with the argument's name followed by a colon". Where two
arguments disagree (a dimension mismatch) either of them may be the one named.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from helpers import (
    assert_close,
    error_bound,
    naive_claim_relevance_f32,
    naive_cosine_matrix_f32,
    naive_segmented_cosine_f32,
    random_rows,
)

import rrag_kernels as rk
from rrag_kernels.reference import claim_relevance_ref, cosine_matrix_ref, segmented_cosine_ref

D = 7


def _named(*names: str) -> str:
    return r"^(" + "|".join(re.escape(n) for n in names) + r"):"


def _valid(kernel: str, rng) -> dict:
    """Small valid keyword arguments for each kernel (Q = 3 queries)."""
    if kernel == "cosine_matrix":
        return {"a": random_rows(rng, 5, D), "b": random_rows(rng, 4, D)}
    if kernel == "segmented_cosine":
        return {"queries": random_rows(rng, 3, D), "docs": random_rows(rng, 6, D),
                "doc_offsets": np.array([0, 2, 2, 6], np.int64)}
    if kernel == "claim_relevance":
        return {"query_emb": random_rows(rng, 3, D), "doc_emb": random_rows(rng, 6, D),
                "doc_offsets": np.array([0, 2, 2, 6], np.int64),
                "claim_emb": random_rows(rng, 5, D),
                "claim_offsets": np.array([0, 1, 3, 5], np.int64),
                "query_doc_sim": rng.uniform(-1, 1, 6).astype(np.float32)}
    if kernel == "topk_cosine":
        return {"queries": random_rows(rng, 3, D), "corpus": random_rows(rng, 6, D), "k": 2}
    raise AssertionError(kernel)


def _call(kernel: str, kwargs: dict, backend: str, **extra):
    return getattr(rk, kernel)(**kwargs, backend=backend, **extra)


FLOAT_ARGS = [
    ("cosine_matrix", "a"), ("cosine_matrix", "b"),
    ("segmented_cosine", "queries"), ("segmented_cosine", "docs"),
    ("claim_relevance", "query_emb"), ("claim_relevance", "doc_emb"),
    ("claim_relevance", "claim_emb"), ("claim_relevance", "query_doc_sim"),
    ("topk_cosine", "queries"), ("topk_cosine", "corpus"),
]
MATRIX_ARGS = [(k, a) for k, a in FLOAT_ARGS if a != "query_doc_sim"]
OFFSET_ARGS = [("segmented_cosine", "doc_offsets"), ("claim_relevance", "doc_offsets"),
               ("claim_relevance", "claim_offsets")]
ids = [f"{k}-{a}" for k, a in FLOAT_ARGS]


def test_valid_inputs_pass(backend, rng):
    # The baseline every mutation below starts from must itself be accepted.
    assert _call("cosine_matrix", _valid("cosine_matrix", rng), backend).shape == (5, 4)
    assert _call("segmented_cosine", _valid("segmented_cosine", rng), backend).shape == (6,)
    assert _call("claim_relevance", _valid("claim_relevance", rng), backend).shape == (5,)
    scores, indices = _call("topk_cosine", _valid("topk_cosine", rng), backend)
    assert scores.shape == indices.shape == (3, 2)


# --------------------------------------------------------------------------- non-finite


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf], ids=["nan", "inf", "-inf"])
@pytest.mark.parametrize("kernel,arg", FLOAT_ARGS, ids=ids)
def test_non_finite_rejected(backend, rng, kernel, arg, bad):
    kwargs = _valid(kernel, rng)
    x = kwargs[arg].copy()
    x.flat[x.size // 2] = bad
    kwargs[arg] = x
    with pytest.raises(ValueError, match=_named(arg)):
        _call(kernel, kwargs, backend)
    with pytest.raises(ValueError, match=_named(arg)):
        _call(kernel, kwargs, backend, check_finite=True)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # NaN arithmetic is the point
def test_check_finite_false_cosine_matrix(backend, rng):
    # No error is required; a NaN in row 2 of a and inf in row 1 of b may poison only
    # out[2, :] and out[:, 1].
    a, b = random_rows(rng, 5, D), random_rows(rng, 4, D)
    a[2, 3], b[1, 0] = np.nan, np.inf
    out = rk.cosine_matrix(a, b, check_finite=False, backend=backend)
    assert out.shape == (5, 4) and out.dtype == np.float32
    rows, cols = [0, 1, 3, 4], [0, 2, 3]
    a_ok, b_ok = a[rows], b[cols]
    ref = cosine_matrix_ref(a_ok, b_ok)
    assert_close(out[np.ix_(rows, cols)], ref, atol=error_bound(naive_cosine_matrix_f32(a_ok, b_ok), ref),
                 name="entries untouched by the NaN/inf rows")


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # NaN arithmetic is the point
def test_check_finite_false_segmented(backend, rng):
    kw = _valid("segmented_cosine", rng)
    kw["queries"][0, 1] = np.nan  # owns docs 0, 1
    kw["docs"][5, 0] = np.inf     # owned by query 2
    out = rk.segmented_cosine(**kw, check_finite=False, backend=backend)
    assert out.shape == (6,) and out.dtype == np.float32
    ok = [2, 3, 4]
    ref = segmented_cosine_ref(**kw)[ok]
    naive = naive_segmented_cosine_f32(kw["queries"], kw["docs"], kw["doc_offsets"])[ok]
    assert_close(out[ok], ref, atol=error_bound(naive, ref), name="docs untouched by NaN/inf")


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # NaN arithmetic is the point
def test_check_finite_false_claim_relevance(backend, rng):
    kw = _valid("claim_relevance", rng)
    del kw["query_doc_sim"]
    kw["doc_emb"][0, 2] = np.nan   # a doc of query 0 (claim 0)
    kw["claim_emb"][4, 0] = -np.inf  # claim 4 (query 2)
    out = rk.claim_relevance(**kw, check_finite=False, backend=backend)
    assert out.shape == (5,) and out.dtype == np.float32
    ok = [1, 2, 3]  # query 1 has no docs: its claims are exactly 0 whatever the others hold
    ref = claim_relevance_ref(**kw)[ok]
    naive = naive_claim_relevance_f32(*kw.values())[ok]
    assert_close(out[ok], ref, atol=error_bound(naive, ref), name="claims untouched by NaN/inf")
    assert np.all(out[[1, 2]] == 0.0)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # NaN arithmetic is the point
def test_check_finite_false_topk(backend, rng):
    kw = _valid("topk_cosine", rng)
    kw["queries"][1, 0] = np.nan
    scores, indices = rk.topk_cosine(**kw, check_finite=False, backend=backend)
    assert scores.shape == (3, 2) and indices.shape == (3, 2)
    assert scores.dtype == np.float32 and indices.dtype == np.int64
    # Rows of the other queries are unaffected and still exact where well defined.
    from helpers import check_topk

    ok = [0, 2]
    check_topk(scores[ok], indices[ok], kw["queries"][ok], kw["corpus"], 2,
               exact_ties=backend != "reference")


# --------------------------------------------------------------------------- shapes


@pytest.mark.parametrize(
    "kernel,arg,partner",
    [("cosine_matrix", "b", "a"), ("cosine_matrix", "a", "b"),
     ("segmented_cosine", "docs", "queries"), ("segmented_cosine", "queries", "docs"),
     ("claim_relevance", "doc_emb", "query_emb"), ("claim_relevance", "claim_emb", "query_emb"),
     ("claim_relevance", "query_emb", "doc_emb"),
     ("topk_cosine", "corpus", "queries"), ("topk_cosine", "queries", "corpus")],
)
def test_dimension_mismatch(backend, rng, kernel, arg, partner):
    kwargs = _valid(kernel, rng)
    kwargs[arg] = random_rows(rng, kwargs[arg].shape[0], D + 1)
    # claim_relevance has three embedding arguments; whichever the check compares against
    # may be the one blamed.
    names = ("query_emb", "doc_emb", "claim_emb") if kernel == "claim_relevance" else (arg, partner)
    with pytest.raises(ValueError, match=_named(*names)):
        _call(kernel, kwargs, backend)


@pytest.mark.parametrize("shape", ["1d", "3d", "0d"])
@pytest.mark.parametrize("kernel,arg", MATRIX_ARGS, ids=[f"{k}-{a}" for k, a in MATRIX_ARGS])
def test_wrong_ndim(backend, rng, kernel, arg, shape):
    kwargs = _valid(kernel, rng)
    x = kwargs[arg]
    kwargs[arg] = {"1d": x[0], "3d": x[None], "0d": np.asarray(x[0, 0])}[shape]
    with pytest.raises(ValueError, match=_named(arg)):
        _call(kernel, kwargs, backend)


@pytest.mark.parametrize("bad", ["2d", "short", "long"])
def test_query_doc_sim_shape(backend, rng, bad):
    kwargs = _valid("claim_relevance", rng)
    sim = kwargs["query_doc_sim"]
    kwargs["query_doc_sim"] = {"2d": sim[None], "short": sim[:-1], "long": np.append(sim, 0.5)}[bad]
    with pytest.raises(ValueError, match=_named("query_doc_sim")):
        _call("claim_relevance", kwargs, backend)


@pytest.mark.parametrize(
    "kernel,args",
    [("cosine_matrix", ("a", "b")), ("segmented_cosine", ("queries", "docs")),
     ("claim_relevance", ("query_emb", "doc_emb", "claim_emb")), ("topk_cosine", ("queries", "corpus"))],
)
def test_empty_dimension(backend, kernel, args):
    kwargs = _valid(kernel, np.random.default_rng(0))
    for name in args:
        kwargs[name] = np.zeros((kwargs[name].shape[0], 0), np.float32)
    if kernel == "claim_relevance":
        kwargs["query_doc_sim"] = None
    with pytest.raises(ValueError, match=_named(*args)):
        _call(kernel, kwargs, backend)


# --------------------------------------------------------------------------- offsets


# Q = 3 in every kernel; docs: 6 rows, claims: 5 rows.
def _bad_offsets(kind: str, rows: int) -> np.ndarray:
    return {
        "too_short": np.array([0, 2, rows], np.int64),
        "too_long": np.array([0, 1, 2, 3, rows], np.int64),
        "first_not_zero": np.array([1, 2, 2, rows], np.int64),
        "decreasing": np.array([0, 3, 2, rows], np.int64),
        "negative": np.array([0, -1, 2, rows], np.int64),
        "last_too_small": np.array([0, 1, 2, rows - 1], np.int64),
        "last_too_large": np.array([0, 1, 2, rows + 1], np.int64),
        "2d": np.array([[0, 1, 2, rows]], np.int64),
    }[kind]


OFFSET_KINDS = ["too_short", "too_long", "first_not_zero", "decreasing", "negative",
                "last_too_small", "last_too_large", "2d"]


@pytest.mark.parametrize("kind", OFFSET_KINDS)
@pytest.mark.parametrize("kernel,arg", OFFSET_ARGS, ids=[f"{k}-{a}" for k, a in OFFSET_ARGS])
def test_bad_offsets(backend, rng, kernel, arg, kind):
    kwargs = _valid(kernel, rng)
    rows = 5 if arg == "claim_offsets" else 6
    kwargs[arg] = _bad_offsets(kind, rows)
    with pytest.raises(ValueError, match=_named(arg)):
        _call(kernel, kwargs, backend)


@pytest.mark.parametrize("kernel,arg", OFFSET_ARGS, ids=[f"{k}-{a}" for k, a in OFFSET_ARGS])
def test_float_offsets_are_a_type_error(backend, rng, kernel, arg):
    kwargs = _valid(kernel, rng)
    kwargs[arg] = kwargs[arg].astype(np.float64)
    with pytest.raises(TypeError, match=_named(arg)):
        _call(kernel, kwargs, backend)


# --------------------------------------------------------------------------- k


@pytest.mark.parametrize("k", [0, -1, 7, 100])
def test_k_out_of_range(backend, rng, k):
    kwargs = _valid("topk_cosine", rng)  # N = 6
    kwargs["k"] = k
    with pytest.raises(ValueError, match=_named("k")):
        _call("topk_cosine", kwargs, backend)


@pytest.mark.parametrize("k", [2.0, 2.5, "2", None, np.array([2])], ids=["float", "frac", "str", "none", "array"])
def test_k_not_an_int(backend, rng, k):
    kwargs = _valid("topk_cosine", rng)
    kwargs["k"] = k
    with pytest.raises(TypeError, match=_named("k")):
        _call("topk_cosine", kwargs, backend)


def test_numpy_integer_k_is_an_int(backend, rng):
    # np.int64 is an integer (operator.index accepts it); rejecting it would be hostile.
    kwargs = _valid("topk_cosine", rng)
    kwargs["k"] = np.int64(3)
    scores, indices = _call("topk_cosine", kwargs, backend)
    assert scores.shape == (3, 3) and indices.shape == (3, 3)


def test_empty_corpus(backend, rng):
    with pytest.raises(ValueError, match=_named("k")):
        rk.topk_cosine(random_rows(rng, 2, D), np.zeros((0, D), np.float32), 1, backend=backend)


# --------------------------------------------------------------------------- types


@pytest.mark.parametrize("value", ["abc", None, object(), {"x": 1}, np.array([["a"] * D] * 4)],
                         ids=["str", "none", "object", "dict", "str-array"])
@pytest.mark.parametrize("kernel,arg", MATRIX_ARGS, ids=[f"{k}-{a}" for k, a in MATRIX_ARGS])
def test_non_array_is_a_type_error(backend, rng, kernel, arg, value):
    kwargs = _valid(kernel, rng)
    kwargs[arg] = value
    with pytest.raises(TypeError, match=_named(arg)):
        _call(kernel, kwargs, backend)


@pytest.mark.parametrize("kernel,arg", OFFSET_ARGS, ids=[f"{k}-{a}" for k, a in OFFSET_ARGS])
def test_non_array_offsets_are_a_type_error(backend, rng, kernel, arg):
    kwargs = _valid(kernel, rng)
    kwargs[arg] = "0,2,2,6"
    with pytest.raises(TypeError, match=_named(arg)):
        _call(kernel, kwargs, backend)


def test_unknown_backend():
    a = np.ones((2, 3), np.float32)
    with pytest.raises(ValueError, match=_named("backend")):
        rk.cosine_matrix(a, a, backend="fortran")
