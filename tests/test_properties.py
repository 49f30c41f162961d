"""Property tests (hypothesis): every public op on random valid and invalid inputs.

Valid inputs (random shapes with 0, 1 and odd sizes; float16/32/64; C, Fortran, strided,
negative-stride, unaligned, big-endian and pickled arrays; lists; torch CPU tensors): the C++
backend matches the float64 reference, floats within the tolerance earned by a naive float32
implementation (``helpers.error_bound``), discrete outputs exactly (the documented tie-breaks
make them unique). Invalid inputs (every numpy dtype kind, bad CSR offsets, NaN/inf, indices
out of range, wrong shapes and types, huge size arguments): ValueError or TypeError whose
message starts with the argument's name, in the reference and the C++ backend, under a
64 MiB memory budget so that nothing large is ever allocated. Triton is left out (its
interpreter is too slow for this; tests/test_<kernel>.py cover it).

Method faces: MirageDefense(nli="lexical").defend and ClaimConformal.

Budget: the hypothesis profiles of tests/conftest.py ("ci" by default; "thorough" with
``RRAG_HYPOTHESIS_PROFILE=thorough``); ``python tests/run_properties.py`` runs the thorough
profile and prints the examples per op. Test names start with ``test_<op>__`` or carry the op
as their first parameter, which is how that script assigns examples to ops.
"""

from __future__ import annotations

import contextlib
import difflib
import inspect
import math
import pickle
import re

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis", reason="hypothesis is not installed (pip install 'rrag_kernels[test]')")
from helpers import (  # noqa: E402
    assert_close,
    check_reliability,
    check_topk,
    error_bound,
    naive_claim_relevance_f32,
    naive_cosine_matrix_f32,
    naive_segmented_cosine_f32,
    offsets_from_counts,
    to_numpy,
)
from hypothesis import assume, given, note  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from op_cases import OP_CASES, as_plain, assert_same  # noqa: E402

import rrag_kernels as rk  # noqa: E402
from rrag_kernels import reference as ref  # noqa: E402
from rrag_kernels.ops import LABELS, OPCODE_TAGS  # noqa: E402

try:
    from rrag_kernels import _core  # noqa: F401

    _CORE_ERROR = None
except Exception as exc:  # pragma: no cover - a broken build
    _CORE_ERROR = f"{type(exc).__name__}: {exc}"
pytestmark = pytest.mark.skipif(_CORE_ERROR is not None, reason=f"cpp backend unavailable: {_CORE_ERROR}")

torch = pytest.importorskip("torch", reason="torch is not importable", exc_type=ImportError)

BACKENDS = st.sampled_from(["reference", "cpp"])
SEEDS = st.integers(0, 2**32 - 1)
FLOAT_DTYPES = st.sampled_from([np.float16, np.float32, np.float64])

# --------------------------------------------------------------------------- presentations

# How an array reaches an op. Embeddings take arrays and tensors only; other arguments lists too.
ARRAY_FORMS = ("plain", "fortran", "strided", "reversed", "pickled", "big_endian", "unaligned", "torch",
               "torch_strided")
LIST_FORMS = ARRAY_FORMS + ("list", "tuple")
INT_FORMS = LIST_FORMS + ("int32", "int16", "uint8", "uint64", "torch_int32")


def present(x: np.ndarray, form: str):
    """``x`` as the caller hands it over (same values; the dtype may widen or narrow only
    where every value fits)."""
    x = np.asarray(x)
    every = tuple(slice(None, None, -1) for _ in x.shape)
    if form == "plain":
        return np.ascontiguousarray(x)
    if form == "fortran":
        return np.asfortranarray(x)
    if form == "strided":
        buf = np.zeros(tuple(2 * s + 1 for s in x.shape), dtype=x.dtype)
        view = buf[tuple(slice(1, None, 2) for _ in x.shape)]
        view[...] = x
        return view
    if form == "reversed":  # negative strides on every axis
        return np.ascontiguousarray(x[every])[every]
    if form == "pickled":
        return pickle.loads(pickle.dumps(x, protocol=pickle.HIGHEST_PROTOCOL))
    if form == "big_endian":
        return x.astype(x.dtype.newbyteorder(">"))
    if form == "unaligned":  # and read-only
        return np.frombuffer(b"\0" + np.ascontiguousarray(x).tobytes(), dtype=x.dtype, offset=1).reshape(x.shape)
    if form == "torch":
        return torch.from_numpy(np.ascontiguousarray(x))
    if form == "torch_strided":
        return torch.from_numpy(present(x, "strided"))
    if form == "list":
        return x.tolist()
    if form == "tuple":
        return tuple(x.tolist())
    if form == "torch_int32":
        return torch.from_numpy(x.astype(np.int32))
    if form in ("int32", "int16", "uint8", "uint64"):
        return x.astype(form)
    raise AssertionError(form)


def int_form(x: np.ndarray):
    """A strategy of the integer presentations every value of ``x`` fits into."""
    lo, hi = (int(x.min()), int(x.max())) if x.size else (0, 0)
    ok = []
    for f in INT_FORMS:
        if f == "int16" and not (-(2**15) <= lo and hi < 2**15):
            continue
        if f == "uint8" and not (0 <= lo and hi < 256):
            continue
        if f == "uint64" and lo < 0:
            continue
        if f in ("int32", "torch_int32") and not (-(2**31) <= lo and hi < 2**31):
            continue
        if f == "tuple" and x.ndim != 1:
            continue
        ok.append(f)
    return st.sampled_from(ok)


def is_tensor(x) -> bool:
    return isinstance(x, torch.Tensor)


def np64(x) -> np.ndarray:
    return np.asarray(to_numpy(x) if is_tensor(x) else x, dtype=np.float64)


def np32(x) -> np.ndarray:
    """An embedding as the op sees it: float32 (torch tensors converted as the op does)."""
    if is_tensor(x):
        return x.to(torch.float32).numpy()
    return np.asarray(x, dtype=np.float32)


def check_output_type(out, inputs) -> None:
    """Output type follows input: a torch tensor in, torch out; numpy otherwise."""
    want = torch.Tensor if any(is_tensor(x) for x in inputs) else np.ndarray
    assert isinstance(out, want), f"expected {want.__name__} output, got {type(out).__name__}"


def draw_present(data, x, forms, label):
    if np.ndim(x) == 2 and np.size(x) == 0:  # an empty list is 1-d: no list form of (0, C)
        forms = tuple(f for f in forms if f not in ("list", "tuple"))
    form = data.draw(st.sampled_from(forms), label=f"{label} form")
    return present(x, form)


# --------------------------------------------------------------------------- value strategies

SIZES = st.one_of(st.sampled_from([0, 1, 2, 3, 7, 8, 9, 16, 17]), st.integers(0, 33))
POSITIVE_SIZES = st.one_of(st.sampled_from([1, 2, 3, 7, 8, 9, 16, 17]), st.integers(1, 33))
DIMS = st.one_of(st.sampled_from([1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33]), st.integers(1, 70))


