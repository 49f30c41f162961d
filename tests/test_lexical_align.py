"""lexical_opcodes(tokens_a, offsets_a, tokens_b, offsets_b, *, trim_affixes, backend),
its C++ binding, its reference, and LexicalNLI's two paths through it.

Contract: per pair, trim_affixes=False gives exactly
``difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()`` (LexicalNLI's
autojunk setting); trim_affixes=True gives exactly
``rrag_kernels.reference.pair_opcodes_ref`` (common prefix and suffix first, then difflib's
longest matching blocks on the middle). Discrete output: exact equality with the reference
in every backend. LexicalNLI's features and probabilities are identical whether it aligns
through the C++ backend of the op or through its reference.
"""

from __future__ import annotations

import difflib
import json
from pathlib import Path

import numpy as np
import pytest
from helpers import offsets_from_counts

from rrag_kernels import ops
from rrag_kernels.models.nli import LexicalNLI
from rrag_kernels.models.nli import lexical as lx
from rrag_kernels.models.nli.lexical import align as lexical_align
from rrag_kernels.reference import LEXICAL_TAGS, lexical_opcodes_ref, pair_opcodes_ref

NLI_DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "nli"
LENGTHS = (0, 1, 2, 3, 7, 13, 31, 201, 257)  # > 200: where difflib's autojunk would start
CPU_BACKENDS = pytest.mark.parametrize("backend", ["reference", "cpp"], indirect=True)


def _random_pairs(rng, n, *, max_alphabet=6, lengths=LENGTHS):
    pairs = []
    for _ in range(n):
        alphabet = int(rng.integers(1, max_alphabet + 1))
        la, lb = rng.choice(lengths, size=2)
        a = rng.integers(0, alphabet, size=la)
        b = rng.integers(0, alphabet, size=lb)
        if rng.random() < 0.5 and la and lb:  # a minimal edit: b is a with a few changes
            b = a.copy()
            for _ in range(int(rng.integers(1, 4))):
                if not len(b):
                    break
                k = int(rng.integers(0, len(b)))
                b = np.concatenate([b[:k], rng.integers(0, alphabet + 2, size=int(rng.integers(0, 3))), b[k + 1:]])
        pairs.append((a.astype(np.int64), b.astype(np.int64)))
    return pairs


def _csr(pairs):
    ta = np.concatenate([a for a, _ in pairs] + [np.zeros(0, np.int64)])
    tb = np.concatenate([b for _, b in pairs] + [np.zeros(0, np.int64)])
    return (ta, offsets_from_counts([len(a) for a, _ in pairs]),
            tb, offsets_from_counts([len(b) for _, b in pairs]))


def _split(op_offsets, rows):
    return [[(LEXICAL_TAGS[t], i1, i2, j1, j2) for t, i1, i2, j1, j2 in rows[op_offsets[p]:op_offsets[p + 1]].tolist()]
            for p in range(len(op_offsets) - 1)]


def _check_against(pairs, got, trim):
    for p, ((a, b), spans) in enumerate(zip(pairs, got)):
        al, bl = a.tolist(), b.tolist()
        want = pair_opcodes_ref(al, bl) if trim else difflib.SequenceMatcher(None, al, bl, autojunk=False).get_opcodes()
        assert spans == want, f"pair {p}: a={al} b={bl}\n got {spans}\nwant {want}"


def test_reference_is_trimmed_difflib(rng):
    """pair_opcodes_ref = common prefix/suffix, then difflib's longest matching blocks
    (autojunk off), on str keys as LexicalNLI once aligned them: the semantics the C++ port
    keeps."""
    for _ in range(300):
        n_a, n_b = rng.integers(0, 14, size=2)
        alphabet = rng.integers(2, 7)
        a = [f"w{x}" for x in rng.integers(0, alphabet, size=n_a)]
        b = [f"w{x}" for x in rng.integers(0, alphabet, size=n_b)]
        spans = pair_opcodes_ref(a, b)
        # spans tile both sequences in order; equal spans really are equal
        ends = (0, 0)
        for _, i1, i2, j1, j2 in spans:
            assert (i1, j1) == ends
            ends = (i2, j2)
        assert ends == (len(a), len(b))
        for tag, i1, i2, j1, j2 in spans:
            if tag == "equal":
                assert a[i1:i2] == b[j1:j2]
        ours = {(i1 + q, j1 + q) for tag, i1, i2, j1, j2 in spans if tag == "equal" for q in range(i2 - i1)}
        p = 0
        while p < min(n_a, n_b) and a[p] == b[p]:
            p += 1
        s = 0
        while s < min(n_a, n_b) - p and a[n_a - 1 - s] == b[n_b - 1 - s]:
            s += 1
        ref = {(q, q) for q in range(p)} | {(n_a - 1 - q, n_b - 1 - q) for q in range(s)}
        sm = difflib.SequenceMatcher(None, a[p:n_a - s], b[p:n_b - s], autojunk=False)
        for i, j, size in sm.get_matching_blocks():
            ref |= {(i + p + q, j + p + q) for q in range(size)}
        assert ours == ref, (a, b)



