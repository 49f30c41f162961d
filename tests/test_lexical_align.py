"""lexical_opcodes(tokens_a, offsets_a, tokens_b, offsets_b, trim_affixes) and LexicalNLI's
C++ path.

Contract: per pair, trim_affixes=False gives exactly
``difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()`` (LexicalNLI's
autojunk setting); trim_affixes=True gives exactly ``rrag_kernels.nli.lexical._opcodes``
(common prefix and suffix first, then difflib on the middle). Discrete output: exact
equality. LexicalNLI's features and probabilities are identical with and without the C++
path.
"""

from __future__ import annotations

import difflib
import json
from pathlib import Path

import numpy as np
import pytest
from helpers import offsets_from_counts

from rrag_kernels.nli import LexicalNLI
from rrag_kernels.nli import lexical as lx
from rrag_kernels.reference import LEXICAL_TAGS, lexical_opcodes_ref

NLI_DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "nli"
LENGTHS = (0, 1, 2, 3, 7, 13, 31, 201, 257)  # > 200: where difflib's autojunk would start


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


def _split(op_offsets, ops):
    return [[(LEXICAL_TAGS[t], i1, i2, j1, j2) for t, i1, i2, j1, j2 in ops[op_offsets[p]:op_offsets[p + 1]].tolist()]
            for p in range(len(op_offsets) - 1)]


def _check_against(pairs, got, trim):
    for p, ((a, b), ops) in enumerate(zip(pairs, got)):
        al, bl = a.tolist(), b.tolist()
        want = lx._opcodes(al, bl) if trim else difflib.SequenceMatcher(None, al, bl, autojunk=False).get_opcodes()
        assert ops == want, f"pair {p}: a={al} b={bl}\n got {ops}\nwant {want}"


@pytest.mark.parametrize("trim", [False, True], ids=["difflib", "trimmed"])
def test_opcodes_exact(core, rng, trim):
    pairs = _random_pairs(rng, 400)
    op_offsets, ops = core.lexical_opcodes(*_csr(pairs), trim)
    assert op_offsets.dtype == np.int64 and op_offsets.shape == (len(pairs) + 1,)
    assert ops.dtype == np.int32 and ops.ndim == 2 and ops.shape[1] == 5 and ops.flags.c_contiguous
    _check_against(pairs, _split(op_offsets, ops), trim)
    ref_off, ref_ops = lexical_opcodes_ref(*_csr(pairs), trim)
    np.testing.assert_array_equal(op_offsets, ref_off)
    np.testing.assert_array_equal(ops, ref_ops)


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
    off, ops = core.lexical_opcodes(e, np.zeros(1, np.int64), e, np.zeros(1, np.int64))
    assert off.tolist() == [0] and ops.shape == (0, 5)


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


# --------------------------------------------------------------------------- LexicalNLI


def _both_paths(monkeypatch, premises, hypotheses):
    scorer = LexicalNLI()
    monkeypatch.setattr(lx, "USE_CORE", True)
    fast = scorer.features(premises, hypotheses), scorer.predict_proba(premises, hypotheses)
    monkeypatch.setattr(lx, "USE_CORE", False)
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
