"""claim_token_ids(texts) and select_pairs(token_ids, token_offsets, source_ids, *, tau, max_pairs).

Contract: pairs i < j from different sources, both token SETS non-empty, overlap =
|T(i) & T(j)| / min(|T(i)|, |T(j)|) (float64 division of two ints) >= tau; sorted by
overlap descending, then (i, j); truncated to max_pairs. Every output is compared exactly
(bitwise for the overlaps) with ``select_pairs_ref``; the C++ kernel's prefix filter must
never lose a pair. Tokenisation must equal the documented regex on every input.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from helpers import assert_bitwise_equal, offsets_from_counts

import rrag_kernels
from rrag_kernels import ops
from rrag_kernels.reference import TOKEN_PATTERN, claim_token_ids_ref, select_pairs_ref

CPU_BACKENDS = pytest.mark.parametrize("backend", ["reference", "cpp"], indirect=True)


def _claims(rng, n, *, vocab, max_len, n_sources, empty_frac=0.1, zipf=False):
    """n claims of 0..max_len tokens (with duplicates) over a vocabulary of ``vocab`` ids."""
    counts = rng.integers(1, max_len + 1, size=n)
    counts[rng.random(n) < empty_frac] = 0
    total = int(counts.sum())
    if zipf:
        ids = np.minimum(rng.zipf(1.3, size=total) - 1, vocab - 1)
    else:
        ids = rng.integers(0, vocab, size=total)
    return ids.astype(np.int64), offsets_from_counts(counts), rng.integers(0, n_sources, size=n).astype(np.int64)


def _check_invariants(i, j, overlap, ids, off, src, tau, max_pairs):
    """What any correct answer satisfies, checked from first principles."""
    assert i.dtype == np.int64 and j.dtype == np.int64 and overlap.dtype == np.float64
    assert i.shape == j.shape == overlap.shape
    if max_pairs is not None:
        assert len(i) <= max_pairs
    sets = [set(ids[off[c]:off[c + 1]].tolist()) for c in range(len(src))]
    for a, b, ov in zip(i.tolist(), j.tolist(), overlap.tolist()):
        assert a < b and src[a] != src[b] and sets[a] and sets[b]
        assert ov == len(sets[a] & sets[b]) / min(len(sets[a]), len(sets[b])) and ov >= tau
    keys = list(zip((-overlap).tolist(), i.tolist(), j.tolist()))
    assert keys == sorted(keys) and len(set(keys)) == len(keys)


def _run_and_compare(backend, ids, off, src, tau, max_pairs):
    i, j, ov = ops.select_pairs(ids, off, src, tau=tau, max_pairs=max_pairs, backend=backend)
    ri, rj, rov = select_pairs_ref(ids, off, src, tau, max_pairs)
    assert_bitwise_equal(i, ri, name="i")
    assert_bitwise_equal(j, rj, name="j")
    assert_bitwise_equal(ov, rov, name="overlap")
    _check_invariants(i, j, ov, ids, off, src, tau, max_pairs)
    return i, j, ov


# Sizes: 0, 1, 2, odd primes, 16-claim scheduling chunks -1/+0/+1, and enough tokens
# (>= 4096) for the C++ kernel's threaded path.
SIZES = [0, 1, 2, 3, 17, 31, 32, 33, 127, 401]


@CPU_BACKENDS
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("tau", [0.0, 0.3, 0.62, 1.0])
def test_random(backend, rng, n, tau):
    ids, off, src = _claims(rng, n, vocab=40, max_len=14, n_sources=5)
    for max_pairs in (None, 400, 7, 1, 0):
        _run_and_compare(backend, ids, off, src, tau, max_pairs)


@CPU_BACKENDS
@pytest.mark.parametrize("n", [64, 300])
def test_many_ties_small_vocabulary(backend, rng, n):
    # 4 token ids, sets of 1-4 tokens: overlaps take a handful of values, so most pairs tie
    # and the cap cuts inside a tie group (order by (i, j) must decide).
    ids, off, src = _claims(rng, n, vocab=4, max_len=4, n_sources=3, empty_frac=0.2)
    for tau in (0.0, 0.5, 2 / 3, 1.0):
        i, j, ov = _run_and_compare(backend, ids, off, src, tau, None)
        assert len(np.unique(ov)) < len(ov) or len(ov) < 2
        for cap in (1, len(ov) // 3, len(ov) // 2 + 1):
            _run_and_compare(backend, ids, off, src, tau, cap)


@CPU_BACKENDS
def test_zipf_tokens_and_threshold_edges(backend, rng):
    # Heavy-tailed token frequencies (stop-word-like ids shared by most claims) and tau at
    # exact ratios c/m, where the comparison is an equality.
    ids, off, src = _claims(rng, 350, vocab=300, max_len=20, n_sources=20, zipf=True)
    for tau in (0.62, 0.5, 3 / 7, 0.6, 0.75, 0.8, 1 / 3, 1e-300, 1 - 1e-16):
        _run_and_compare(backend, ids, off, src, tau, None)


@CPU_BACKENDS
def test_sparse_and_negative_token_ids(backend, rng):
    # Ids far apart (and negative) take the sort-based vocabulary path in C++; the result
    # must equal the one for the same tokens renumbered densely.
    ids, off, src = _claims(rng, 120, vocab=30, max_len=10, n_sources=4)
    spread = np.array([-(2**62), -7, 0, 5, 2**40, 2**62] + list(range(100, 124)), dtype=np.int64)[ids]
    a = ops.select_pairs(spread, off, src, tau=0.5, max_pairs=None, backend=backend)
    b = ops.select_pairs(ids, off, src, tau=0.5, max_pairs=None, backend=backend)
    for x, y, name in zip(a, b, ("i", "j", "overlap")):
        assert_bitwise_equal(x, y, name=name)
    _run_and_compare(backend, spread, off, src, 0.5, None)


@CPU_BACKENDS
def test_duplicates_and_empty_sets(backend):
    ids = np.array([1, 1, 1, 2, 1, 2, 2, 3, 3, 3, 3], dtype=np.int64)
    off = np.array([0, 3, 4, 6, 6, 11, 11], dtype=np.int64)  # {1}, {2}, {1,2}, {}, {2,3}, {}
    src = np.arange(6, dtype=np.int64)
    i, j, ov = _run_and_compare(backend, ids, off, src, 0.0, None)
    # empty sets never pair, even at tau = 0; duplicates count once
    assert not ({3, 5} & set(i.tolist()) | {3, 5} & set(j.tolist()))
    got = {(a, b): o for a, b, o in zip(i.tolist(), j.tolist(), ov.tolist())}
    assert got == {(0, 1): 0.0, (0, 2): 1.0, (0, 4): 0.0, (1, 2): 1.0, (1, 4): 1.0, (2, 4): 0.5}


@CPU_BACKENDS
def test_same_source_never_pairs(backend, rng):
    ids, off, _ = _claims(rng, 40, vocab=5, max_len=5, n_sources=1, empty_frac=0.0)
    src = np.zeros(40, dtype=np.int64)
    i, _, _ = ops.select_pairs(ids, off, src, tau=0.0, max_pairs=None, backend=backend)
    assert len(i) == 0


def test_threads_identical(restore_threads_and_simd, rng):
    ids, off, src = _claims(rng, 700, vocab=60, max_len=16, n_sources=9, zipf=True)
    assert ids.size >= 4096  # the threaded path
    ref = select_pairs_ref(ids, off, src, 0.5, None)
    for threads in (1, 2, 3):
        rrag_kernels.set_num_threads(threads)
        for max_pairs in (None, 50):
            out = ops.select_pairs(ids, off, src, tau=0.5, max_pairs=max_pairs, backend="cpp")
            want = ref if max_pairs is None else tuple(x[:max_pairs] for x in ref)
            for x, y, name in zip(out, want, ("i", "j", "overlap")):
                assert_bitwise_equal(x, y, name=f"{name} at {threads} threads")


def test_lists_and_torch_inputs(rng, torch):
    ids, off, src = _claims(rng, 30, vocab=10, max_len=6, n_sources=3)
    want = ops.select_pairs(ids, off, src, tau=0.5)
    got = ops.select_pairs(ids.tolist(), off.tolist(), src.tolist(), tau=0.5)
    for x, y in zip(got, want):
        assert_bitwise_equal(x, y)
    t = ops.select_pairs(torch.from_numpy(ids), torch.from_numpy(off), torch.from_numpy(src), tau=0.5)
    assert all(isinstance(x, torch.Tensor) for x in t)
    for x, y in zip(t, want):
        assert_bitwise_equal(x.numpy(), y)


# --------------------------------------------------------------------------- tokenizer

_ALPHABET = list("abcXYZ09 '’.,-!?\t\n") + ["é", "İ", "\u212a", "ß", "Ω", "中", "😀", "\u0130", "ǅ", "ﬁ"]


@CPU_BACKENDS
def test_tokenizer_random_text(backend, rng):
    texts = ["".join(rng.choice(_ALPHABET, size=int(rng.integers(0, 40)))) for _ in range(300)]
    texts += ["", "   ", "'", "''a", "a'", "a'b'c", "1990's", "rock'n'roll", "abc'123", "don’t", "DON'T",
              "Kelvin \u212a", "İstanbul", "x" * 1000, "lone\udc80surrogate Ab\ud800", "nul\x00byte"]
    ids, off = ops.claim_token_ids(texts, backend=backend)
    rids, roff = claim_token_ids_ref(texts)
    assert_bitwise_equal(ids, rids, name="token_ids")
    assert_bitwise_equal(off, roff, name="token_offsets")
    # The ids decode to exactly the regex's tokens.
    vocab: dict[str, int] = {}
    for text in texts:
        for tok in re.findall(TOKEN_PATTERN, text.lower().replace("\u2019", "'")):
            vocab.setdefault(tok, len(vocab))
    names = {v: k for k, v in vocab.items()}
    for c, text in enumerate(texts):
        want = re.findall(TOKEN_PATTERN, text.lower().replace("\u2019", "'"))
        assert [names[t] for t in ids[off[c]:off[c + 1]].tolist()] == want, text


@CPU_BACKENDS
def test_tokenizer_examples(backend):
    ids, off = ops.claim_token_ids(["Alan Turing, born 1912.", "TURING don't rock'n'roll", ""], backend=backend)
    assert ids.tolist() == [0, 1, 2, 3, 1, 4, 5, 6]  # alan turing born 1912 | turing don't rock'n roll
    assert off.tolist() == [0, 4, 8, 8]
    ids, off = ops.claim_token_ids([], backend=backend)
    assert ids.dtype == np.int64 and ids.size == 0 and off.tolist() == [0]


# --------------------------------------------------------------------------- validation

def _valid():
    return {"token_ids": np.array([0, 1, 1, 2], np.int64), "token_offsets": np.array([0, 2, 4], np.int64),
            "source_ids": np.array([0, 1], np.int64)}


@CPU_BACKENDS
@pytest.mark.parametrize("change,exc,name", [
    ({"tau": -0.1}, ValueError, "tau"),
    ({"tau": 1.5}, ValueError, "tau"),
    ({"tau": float("nan")}, ValueError, "tau"),
    ({"tau": "0.5"}, TypeError, "tau"),
    ({"tau": True}, TypeError, "tau"),
    ({"max_pairs": -1}, ValueError, "max_pairs"),
    ({"max_pairs": 2.0}, TypeError, "max_pairs"),
    ({"token_offsets": np.array([0, 2], np.int64)}, ValueError, "token_offsets"),
    ({"token_offsets": np.array([1, 2, 4], np.int64)}, ValueError, "token_offsets"),
    ({"token_offsets": np.array([0, 3, 2], np.int64)}, ValueError, "token_offsets"),
    ({"token_offsets": np.array([0, 2, 5], np.int64)}, ValueError, "token_offsets"),
    ({"token_offsets": np.array([0, 2, 3], np.int64)}, ValueError, "token_offsets"),
    ({"token_offsets": np.array([0.0, 2, 4])}, TypeError, "token_offsets"),
    ({"token_ids": np.array([0.0, 1, 1, 2])}, TypeError, "token_ids"),
    ({"token_ids": np.array([[0, 1, 1, 2]], np.int64)}, ValueError, "token_ids"),
    ({"source_ids": np.array([[0, 1]], np.int64)}, ValueError, "source_ids"),
    ({"source_ids": "ab"}, TypeError, "source_ids"),
])
def test_bad_input(backend, change, exc, name):
    kwargs = {**_valid(), "tau": 0.5, "max_pairs": 10, **change}
    with pytest.raises(exc, match=rf"^{name}:"):
        ops.select_pairs(**kwargs, backend=backend)


def test_bad_backend_and_texts():
    with pytest.raises(ValueError, match=r"^backend:"):
        ops.select_pairs(**_valid(), backend="triton")
    with pytest.raises(ValueError, match=r"^backend:"):
        ops.select_pairs(**_valid(), backend="gpu")
    with pytest.raises(TypeError, match=r"^texts:"):
        ops.claim_token_ids("one string")
    with pytest.raises(TypeError, match=r"^texts:"):
        ops.claim_token_ids(["ok", 3])


def test_core_rechecks(core):
    v = _valid()
    with pytest.raises(ValueError, match=r"^token_offsets:"):
        core.select_pairs(v["token_ids"], np.array([0, 3, 2], np.int64), v["source_ids"], 0.5, -1)
    with pytest.raises(ValueError, match=r"^tau:"):
        core.select_pairs(v["token_ids"], v["token_offsets"], v["source_ids"], float("nan"), -1)
    with pytest.raises(ValueError, match=r"^max_pairs:"):
        core.select_pairs(v["token_ids"], v["token_offsets"], v["source_ids"], 0.5, -2)
    with pytest.raises(TypeError, match=r"^token_ids:"):
        core.select_pairs(v["token_ids"].astype(np.int32), v["token_offsets"], v["source_ids"], 0.5, -1)
    with pytest.raises(TypeError, match=r"^texts:"):
        core.claim_token_ids(["a", b"b"])