@st.composite
def embeddings(draw, n: int, d: int, dtype=None):
    """(n, d) rows: Gaussian with per-row norms 1e-15..1e15 (1e-3..1e2 in float16), exact
    zero rows, repeated rows (exact score ties) or small integers (exact ties, cancellation)."""
    dtype = dtype if dtype is not None else draw(FLOAT_DTYPES, label="dtype")
    rng = np.random.default_rng(draw(SEEDS, label="seed"))
    mode = draw(st.sampled_from(["gauss", "zeros", "repeats", "ints"]), label="rows")
    scales = np.array([1e-3, 1.0, 1e2] if dtype is np.float16 else [1e-15, 1e-6, 1.0, 1e6, 1e15])
    x = rng.standard_normal((n, d)) * rng.choice(scales, size=(n, 1))
    if mode == "zeros" and n:
        x[rng.uniform(size=n) < 0.4] = 0.0
    elif mode == "repeats" and n:
        x = x[rng.integers(0, max(1, n // 2), size=n)]
    elif mode == "ints":
        x = rng.integers(-2, 3, size=(n, d)).astype(np.float64)
    return x.astype(dtype)


def counts(max_segments: int = 8, max_count: int = 6, min_segments: int = 0):
    return st.lists(st.one_of(st.just(0), st.integers(0, max_count)), min_size=min_segments, max_size=max_segments)


# --------------------------------------------------------------------------- error checks


def _names(names) -> list[str]:
    return [names] if isinstance(names, str) else list(names)


def assert_named_error(fn, names, types=(ValueError, TypeError)):
    """``fn()`` raises one of ``types`` whose message starts with ``"<name>:"`` for one of
    ``names``; any other outcome (no error, another exception) fails with what happened."""
    names = _names(names)
    try:
        fn()
    except types as exc:
        msg = str(exc)
        pattern = r"^(" + "|".join(re.escape(n) for n in names) + r"):"
        assert re.match(pattern, msg), f"{type(exc).__name__} does not start with {' or '.join(names)}: {msg!r}"
        return exc
    except Exception as exc:
        raise AssertionError(f"expected {[t.__name__ for t in types]} naming {names}, got "
                             f"{type(exc).__name__}: {exc}") from exc
    raise AssertionError(f"expected an error naming {names}, but the call returned")


@contextlib.contextmanager
def small_budget(nbytes: int = 64 << 20):
    """A 64 MiB memory budget: a size argument that slips through allocates at most that."""
    before = rk.get_memory_budget()
    rk.set_memory_budget(nbytes)
    try:
        yield
    finally:
        rk.set_memory_budget(before)


def plain(result):
    """A result with every torch tensor as numpy (for exact comparisons)."""
    result = as_plain(result)
    if isinstance(result, dict):
        return {k: plain(v) for k, v in result.items()}
    if isinstance(result, tuple):
        return tuple(plain(v) for v in result)
    return to_numpy(result) if is_tensor(result) else result


# =========================================================================== valid inputs: embeddings


@given(data=st.data())
def test_cosine_matrix__matches_reference(data):
    n, m, d = data.draw(SIZES, label="n"), data.draw(SIZES, label="m"), data.draw(DIMS, label="d")
    a = draw_present(data, data.draw(embeddings(n, d), label="a"), ARRAY_FORMS, "a")
    b = draw_present(data, data.draw(embeddings(m, d), label="b"), ARRAY_FORMS, "b")
    out = rk.cosine_matrix(a, b, backend="cpp")
    check_output_type(out, (a, b))
    out = to_numpy(out)
    assert out.dtype == np.float32 and out.shape == (n, m)
    a32, b32 = np32(a), np32(b)
    want = ref.cosine_matrix_ref(a32, b32)
    assert_close(out, want, atol=error_bound(naive_cosine_matrix_f32(a32, b32), want), name="cosine_matrix")
    assert_close(to_numpy(rk.cosine_matrix(a, b, backend="reference")), want, atol=1e-7, name="reference backend")


@given(data=st.data())
def test_segmented_cosine__matches_reference(data):
    c = np.array(data.draw(counts(), label="counts"), dtype=np.int64)
    off = offsets_from_counts(c)
    d = data.draw(DIMS, label="d")
    q = draw_present(data, data.draw(embeddings(len(c), d), label="queries"), ARRAY_FORMS, "queries")
    docs = draw_present(data, data.draw(embeddings(int(off[-1]), d), label="docs"), ARRAY_FORMS, "docs")
    off_in = present(off, data.draw(int_form(off), label="offsets form"))
    out = rk.segmented_cosine(q, docs, off_in, backend="cpp")
    check_output_type(out, (q, docs, off_in))
    out = to_numpy(out)
    assert out.dtype == np.float32 and out.shape == (int(off[-1]),)
    q32, d32 = np32(q), np32(docs)
    want = ref.segmented_cosine_ref(q32, d32, off)
    assert_close(out, want, atol=error_bound(naive_segmented_cosine_f32(q32, d32, off), want), name="segmented_cosine")


@given(data=st.data())
def test_claim_relevance__matches_reference(data):
    dc = np.array(data.draw(counts(), label="doc counts"), dtype=np.int64)
    cc = np.array(data.draw(counts(min_segments=len(dc), max_segments=len(dc)), label="claim counts"), dtype=np.int64)
    d_off, c_off = offsets_from_counts(dc), offsets_from_counts(cc)
    d = data.draw(DIMS, label="d")
    n_docs = int(d_off[-1])
    q = draw_present(data, data.draw(embeddings(len(dc), d), label="query_emb"), ARRAY_FORMS, "query_emb")
    docs = draw_present(data, data.draw(embeddings(n_docs, d), label="doc_emb"), ARRAY_FORMS, "doc_emb")
    claims = draw_present(data, data.draw(embeddings(int(c_off[-1]), d), label="claim_emb"), ARRAY_FORMS, "claim_emb")
    sim = None
    if data.draw(st.booleans(), label="query_doc_sim given"):
        rng = np.random.default_rng(data.draw(SEEDS))
        sim = present(rng.uniform(-1, 1, n_docs).astype(data.draw(FLOAT_DTYPES)), data.draw(st.sampled_from(ARRAY_FORMS)))
    clip = data.draw(st.booleans(), label="clip")
    d_in = present(d_off, data.draw(int_form(d_off)))
    c_in = present(c_off, data.draw(int_form(c_off)))
    out = rk.claim_relevance(q, docs, d_in, claims, c_in, query_doc_sim=sim, clip=clip, backend="cpp")
    check_output_type(out, (q, docs, d_in, claims, c_in, sim))
    out = to_numpy(out)
    assert out.dtype == np.float32 and out.shape == (int(c_off[-1]),)
    args = (np32(q), np32(docs), d_off, np32(claims), c_off)
    sim32 = None if sim is None else np32(sim)
    want = ref.claim_relevance_ref(*args, query_doc_sim=sim32, clip=clip)
    naive = naive_claim_relevance_f32(*args, query_doc_sim=sim32, clip=clip)
    assert_close(out, want, atol=error_bound(naive, want), name="claim_relevance")


@given(data=st.data())
def test_topk_cosine__matches_reference(data):
    n_q, n, d = data.draw(SIZES, label="Q"), data.draw(POSITIVE_SIZES, label="N"), data.draw(DIMS, label="d")
    k = data.draw(st.one_of(st.sampled_from([1, n]), st.integers(1, n)), label="k")
    q = draw_present(data, data.draw(embeddings(n_q, d), label="queries"), ARRAY_FORMS, "queries")
    corpus = draw_present(data, data.draw(embeddings(n, d), label="corpus"), ARRAY_FORMS, "corpus")
    scores, indices = rk.topk_cosine(q, corpus, k, backend="cpp")
    check_output_type(scores, (q, corpus))
    check_topk(to_numpy(scores), to_numpy(indices), np32(q), np32(corpus), k)


def _credibility(data, n):
    rng = np.random.default_rng(data.draw(SEEDS, label="credibility seed"))
    if data.draw(st.booleans(), label="integer credibility"):  # ties in R
        return rng.integers(0, 11, size=n)
    return rng.uniform(0, 10, size=n)


@given(data=st.data())
def test_triple_reliability__matches_reference(data):
    b, t, d = data.draw(SIZES, label="B"), data.draw(SIZES, label="T"), data.draw(DIMS, label="d")
    k = data.draw(st.integers(1, t + 3), label="k")
    alpha = data.draw(st.one_of(st.sampled_from([0.0, 0.4, 1.0]), st.floats(0, 1)), label="alpha")
    q = draw_present(data, data.draw(embeddings(b, d), label="query_emb"), ARRAY_FORMS, "query_emb")
    tr = draw_present(data, data.draw(embeddings(t, d), label="triple_emb"), ARRAY_FORMS, "triple_emb")
    cred = _credibility(data, t)
    used = None
    if data.draw(st.booleans(), label="used given"):
        used = np.random.default_rng(data.draw(SEEDS)).uniform(size=(b, t)) < data.draw(st.sampled_from([0.0, 0.3, 1.0]))
    cred_in = draw_present(data, cred, LIST_FORMS, "credibility")
    used_in = None if used is None else draw_present(data, used, ARRAY_FORMS + ("list",), "used")
    scores, indices = rk.triple_reliability(q, tr, cred_in, alpha=alpha, used=used_in, k=k, backend="cpp")
    check_output_type(scores, (q, tr, cred_in, used_in))
    q32, t32 = np32(q), np32(tr)
    full = ref.triple_reliability_ref(q32, t32, np64(cred), alpha=alpha, used=used, k=max(t, 1))
    check_reliability(to_numpy(scores), to_numpy(indices), full, q32, t32, np64(cred), alpha, k)


@given(data=st.data())
def test_triple_reliability_segmented__matches_reference(data):
    c = np.array(data.draw(counts(max_segments=5, max_count=9), label="counts"), dtype=np.int64)
    off = offsets_from_counts(c)
    n_q, t = len(c), int(off[-1])
    b = data.draw(st.integers(0, 6), label="B") if n_q else 0
    d = data.draw(DIMS, label="d")
    k = data.draw(st.integers(1, 12), label="k")
    alpha = data.draw(st.one_of(st.sampled_from([0.0, 0.4, 1.0]), st.floats(0, 1)), label="alpha")
    rng = np.random.default_rng(data.draw(SEEDS))
    cq = rng.integers(0, max(n_q, 1), size=b).astype(np.int64)
    q = draw_present(data, data.draw(embeddings(b, d), label="query_emb"), ARRAY_FORMS, "query_emb")
    tr = draw_present(data, data.draw(embeddings(t, d), label="triple_emb"), ARRAY_FORMS, "triple_emb")
    cred = _credibility(data, t)
    used = rng.uniform(size=int(c[cq].sum())) < 0.3 if data.draw(st.booleans(), label="used given") else None
    args = [draw_present(data, cred, LIST_FORMS, "credibility"), present(off, data.draw(int_form(off))),
            present(cq, data.draw(int_form(cq)))]
    used_in = None if used is None else draw_present(data, used, LIST_FORMS, "used")
    scores, indices = rk.triple_reliability_segmented(q, tr, *args, alpha=alpha, used=used_in, k=k, backend="cpp")
    check_output_type(scores, (q, tr, *args, used_in))
    q32, t32 = np32(q), np32(tr)
    full = ref.triple_reliability_segmented_ref(q32, t32, np64(cred), off, cq, alpha=alpha, used=used,
                                                k=max(int(c.max(initial=0)), 1))
    check_reliability(to_numpy(scores), to_numpy(indices), full, q32, t32, np64(cred), alpha, k)


# =========================================================================== valid inputs: discrete ops

# Characters that stress the tokenizer: ASCII letters/digits, apostrophes (both kinds),
# separators, non-ASCII letters whose lower case is ASCII (Kelvin sign) or longer (İ), lone
# surrogates, NUL.
_TEXT_CHARS = st.one_of(st.sampled_from(list("aZ09 '’-.\n\t\0") + ["\u212a", "\u0130", "é", "ß", "\ud800", "\udfff"]),
                        st.characters())


@given(texts=st.lists(st.text(_TEXT_CHARS, max_size=24), max_size=8), as_tuple=st.booleans())
def test_claim_token_ids__cpp_equals_reference(texts, as_tuple):
    arg = tuple(texts) if as_tuple else texts
    assert_same(rk.claim_token_ids(arg, backend="cpp"), rk.claim_token_ids(arg, backend="reference"))


def _pair_inputs(data):
    n = data.draw(st.integers(0, 12), label="N")
    vocab = data.draw(st.lists(st.integers(-(2**63), 2**63 - 1), min_size=1, max_size=7, unique=True), label="vocab")
    seqs = data.draw(st.lists(st.lists(st.integers(0, len(vocab) - 1), max_size=6), min_size=n, max_size=n))
    ids = np.array([vocab[t] for s in seqs for t in s], dtype=np.int64)
    off = offsets_from_counts([len(s) for s in seqs])
    src = np.array(data.draw(st.lists(st.integers(-2, 3), min_size=n, max_size=n), label="sources"), dtype=np.int64)
    return ids, off, src


@given(data=st.data())
def test_select_pairs__cpp_equals_reference(data):
    ids, off, src = _pair_inputs(data)
    tau = data.draw(st.one_of(st.sampled_from([0.0, 0.5, 0.62, 2 / 3, 1.0]), st.floats(0, 1)), label="tau")
    max_pairs = data.draw(st.one_of(st.none(), st.integers(0, 30), st.sampled_from([2**62, 2**63 - 1])), label="max_pairs")
    args = [present(x, data.draw(int_form(x))) for x in (ids, off, src)]
    got = rk.select_pairs(*args, tau=tau, max_pairs=max_pairs, backend="cpp")
    check_output_type(got.i, args)
    want = rk.select_pairs(ids, off, src, tau=tau, max_pairs=max_pairs, backend="reference")
    assert_same(plain(got), tuple(want))
    assert np.all(want.i < want.j) and np.all(src[want.i] != src[want.j])


def _edges(data, n, max_edges=20):
    if n < 2:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    e = data.draw(st.integers(0, max_edges), label="E")
    rng = np.random.default_rng(data.draw(SEEDS, label="edge seed"))
    i = rng.integers(0, n, size=e)
    j = (i + rng.integers(1, n, size=e)) % n
    return i.astype(np.int64), j.astype(np.int64)


# Probabilities on a grid give exact ties between w_supp and w_contr (ignored edges).
_PROB = st.one_of(st.sampled_from([0.0, 0.25, 0.5, 0.75, 1.0, 1 / 3]), st.floats(0, 1))


@given(data=st.data())
def test_nli_graph__cpp_equals_reference(data):
    n = data.draw(st.integers(0, 10), label="n_claims")
    i, j = _edges(data, n)
    fwd, bwd = (np.array(data.draw(st.lists(st.tuples(_PROB, _PROB, _PROB), min_size=len(i), max_size=len(i))),
                         dtype=np.float64).reshape(len(i), 3) for _ in range(2))
    order = data.draw(st.permutations(LABELS), label="label_order")
    label_order = dict(enumerate(order)) if data.draw(st.booleans()) else tuple(order)
    reduce = data.draw(st.sampled_from(["max", "mean"]), label="reduce")
    args = [present(x, data.draw(int_form(x))) for x in (i, j)]
    args += [draw_present(data, x.astype(data.draw(st.sampled_from([np.float32, np.float64]))), LIST_FORMS, "probs")
             for x in (fwd, bwd)]
    got = rk.nli_graph(*args, n, label_order=label_order, reduce=reduce, backend="cpp")
    check_output_type(got.kind, args)
    want = rk.nli_graph(i, j, np64(args[2]), np64(args[3]), n, label_order=label_order, reduce=reduce,
                        backend="reference")
    assert_same(plain(got), tuple(want))


# Multiples of 1/4 make exact gain ties (lowest index wins); floats make the rest.
_VALUE = st.one_of(st.sampled_from([-2.0, -1.0, -0.5, -0.25, 0.0, 0.25, 0.5, 1.0, 2.0]), st.floats(-3, 3))


@given(data=st.data())
def test_greedy_prune__cpp_equals_reference(data):
    n = data.draw(st.integers(0, 12), label="N")
    i, j = _edges(data, n)
    scores = np.array(data.draw(st.lists(_VALUE, min_size=n, max_size=n)), dtype=np.float64)
    w = np.array(data.draw(st.lists(_VALUE, min_size=len(i), max_size=len(i))), dtype=np.float64)
    pen = np.abs(np.array(data.draw(st.lists(_VALUE, min_size=n, max_size=n)))) if data.draw(st.booleans()) else None
    args = [draw_present(data, scores, LIST_FORMS, "node_scores"), present(i, data.draw(int_form(i))),
            present(j, data.draw(int_form(j))), draw_present(data, w, LIST_FORMS, "edge_weight")]
    pen_in = None if pen is None else draw_present(data, pen, LIST_FORMS, "self_penalty")
    got = rk.greedy_prune(*args, self_penalty=pen_in, backend="cpp")
    check_output_type(got.keep, (*args, pen_in))
    want = rk.greedy_prune(scores, i, j, w, self_penalty=pen, backend="reference")
    assert_same(plain(got), tuple(want))
    assert sorted(want.removal_order.tolist()) == np.flatnonzero(~want.keep).tolist()


@given(data=st.data())
def test_gate_stats__cpp_equals_reference(data):
    n = data.draw(st.integers(0, 12), label="N")
    i, j = _edges(data, n)
    rng = np.random.default_rng(data.draw(SEEDS))
    keep = rng.uniform(size=n) < data.draw(st.sampled_from([0.0, 0.5, 1.0]))
    kind = rng.integers(-1, 2, size=len(i)).astype(np.int8)
    dom = rng.integers(-2, 4, size=n).astype(np.int64)
    eps = data.draw(st.one_of(st.sampled_from([0.0, 1e-9, 1.0]), st.floats(0, 10)), label="eps")
    count_unknown = data.draw(st.booleans(), label="count_unknown")
    args = [draw_present(data, keep, LIST_FORMS, "keep")] + [present(x, data.draw(int_form(x))) for x in (i, j, kind, dom)]
    got = rk.gate_stats(*args, eps=eps, count_unknown=count_unknown, backend="cpp")
    want = rk.gate_stats(keep, i, j, kind, dom, eps=eps, count_unknown=count_unknown, backend="reference")
    assert_same(got, want)
    assert want["n_kept"] == int(keep.sum())


@given(data=st.data())
def test_lexical_opcodes__cpp_equals_reference_and_difflib(data):
    n = data.draw(st.integers(0, 6), label="pairs")
    seq = st.lists(st.integers(0, 3), max_size=9)
    a = data.draw(st.lists(seq, min_size=n, max_size=n), label="a")
    b = data.draw(st.lists(seq, min_size=n, max_size=n), label="b")
    ta, tb = np.array(sum(a, []), dtype=np.int64), np.array(sum(b, []), dtype=np.int64)
    oa, ob = offsets_from_counts([len(s) for s in a]), offsets_from_counts([len(s) for s in b])
    trim = data.draw(st.booleans(), label="trim_affixes")
    args = [present(x, data.draw(int_form(x))) for x in (ta, oa, tb, ob)]
    got = rk.lexical_opcodes(*args, trim_affixes=trim, backend="cpp")
    check_output_type(got.ops, args)
    want = rk.lexical_opcodes(ta, oa, tb, ob, trim_affixes=trim, backend="reference")
    assert_same(plain(got), tuple(want))
    if not trim:
        for p in range(n):
            rows = want.ops[want.op_offsets[p]:want.op_offsets[p + 1]]
            expect = difflib.SequenceMatcher(None, a[p], b[p], autojunk=False).get_opcodes()
            assert [(OPCODE_TAGS[r[0]], *map(int, r[1:])) for r in rows] == expect


# Claims with exact score ties and infinite scores (allowed; NaN is not).
_SCORE = st.one_of(st.sampled_from([0.0, 0.5, 1.0, -1.0, np.inf, -np.inf]), st.floats(-10, 10))


def _claims(data, min_responses=0, max_responses=10):
    c = np.array(data.draw(counts(max_segments=max_responses, max_count=6, min_segments=min_responses)), dtype=np.int64)
    off = offsets_from_counts(c)
    s = np.array(data.draw(st.lists(_SCORE, min_size=int(off[-1]), max_size=int(off[-1])), label="scores"))
    ok = np.array(data.draw(st.lists(st.booleans(), min_size=len(s), max_size=len(s)), label="labels_ok"), dtype=bool)
    return s.astype(np.float64), ok, off


_A = st.one_of(st.sampled_from([1.0, 0.5, 0.8]), st.floats(0, 1, exclude_min=True))
_SENTINEL = st.sampled_from([-np.inf, -100000.0, -1.0])


@given(data=st.data())
def test_r_scores__cpp_equals_reference(data):
    s, ok, off = _claims(data)
    a, sentinel = data.draw(_A, label="a"), data.draw(_SENTINEL, label="sentinel")
    args = [draw_present(data, s, LIST_FORMS, "scores"), draw_present(data, ok, LIST_FORMS, "labels_ok"),
            present(off, data.draw(int_form(off)))]
    got = rk.r_scores(*args, a=a, sentinel=sentinel, backend="cpp")
    want = ref.r_scores_ref(s, ok, off, a, sentinel)
    assert_same(got, want)
    assert_same(rk.r_scores(s, ok, off, a=a, sentinel=sentinel, backend="reference"), want)


_ALPHA = st.one_of(st.sampled_from([0.05, 0.1, 0.5, 0.9]), st.floats(0, 1, exclude_min=True, exclude_max=True))


@given(data=st.data())
def test_conformal_quantile__is_the_kth_smallest(data):
    r = np.array(data.draw(st.lists(_SCORE, min_size=1, max_size=40), label="r"), dtype=np.float64)
    alphas = data.draw(st.one_of(_ALPHA, st.lists(_ALPHA, max_size=4)), label="alpha")
    backend = data.draw(BACKENDS, label="backend")
    r_in = draw_present(data, r, LIST_FORMS, "r")
    got = rk.conformal_quantile(r_in, alphas, backend=backend)
    srt = np.sort(r)
    want = []
    for alpha in np.atleast_1d(alphas).tolist():
        k = math.ceil((len(r) + 1) * (1 - alpha))  # k-th smallest; +inf when k > n
        want.append(srt[k - 1] if k <= len(r) else np.inf)
    if isinstance(alphas, float):
        assert isinstance(got, float) and got == want[0]
    else:
        assert_same(got, np.array(want, dtype=np.float64))
        k_all = [math.ceil((len(r) + 1) * (1 - x)) for x in alphas]
        if any(k > len(r) for k in k_all):
            assert_named_error(lambda: rk.conformal_quantile(r, alphas, on_too_few="raise", backend=backend), "alpha",
                               (ValueError,))


@given(data=st.data())
def test_conformal_sweep__cpp_equals_reference(data):
    s, ok, off = _claims(data, min_responses=2, max_responses=12)
    n = len(off) - 1
    m = data.draw(st.integers(1, n - 1), label="calibration size")
    cf = (m + 0.5) / n
    groups = None
    if data.draw(st.booleans(), label="groups"):
        groups = np.array(data.draw(st.lists(st.sampled_from(["a", "b", "c"]), min_size=n, max_size=n)))
    kw = dict(alphas=data.draw(st.lists(_ALPHA, min_size=1, max_size=3), label="alphas"),
              n_splits=data.draw(st.integers(0, 6), label="n_splits"), calib_fraction=cf,
              seed=data.draw(st.integers(0, 2**64 - 1), label="seed"), a=data.draw(_A, label="a"),
              sentinel=data.draw(_SENTINEL, label="sentinel"), groups=groups)
    args = [draw_present(data, s, LIST_FORMS, "scores"), draw_present(data, ok, LIST_FORMS, "labels_ok"),
            present(off, data.draw(int_form(off)))]
    assert_same(rk.conformal_sweep(*args, **kw, backend="cpp"), rk.conformal_sweep(s, ok, off, **kw, backend="reference"))


@given(data=st.data())
def test_beam_step__cpp_equals_reference(data):
    c = np.array(data.draw(counts(max_segments=5, max_count=4)), dtype=np.int64)
    off = offsets_from_counts(c)
    b = int(off[-1])
    n_choices = data.draw(st.integers(1, 5), label="C")
    rng = np.random.default_rng(data.draw(SEEDS))
    probs = rng.choice([0.0, 1e-5, 0.125, 0.25, 0.5, 1.0, np.nan], size=(b, n_choices))
    if data.draw(st.booleans(), label="continuous probabilities"):
        probs = np.where(np.isnan(probs), np.nan, rng.uniform(size=probs.shape))
    probs[rng.uniform(size=b) < 0.1] = np.nan
    parent = 2.0 ** -rng.integers(0, 4, size=b).astype(np.float64)
    fin = rng.uniform(size=b) < 0.2
    nc = rng.integers(0, n_choices, size=b).astype(np.int64)
    kw = dict(beams=data.draw(st.one_of(st.integers(1, 6), st.just(2**62)), label="beams"),
              min_prob=data.draw(st.sampled_from([0.0, 1e-4, 0.25, 1.0]), label="min_prob"),
              max_chains=data.draw(st.one_of(st.integers(1, 8), st.just(2**62), st.just(10**30)), label="max_chains"))
    args = [draw_present(data, parent, LIST_FORMS, "parent_scores"), draw_present(data, fin, LIST_FORMS, "finished"),
            draw_present(data, probs, LIST_FORMS, "choice_probs"), present(nc, data.draw(int_form(nc))),
            present(off, data.draw(int_form(off)))]
    got = rk.beam_step(*args, **kw, backend="cpp")
    check_output_type(got.parent, args)
    assert_same(plain(got), tuple(rk.beam_step(parent, fin, probs, nc, off, **kw, backend="reference")))


# =========================================================================== invalid inputs

# The valid case of each op (tests/op_cases.py) with its arguments by name.
OPS = sorted(OP_CASES)


def named_case(op: str, seed: int) -> dict:
    inputs, kwargs = OP_CASES[op](np.random.default_rng(seed))
    params = list(inspect.signature(getattr(rk, op)).parameters)
    return {**dict(zip(params, inputs)), **kwargs}


def call(op: str, args: dict, backend: str):
    return getattr(rk, op)(**args, backend=backend)


# Float arguments that take floating-point dtypes only (integers are a TypeError too).
FLOAT_ONLY = {"a", "b", "queries", "docs", "corpus", "query_emb", "doc_emb", "claim_emb", "query_doc_sim",
              "triple_emb", "probs_fwd", "probs_bwd", "choice_probs"}


def _array_args(op: str) -> list[str]:
    case = named_case(op, 0)
    return [k for k, v in case.items() if isinstance(v, np.ndarray) or (isinstance(v, list) and k != "texts")]


ARRAY_ARGS = [(op, arg) for op in OPS for arg in _array_args(op)]


def _category(op: str, arg: str) -> str:
    v = np.asarray(named_case(op, 0)[arg])
    if v.dtype.kind == "f":
        return "float_only" if arg in FLOAT_ONLY else "float"
    return {"b": "bool", "i": "int", "u": "int"}[v.dtype.kind]


_BAD_KINDS = {
    "float_only": "biucOUSMmV",
    "float": "bcOUSMmV",
    "int": "fbcOUSMmV",
    "bool": "iufcOUSMmV",
}


def with_kind(x, kind: str, as_torch: bool):
    """An array of x's shape and dtype kind ``kind`` (numpy or torch)."""
    base = np.asarray(x)
    shape = base.shape
    out = {
        "b": lambda: base != 0,
        "i": lambda: np.nan_to_num(base, posinf=0, neginf=0).astype(np.int64),
        "u": lambda: np.ones(shape, np.uint8),
        "f": lambda: base.astype(np.float64),
        "c": lambda: base.astype(np.complex128),
        "O": lambda: base.astype(object),
        "U": lambda: base.astype(str),
        "S": lambda: base.astype("S6"),
        "M": lambda: np.zeros(shape, "datetime64[s]"),
        "m": lambda: np.zeros(shape, "timedelta64[ms]"),
        "V": lambda: np.zeros(shape, "V8"),
    }[kind]()
    if as_torch and kind in "biufc":
        return torch.from_numpy(np.ascontiguousarray(out))
    return out


@pytest.mark.parametrize("op,arg", ARRAY_ARGS, ids=[f"{o}-{a}" for o, a in ARRAY_ARGS])
@given(data=st.data())
def test_every_dtype_kind_is_rejected_by_name(op, arg, data):
    args = named_case(op, data.draw(SEEDS, label="case"))
    kind = data.draw(st.sampled_from(_BAD_KINDS[_category(op, arg)]), label="kind")
    args[arg] = with_kind(args[arg], kind, data.draw(st.booleans(), label="torch"))
    backend = data.draw(BACKENDS, label="backend")
    with small_budget():
        assert_named_error(lambda: call(op, args, backend), arg, (TypeError,))


def _mutations(x) -> list[str]:
    arr = np.asarray(x)
    out = ["add_axis", "to_scalar", "none", "str", "dict", "set", "ragged_list"]
    if arr.ndim >= 1:
        out += ["append"] + (["drop"] if arr.shape[0] else [])
    if arr.ndim == 2:
        out += ["flatten", "drop_column"]
    return out


def mutate(x, how: str, rng):
    arr = np.asarray(x)
    if how == "add_axis":
        return arr[..., None]
    if how == "to_scalar":
        return arr.reshape(-1)[:1].reshape(()) if arr.size else np.zeros((), arr.dtype)
    if how == "none":
        return None
    if how == "str":
        return "0, 1"
    if how == "dict":
        return {0: 1}
    if how == "set":
        return {0, 1}
    if how == "ragged_list":
        return [[0], [0, 1]] if arr.ndim != 1 or arr.shape[0] < 2 else [arr[0].tolist(), arr[1:].tolist()]
    if how == "append":
        return np.concatenate([arr, arr[:1] if arr.shape[0] else np.zeros((1,) + arr.shape[1:], arr.dtype)])
    if how == "drop":
        return arr[:-1]
    if how == "flatten":
        return arr.reshape(-1)
    if how == "drop_column":
        return arr[:, :-1]
    raise AssertionError(how)


OPTIONAL = {"query_doc_sim", "used", "self_penalty"}
# A different length may be valid (a free length) or make another argument disagree.
SHAPE_MUTATIONS = {"append", "drop", "drop_column"}


@pytest.mark.parametrize("op,arg", ARRAY_ARGS, ids=[f"{o}-{a}" for o, a in ARRAY_ARGS])
@given(data=st.data())
def test_wrong_shapes_and_types_are_rejected_by_name(op, arg, data):
    seed = data.draw(SEEDS, label="case")
    args = named_case(op, seed)
    how = data.draw(st.sampled_from(_mutations(args[arg])), label="mutation")
    args[arg] = mutate(args[arg], how, np.random.default_rng(seed))
    backend = data.draw(BACKENDS, label="backend")
    with small_budget():
        if how in SHAPE_MUTATIONS or (how == "none" and arg in OPTIONAL):
            # Valid or an error naming one of the op's arguments (lengths are relations).
            try:
                call(op, args, backend)
            except (ValueError, TypeError) as exc:
                names = list(inspect.signature(getattr(rk, op)).parameters)
                assert re.match(r"^(" + "|".join(names) + r"):", str(exc)), f"{type(exc).__name__}: {exc}"
        else:
            assert_named_error(lambda: call(op, args, backend), arg)


OFFSETS_ARGS = [("segmented_cosine", "doc_offsets"), ("claim_relevance", "doc_offsets"),
                ("claim_relevance", "claim_offsets"), ("triple_reliability_segmented", "triple_offsets"),
                ("select_pairs", "token_offsets"), ("lexical_opcodes", "offsets_a"), ("lexical_opcodes", "offsets_b"),
                ("r_scores", "offsets"), ("conformal_sweep", "offsets"), ("beam_step", "chain_offsets")]

OFFSET_MUTATIONS = ("first_negative", "first_positive", "decreasing", "last_too_big", "last_too_small",
                    "last_huge", "middle_negative", "uint64_huge", "float", "bool", "two_d", "int32_decreasing")


def mutate_offsets(off: np.ndarray, how: str, rng) -> object:
    off = off.copy()
    p = int(rng.integers(1, len(off))) if len(off) > 1 else 0
    if how == "first_negative":
        off[0] = -int(rng.choice([1, 2**62]))
    elif how == "first_positive":
        off[0] = 1
    elif how == "decreasing":
        assume(len(off) > 2 and off[-1] > 0)
        q = int(rng.integers(1, len(off) - 1))
        off[q] = off[q + 1] + 1 if off[q + 1] < off[-1] else off[-1] + 1
    elif how == "last_too_big":
        off[-1] += 1
    elif how == "last_too_small":
        assume(off[-1] > 0)
        off[-1] -= 1
    elif how == "last_huge":
        off[-1] = 2**63 - 1
    elif how == "middle_negative":
        assume(len(off) > 2)
        off[p if p < len(off) - 1 else 1] = -1
    elif how == "uint64_huge":
        out = off.astype(np.uint64)
        out[-1] = np.uint64(2**64 - 1)
        return out
    elif how == "float":
        return off.astype(np.float64)
    elif how == "bool":
        return off > 0
    elif how == "two_d":
        return off[:, None]
    elif how == "int32_decreasing":
        assume(len(off) > 2 and off[-1] > 0)
        off[1] = off[-1] + 1
        return off.astype(np.int32)
    return off


@pytest.mark.parametrize("op,arg", OFFSETS_ARGS, ids=[f"{o}-{a}" for o, a in OFFSETS_ARGS])
@given(data=st.data())
def test_bad_csr_offsets_are_rejected_by_name(op, arg, data):
    seed = data.draw(SEEDS, label="case")
    args = named_case(op, seed)
    how = data.draw(st.sampled_from(OFFSET_MUTATIONS), label="mutation")
    bad = mutate_offsets(np.asarray(args[arg], dtype=np.int64), how, np.random.default_rng(seed))
    args[arg] = present(bad, data.draw(st.sampled_from(("plain", "list", "torch") if how != "uint64_huge" else ("plain",))))
    backend = data.draw(BACKENDS, label="backend")
    with small_budget():
        assert_named_error(lambda: call(op, args, backend), arg)


# (op, argument, bad values, backends): the value rules of the float arguments.
_NONFINITE = (np.nan, np.inf, -np.inf)
VALUE_RULES = [
    *[(op, arg, _NONFINITE, ("reference", "cpp")) for op, arg in ARRAY_ARGS if arg in FLOAT_ONLY
      and arg not in ("probs_fwd", "probs_bwd", "choice_probs")],
    # A row whose squared norm overflows float32: the C++ kernels say so (reference: documented NaN-free math).
    *[(op, arg, (1e20, -3e19), ("cpp",)) for op, arg in ARRAY_ARGS if arg in FLOAT_ONLY
      and arg not in ("probs_fwd", "probs_bwd", "choice_probs", "query_doc_sim")],
    ("triple_reliability", "credibility", (*_NONFINITE, -0.5, 10.5), ("reference", "cpp")),
    ("triple_reliability_segmented", "credibility", (*_NONFINITE, -0.5, 10.5), ("reference", "cpp")),
    ("nli_graph", "probs_fwd", (*_NONFINITE, -0.1, 1.5), ("reference", "cpp")),
    ("nli_graph", "probs_bwd", (*_NONFINITE, -0.1, 1.5), ("reference", "cpp")),
    ("greedy_prune", "node_scores", (*_NONFINITE, 2.0**21, -(2.0**21)), ("reference", "cpp")),
    ("greedy_prune", "edge_weight", (*_NONFINITE, 2.0**21), ("reference", "cpp")),
    ("r_scores", "scores", (np.nan,), ("reference", "cpp")),
    ("conformal_sweep", "scores", (np.nan,), ("reference", "cpp")),
    ("conformal_quantile", "r", (np.nan,), ("reference", "cpp")),
    ("beam_step", "parent_scores", (*_NONFINITE, -1.0), ("reference", "cpp")),
    ("beam_step", "choice_probs", (np.inf, -np.inf, -0.1, 1.5), ("reference", "cpp")),
]


@pytest.mark.parametrize("op,arg,values,backends", VALUE_RULES, ids=[f"{r[0]}-{r[1]}-{len(r[2])}" for r in VALUE_RULES])
@given(data=st.data())
def test_bad_float_values_are_rejected_by_name(op, arg, values, backends, data):
    args = named_case(op, data.draw(SEEDS, label="case"))
    x = np.array(args[arg], dtype=np.float64)
    assume(x.size > 0)
    x.flat[data.draw(st.integers(0, x.size - 1), label="position")] = data.draw(st.sampled_from(values), label="value")
    dtype = data.draw(st.sampled_from([np.float32, np.float64]), label="dtype")
    args[arg] = present(x.astype(dtype), data.draw(st.sampled_from(("plain", "reversed", "torch"))))
    backend = data.draw(st.sampled_from(backends), label="backend")
    with small_budget():
        assert_named_error(lambda: call(op, args, backend), arg, (ValueError,))


# (op, argument, how to break it, the names the error may give).
INDEX_RULES = [
    ("nli_graph", "i", "range", ("i",)), ("nli_graph", "j", "range", ("j",)), ("nli_graph", "j", "self", ("i", "j")),
    ("greedy_prune", "edge_i", "range", ("edge_i",)), ("greedy_prune", "edge_j", "range", ("edge_j",)),
    ("greedy_prune", "edge_j", "self", ("edge_i", "edge_j")),
    ("gate_stats", "edge_i", "range", ("edge_i",)), ("gate_stats", "edge_j", "range", ("edge_j",)),
    ("gate_stats", "kind", "kind", ("kind",)),
    ("triple_reliability_segmented", "chain_question", "range", ("chain_question",)),
    ("beam_step", "n_candidates", "range", ("n_candidates",)),
]
_RANGE_OF = {"nli_graph": "n_claims", "greedy_prune": "node_scores", "gate_stats": "keep",
             "triple_reliability_segmented": "triple_offsets", "beam_step": "choice_probs"}


@pytest.mark.parametrize("op,arg,how,names", INDEX_RULES, ids=[f"{r[0]}-{r[1]}-{r[2]}" for r in INDEX_RULES])
@given(data=st.data())
def test_bad_indices_are_rejected_by_name(op, arg, how, names, data):
    args = named_case(op, data.draw(SEEDS, label="case"))
    x = np.array(args[arg], dtype=np.int64)
    assume(x.size > 0)
    p = data.draw(st.integers(0, x.size - 1), label="position")
    ref_arg = args[_RANGE_OF[op]]
    n = {"nli_graph": lambda: ref_arg, "triple_reliability_segmented": lambda: len(ref_arg) - 1,
         "beam_step": lambda: np.asarray(ref_arg).shape[1]}.get(op, lambda: len(ref_arg))()
    if how == "range":
        x[p] = data.draw(st.sampled_from([n, n + 1, -1, 2**62, -(2**63)]), label="value")
    elif how == "self":
        other = "i" if arg == "j" else "edge_i"
        x[p] = np.asarray(args[other])[p]
    else:
        x[p] = data.draw(st.sampled_from([2, -2, 127, -128, 255, 2**40]), label="value")
    args[arg] = present(x, data.draw(int_form(x)))
    backend = data.draw(BACKENDS, label="backend")
    with small_budget():
        assert_named_error(lambda: call(op, args, backend), names, (ValueError,))


# Bad scalar arguments, huge size arguments included, by op: (argument, value, names the error
# may give). A 64 MiB memory budget is in force, so a size that slips through cannot allocate.
_HUGE = [2**62, 2**63, 2**64, 10**30]
_NOT_INT = [True, 2.5, "3", None, np.float64(3.0)]
_NOT_REAL = [True, "0.5", None, 10**400, [0.5]]
_NOT_BOOL = [1, 0, "yes", None, np.float64(1.0)]
BAD_SCALARS = {
    "cosine_matrix": [("check_finite", v, "check_finite") for v in _NOT_BOOL],
    "segmented_cosine": [("check_finite", v, "check_finite") for v in _NOT_BOOL],
    "claim_relevance": [("clip", v, "clip") for v in _NOT_BOOL] + [("check_finite", 1, "check_finite")],
    "topk_cosine": [("k", v, "k") for v in [0, -1, 302, -(2**63), np.int64(2**62), np.uint64(2**64 - 1),
                                            *_HUGE, *_NOT_INT]],
    "triple_reliability": [("k", v, "k") for v in [0, -1, *_HUGE, *_NOT_INT]]
    + [("alpha", v, "alpha") for v in [-0.1, 1.1, np.nan, np.inf, *_NOT_REAL]]
    + [("check_finite", v, "check_finite") for v in _NOT_BOOL],
    "triple_reliability_segmented": [("k", v, "k") for v in [0, -1, *_HUGE, *_NOT_INT]]
    + [("alpha", v, "alpha") for v in [-0.1, 1.1, np.nan, *_NOT_REAL]],
    "claim_token_ids": [("texts", v, "texts") for v in ["a b", None, 3, np.array(["a"]), [b"ab"], ["a", None],
                                                        ["a", 3], iter(["a"])]],
    "select_pairs": [("tau", v, "tau") for v in [-0.1, 1.1, np.nan, np.inf, *_NOT_REAL]]
    + [("max_pairs", v, "max_pairs") for v in [-1, -(2**63), *_NOT_INT[:2], "3"]],
    "nli_graph": [("n_claims", v, ("n_claims", "i", "j")) for v in [-1, 0, 39, *_HUGE, *_NOT_INT]]
    + [("reduce", v, "reduce") for v in ["min", "", None, 1]]
    + [("label_order", v, "label_order") for v in [("a", "b", "c"), "entailment", None, {0: "entailment"},
                                                   ("entailment", "entailment", "neutral"), {"x": 1, "y": 2, "z": 3},
                                                   ("entailment", "neutral", "contradiction", "x")]],
    "greedy_prune": [("self_penalty", v, "self_penalty") for v in ["x", 3.0, {0: 1}]],
    "gate_stats": [("eps", v, "eps") for v in [-1.0, np.nan, np.inf, *_NOT_REAL]]
    + [("count_unknown", v, "count_unknown") for v in _NOT_BOOL],
    "lexical_opcodes": [("trim_affixes", v, "trim_affixes") for v in _NOT_BOOL],
    "r_scores": [("a", v, "a") for v in [0.0, -0.5, 1.5, np.nan, *_NOT_REAL]]
    + [("sentinel", v, "sentinel") for v in [np.nan, *_NOT_REAL]],
    "conformal_quantile": [("alpha", v, "alpha") for v in [0.0, 1.0, -0.1, np.nan, True, "0.1", None, [0.1, 1.0],
                                                           [[0.1]], np.array([0.1, np.nan]), 10**400]]
    + [("on_too_few", v, "on_too_few") for v in ["x", None, True]],
    "conformal_sweep": [("n_splits", v, "n_splits") for v in [-1, *_HUGE, *_NOT_INT]]
    + [("seed", v, "seed") for v in [-1, 2**64, 10**30, *_NOT_INT]]
    + [("calib_fraction", v, "calib_fraction") for v in [0.0, 1.0, -0.1, np.nan, 0.001, *_NOT_REAL]]
    + [("alphas", v, "alphas") for v in [[0.0], [1.0], [np.nan], "x", None, [[0.1]]]]
    + [("a", v, "a") for v in [0.0, 1.5, None]] + [("sentinel", v, "sentinel") for v in [np.nan, None]]
    + [("groups", v, "groups") for v in [[1, 2], np.zeros((70, 2)), [[1], [2, 3]] * 35, [1, None] * 35]],
    "beam_step": [("beams", v, "beams") for v in [0, -1, *_NOT_INT]]
    + [("min_prob", v, "min_prob") for v in [-0.1, 1.1, np.nan, *_NOT_REAL]]
    + [("max_chains", v, "max_chains") for v in [0, -1, -(2**63), *_NOT_INT]],
}
_BAD_BACKENDS = ["gpu", "CPP", "", 1, b"cpp"]


@pytest.mark.parametrize("op", OPS)
@given(data=st.data())
def test_bad_scalars_and_huge_sizes_are_rejected_by_name(op, data):
    args = named_case(op, data.draw(SEEDS, label="case"))
    table = BAD_SCALARS[op] + [("backend", v, "backend") for v in _BAD_BACKENDS]
    arg, value, names = data.draw(st.sampled_from(table), label="argument, value, names")
    backend = data.draw(BACKENDS, label="backend")
    if arg == "backend":
        backend = value
    else:
        args[arg] = value
    with small_budget():
        assert_named_error(lambda: call(op, args, backend), names)


# Huge size arguments that are valid: the same result as the smallest value that means the same.
HUGE_VALID = [
    ("select_pairs", "max_pairs", [2**62, 2**63 - 1, 2**63, 2**64, 10**30], None),
    ("beam_step", "beams", [2**62, 2**63, 10**30], 9),
    ("beam_step", "max_chains", [2**62, 2**63, 10**30], 10**6),
    ("triple_reliability", "k", [2**62, 2**63, 10**30], None),  # with no chains: (0, k) outputs or a named error
]


@pytest.mark.parametrize("op,arg,values,same_as", HUGE_VALID, ids=[f"{r[0]}-{r[1]}" for r in HUGE_VALID])
@given(data=st.data())
def test_huge_valid_sizes_behave_like_small_ones(op, arg, values, same_as, data):
    args = named_case(op, data.draw(SEEDS, label="case"))
    value = data.draw(st.sampled_from(values), label="value")
    backend = data.draw(BACKENDS, label="backend")
    with small_budget():
        if op == "triple_reliability":
            args["query_emb"], args["used"] = args["query_emb"][:0], None
            try:
                scores, indices = call(op, {**args, arg: value}, backend)
            except (ValueError, TypeError) as exc:
                assert str(exc).startswith(f"{arg}:"), f"{type(exc).__name__}: {exc}"
            else:
                assert scores.shape == indices.shape == (0, value)
            return
        got = call(op, {**args, arg: value}, backend)
        want = call(op, {**args, arg: same_as}, backend)
    assert_same(got, want)


@given(labels=st.lists(st.one_of(st.booleans(), st.sampled_from([0, 1, 0.0, 1.0, 2, -1, 0.5, "True", "", None, [1]])),
                      min_size=3, max_size=3), backend=BACKENDS)
def test_r_scores__label_lists_hold_bools_or_0_1(labels, backend):
    """A list of labels is bools or 0/1 (never a string that numpy would read as True)."""
    call_ = lambda: rk.r_scores(np.array([0.3, 0.2, 0.1]), labels, [0, 3], backend=backend)  # noqa: E731
    if all(isinstance(x, (bool, int, float)) and x in (0, 1) for x in labels):
        assert_same(call_(), ref.r_scores_ref(np.array([0.3, 0.2, 0.1]), np.array(labels, dtype=bool), np.array([0, 3])))
    else:
        assert_named_error(call_, "labels_ok")


@given(data=st.data())
def test_r_scores__torch_low_precision_floats(data):
    """bfloat16 (no numpy dtype) scores are read exactly, as float16/32 ones are."""
    s, ok, off = _claims(data, min_responses=1)
    dtype = data.draw(st.sampled_from([torch.bfloat16, torch.float16, torch.float32]), label="dtype")
    t = torch.from_numpy(np.clip(s, -60000, 60000)).to(dtype)
    backend = data.draw(BACKENDS, label="backend")
    want = ref.r_scores_ref(t.to(torch.float64).numpy(), ok, off)
    assert_same(rk.r_scores(t, ok, off, backend=backend), want)
    assert_same(rk.conformal_quantile(t if len(t) else torch.zeros(1, dtype=dtype), [0.3], backend=backend),
                rk.conformal_quantile(t.to(torch.float64).numpy() if len(t) else np.zeros(1), [0.3], backend=backend))


# =========================================================================== method faces

_DEFENSE = []


def _defense():
    if not _DEFENSE:
        from rrag_kernels.pipelines.mirage import MirageDefense

        _DEFENSE.append(MirageDefense(nli="lexical"))
    return _DEFENSE[0]


_WORDS = ["the", "river", "flooded", "in", "1990", "1991", "city", "council", "said", "not", "never", "north",
          "bank", "rain", "Paris", "is", "capital", "of", "France", "Lyon", "."]
_SENTENCE = st.lists(st.sampled_from(_WORDS), max_size=10).map(lambda w: " ".join(w) + ".")
_PASSAGE = st.fixed_dictionaries(
    {"text": st.one_of(st.lists(_SENTENCE, max_size=4).map(" ".join), st.text(_TEXT_CHARS, max_size=40))},
    optional={"url": st.sampled_from(["https://en.wikipedia.org/wiki/X", "http://blog.example.com/a", "", "not a url"]),
              "title": st.text(max_size=10), "retrieval_score": st.floats(-2, 2)},
)


@given(question=st.text(_TEXT_CHARS, min_size=1, max_size=30).filter(str.strip), passages=st.lists(_PASSAGE, max_size=6))
def test_mirage_defense__valid_passages(question, passages):
    result = _defense().defend(question, passages)
    assert result.error is None
    kept = result.kept_claims
    assert all(any(c is k for c in result.claims) for k in kept), "kept claims are a subset of the candidates"
    assert all(c.kept and c.reason is None for c in kept)
    assert all(not c.kept and c.reason for c in result.claims if c not in kept)
    assert [c.index for c in result.claims] == sorted({c.index for c in result.claims})
    assert set(result.removal_order) <= {c.index for c in result.claims if not c.kept}
    if not passages or not kept:
        assert not result.gate_passed, "no passages (or no kept claim) must block the gate"
    if result.gate_passed:
        assert result.fallback is None
    else:
        assert result.fallback is not None
    note(f"stats {result.stats}")


@given(question=st.text(max_size=20))
def test_mirage_defense__empty_passages_block_the_gate(question):
    if not question.strip():  # no question is an input error (pipelines/_items.py), never a result
        with pytest.raises(ValueError, match="^question:"):
            _defense().defend(question, [])
        return
    result = _defense().defend(question, [])
    assert not result.gate_passed and result.claims == [] and result.kept_claims == []


@given(data=st.data())
def test_claim_conformal__q_hat_is_the_kth_smallest_r_score(data):
    from rrag_kernels.pipelines.conformal import ClaimConformal

    s, ok, off = _claims(data, min_responses=1, max_responses=15)
    alpha = data.draw(_ALPHA, label="alpha")
    a = data.draw(_A, label="a")
    backend = data.draw(BACKENDS, label="backend")
    cal = ClaimConformal(alpha=alpha, a=a, backend=backend).calibrate(s, ok, off)
    r = np.sort(ref.r_scores_ref(s, ok, off, a, -np.inf))
    n = len(r)
    k = math.ceil((n + 1) * (1 - alpha))
    want = r[k - 1] if k <= n else np.inf
    assert cal.n == n and cal.q_hat == want, (cal.q_hat, want, k, n)
    keep = cal.filter(s, off)
    assert np.array_equal(keep, s >= want)