@pytest.mark.parametrize("trim", [False, True], ids=["difflib", "trimmed"])
def test_opcodes_exact(core, rng, trim):
    pairs = _random_pairs(rng, 400)
    op_offsets, rows = core.lexical_opcodes(*_csr(pairs), trim)
    assert op_offsets.dtype == np.int64 and op_offsets.shape == (len(pairs) + 1,)
    assert rows.dtype == np.int32 and rows.ndim == 2 and rows.shape[1] == 5 and rows.flags.c_contiguous
    _check_against(pairs, _split(op_offsets, rows), trim)
    ref_off, ref_ops = lexical_opcodes_ref(*_csr(pairs), trim)
    np.testing.assert_array_equal(op_offsets, ref_off)
    np.testing.assert_array_equal(rows, ref_ops)


def test_trimming_differs_from_difflib_where_documented(core):
    a, b = np.array([1, 1, 2]), np.array([1, 2, 1, 1, 2])
    off_a, off_b = np.array([0, 3]), np.array([0, 5])
    assert _split(*core.lexical_opcodes(a, off_a, b, off_b, False)) == [[("insert", 0, 0, 0, 2), ("equal", 0, 3, 2, 5)]]
    assert _split(*core.lexical_opcodes(a, off_a, b, off_b, True)) == [
        [("equal", 0, 1, 0, 1), ("insert", 1, 1, 1, 3), ("equal", 1, 3, 3, 5)]]


def test_popular_tokens_no_autojunk(core, rng):
    """Long sequences dominated by a few tokens: difflib's autojunk would drop them from
    b2j; LexicalNLI (autojunk=False) and the kernel keep them."""
    pairs = []
    for n in (201, 300, 401):
        a = np.where(rng.random(n) < 0.8, 0, rng.integers(1, 50, size=n)).astype(np.int64)
        b = np.where(rng.random(n + 3) < 0.8, 0, rng.integers(1, 50, size=n + 3)).astype(np.int64)
        pairs.append((a, b))
    for trim in (False, True):
        _check_against(pairs, _split(*core.lexical_opcodes(*_csr(pairs), trim)), trim)


def test_any_int64_ids_and_empty_batch(core, rng):
    pairs = _random_pairs(rng, 50, max_alphabet=4, lengths=(0, 1, 5, 9))
    big = np.array([np.iinfo(np.int64).min, -1, 2**40, np.iinfo(np.int64).max, 7], dtype=np.int64)
    mapped = [(big[a % 5], big[b % 5]) for a, b in pairs]
    for trim in (False, True):
        got = _split(*core.lexical_opcodes(*_csr(mapped), trim))
        assert got == _split(*core.lexical_opcodes(*_csr(pairs), trim))
        _check_against(mapped, got, trim)
    e = np.zeros(0, np.int64)
    off, rows = core.lexical_opcodes(e, np.zeros(1, np.int64), e, np.zeros(1, np.int64))
    assert off.tolist() == [0] and rows.shape == (0, 5)


def test_thread_count_independent(restore_threads_and_simd, rng):
    core = restore_threads_and_simd
    # > 2^16 tokens in all: the kernel only goes parallel above that
    args = _csr(_random_pairs(rng, 2500, lengths=(0, 1, 4, 9, 17, 33, 65, 129)))
    assert len(args[0]) + len(args[2]) > 2**16
    core.set_num_threads(1)
    off1, ops1 = core.lexical_opcodes(*args)
    core.set_num_threads(3)
    off3, ops3 = core.lexical_opcodes(*args)
    np.testing.assert_array_equal(off1, off3)
    np.testing.assert_array_equal(ops1, ops3)


def test_bad_inputs_name_the_argument(core):
    t = np.arange(4, dtype=np.int64)
    ok = np.array([0, 2, 4], dtype=np.int64)
    with pytest.raises(ValueError, match="offsets_b: expected length 3"):
        core.lexical_opcodes(t, ok, t, np.array([0, 4], dtype=np.int64))
    with pytest.raises(ValueError, match="offsets_a: offsets must be non-decreasing"):
        core.lexical_opcodes(t, np.array([0, 3, 2], dtype=np.int64), t, ok)
    with pytest.raises(ValueError, match=r"offsets_b: offsets\[-1\] must equal"):
        core.lexical_opcodes(t, ok, t, np.array([0, 2, 3], dtype=np.int64))
    with pytest.raises(ValueError, match=r"offsets_a: offsets\[0\] must be 0"):
        core.lexical_opcodes(t, np.array([1, 2, 4], dtype=np.int64), t, ok)
    with pytest.raises(TypeError, match="tokens_a: expected dtype int64"):
        core.lexical_opcodes(t.astype(np.int32), ok, t, ok)
    with pytest.raises(ValueError, match="tokens_b: array must be C-contiguous"):
        core.lexical_opcodes(t, ok, np.arange(8, dtype=np.int64)[::2], ok)
    with pytest.raises(ValueError, match="offsets_a: expected length n_pairs"):
        core.lexical_opcodes(t, np.zeros(0, np.int64), t, ok)


# --------------------------------------------------------------------------- the op


@CPU_BACKENDS
@pytest.mark.parametrize("trim", [False, True], ids=["difflib", "trimmed"])
def test_op_equals_reference(backend, rng, trim):
    pairs = _random_pairs(rng, 200)
    got = ops.lexical_opcodes(*_csr(pairs), trim_affixes=trim, backend=backend)
    assert isinstance(got, ops.Opcodes)
    assert got.op_offsets.dtype == np.int64 and got.op_offsets.shape == (len(pairs) + 1,)
    assert got.ops.dtype == np.int32 and got.ops.ndim == 2 and got.ops.shape[1] == 5
    want = lexical_opcodes_ref(*_csr(pairs), trim)
    np.testing.assert_array_equal(got.op_offsets, want[0])
    np.testing.assert_array_equal(got.ops, want[1])
    assert ops.OPCODE_TAGS == LEXICAL_TAGS


@CPU_BACKENDS
@pytest.mark.parametrize("n_pairs", [0, 1, 2, 7, 13])
def test_op_edge_sizes(backend, rng, n_pairs):
    """0 pairs, 1 pair, odd counts; sequences of length 0, 1 and odd lengths on either side."""
    pairs = _random_pairs(rng, n_pairs, lengths=(0, 1, 3, 5))
    pairs[:1] = [(np.zeros(0, np.int64), np.zeros(0, np.int64))] if n_pairs else []
    got = ops.lexical_opcodes(*_csr(pairs), backend=backend)
    want = lexical_opcodes_ref(*_csr(pairs), True)
    np.testing.assert_array_equal(got.op_offsets, want[0])
    np.testing.assert_array_equal(got.ops, want[1])
    assert got.op_offsets.shape == (n_pairs + 1,) and got.ops.shape[1] == 5
    _check_against(pairs, _split(*got), True)


@CPU_BACKENDS
def test_op_lists_and_other_integer_dtypes(backend):
    """Lists and int32 arrays of tokens are converted; the answer is the int64 one's."""
    a, b = [5, 6, 7, 6], [5, 7, 7]
    want = ops.lexical_opcodes(np.array(a, np.int64), [0, 4], np.array(b, np.int64), [0, 3], backend=backend)
    for ta, tb in ((a, b), (np.array(a, np.int32), np.array(b, np.uint8))):
        got = ops.lexical_opcodes(ta, np.array([0, 4], np.int32), tb, (0, 3), backend=backend)
        np.testing.assert_array_equal(got.op_offsets, want.op_offsets)
        np.testing.assert_array_equal(got.ops, want.ops)
    assert _split(*want) == [[("equal", 0, 1, 0, 1), ("delete", 1, 2, 1, 1), ("equal", 2, 3, 1, 2),
                              ("replace", 3, 4, 2, 3)]]


def test_op_torch_in_torch_out():
    torch = pytest.importorskip("torch")
    got = ops.lexical_opcodes(torch.tensor([1, 2]), torch.tensor([0, 2]), torch.tensor([2]), torch.tensor([0, 1]))
    assert isinstance(got.ops, torch.Tensor) and got.ops.dtype == torch.int32
    assert got.op_offsets.tolist() == [0, 2] and got.ops.tolist() == [[2, 0, 1, 0, 0], [0, 1, 2, 0, 1]]


_T = np.arange(4, dtype=np.int64)
_OK = np.array([0, 2, 4], dtype=np.int64)
BAD = [
    ({"offsets_b": np.array([0, 4], np.int64)}, ValueError, "offsets_b"),
    ({"offsets_a": np.array([0, 3, 2], np.int64)}, ValueError, "offsets_a"),
    ({"offsets_a": np.array([1, 2, 4], np.int64)}, ValueError, "offsets_a"),
    ({"offsets_b": np.array([0, 2, 3], np.int64)}, ValueError, "offsets_b"),
    ({"offsets_b": np.array([0, 2, 5], np.int64)}, ValueError, "offsets_b"),
    ({"offsets_a": np.zeros(0, np.int64), "offsets_b": np.zeros(0, np.int64)}, ValueError, "offsets_a"),
    ({"offsets_a": np.array([[0, 2, 4]], np.int64)}, ValueError, "offsets_a"),
    ({"offsets_a": np.array([0.0, 2, 4])}, TypeError, "offsets_a"),
    ({"tokens_a": np.array([0.0, 1, 2, 3])}, TypeError, "tokens_a"),
    ({"tokens_b": np.array([[0, 1, 2, 3]], np.int64)}, ValueError, "tokens_b"),
    ({"tokens_b": "0123"}, TypeError, "tokens_b"),
    ({"trim_affixes": 1}, TypeError, "trim_affixes"),
]


@CPU_BACKENDS
@pytest.mark.parametrize("change,exc,name", BAD, ids=[f"{b[2]}-{k}" for k, b in enumerate(BAD)])
def test_op_bad_input_names_the_argument(backend, change, exc, name):
    kwargs = {"tokens_a": _T, "offsets_a": _OK, "tokens_b": _T, "offsets_b": _OK, **change}
    with pytest.raises(exc, match=rf"^{name}:"):
        ops.lexical_opcodes(**kwargs, backend=backend)


def test_op_has_no_triton_backend():
    with pytest.raises(ValueError, match=r"^backend:"):
        ops.lexical_opcodes(_T, _OK, _T, _OK, backend="triton")


# --------------------------------------------------------------------------- LexicalNLI


def _both_paths(monkeypatch, premises, hypotheses):
    scorer = LexicalNLI()
    monkeypatch.setattr(lexical_align, "USE_CORE", True)
    fast = scorer.features(premises, hypotheses), scorer.predict_proba(premises, hypotheses)
    monkeypatch.setattr(lexical_align, "USE_CORE", False)
    slow = scorer.features(premises, hypotheses), scorer.predict_proba(premises, hypotheses)
    assert fast[0] == slow[0]
    assert fast[1].dtype == slow[1].dtype and np.array_equal(fast[1], slow[1])
    return fast


def test_lexical_nli_identical_on_hand_written_pairs(core, monkeypatch):
    from test_nli_model_free import CASES

    p = [c[0] for c in CASES.values()]
    h = [c[1] for c in CASES.values()]
    feats, _ = _both_paths(monkeypatch, p + h + [""], h + p + ["The bridge opened."])
    outcomes = [lx.decide(f) for f in feats[: len(CASES)]]
    assert outcomes == [c[3] for c in CASES.values()]


WORDS = ("the a bridge river harbour opened built rebuilt in on by of and not never no all some most few "
         "largest smallest before after rose fell 1927 1931 1950s eighteenth century twelve 12 forty "
         "more than about 40,000 March June May Helena Marsh Rotterdam Antwerp council storm two four "
         "won lost north south doesn't cannot 7.2 million percent first second one").split()


def test_lexical_nli_identical_on_random_sentences(core, monkeypatch, rng):
    premises, hypotheses = [], []
    for _ in range(300):
        words = list(rng.choice(WORDS, size=int(rng.integers(0, 30))))
        premises.append(" ".join(words).capitalize() + ".")
        edit = list(words)
        for _ in range(int(rng.integers(0, 4))):
            k = int(rng.integers(0, len(edit) + 1))
            op = rng.integers(0, 3)
            if op == 0 and k < len(edit):
                edit[k] = str(rng.choice(WORDS))
            elif op == 1:
                edit.insert(k, str(rng.choice(WORDS)))
            elif k < len(edit):
                del edit[k]
        if rng.random() < 0.1:
            edit = list(rng.choice(WORDS, size=int(rng.integers(0, 30))))
        hypotheses.append(" ".join(edit) + ".")
    _both_paths(monkeypatch, premises, hypotheses)


def test_lexical_nli_identical_on_data(core, monkeypatch):
    files = sorted(NLI_DATA.glob("train_*.jsonl"))
    if not files:
        pytest.skip(f"no NLI data under {NLI_DATA}")
    rows = [json.loads(line) for f in files for line in f.open()]
    _both_paths(monkeypatch, [r["premise"] for r in rows], [r["hypothesis"] for r in rows])
