"""beam_step(parent_scores, finished, choice_probs, n_candidates, chain_offsets, *, beams,
min_prob, max_chains) -> BeamStep(parent, choice, score, finished, offsets).

Contract (ReliableRAG / TRACE construct_reasoning_chains, one hop): per question, its chains
in order; a finished chain is carried over (choice -1, same score, finished); a chain whose
row holds no finite probability is carried over unfinished; otherwise its top ``beams``
columns (p descending, equal p -> lower column, NaN never) are taken FIRST, then skipped
when p < min_prob or when a letter is past the candidates shown (it used up its slot), the
rest emitting ``parent_score * p`` (finished iff column 0, 'A'). The question's children in
emission order are stably sorted by score descending, the first max_chains kept. Every
backend must give exactly the reference's output, scores bitwise.
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from helpers import assert_bitwise_equal

import rrag_kernels as rk
from rrag_kernels import ops
from rrag_kernels.reference import beam_step_ref

CPU_BACKENDS = pytest.mark.parametrize("backend", ["reference", "cpp"], indirect=True)
FIELDS = ("parent", "choice", "score", "finished", "offsets")
DTYPES = (np.int64, np.int64, np.float64, np.bool_, np.int64)


def _offsets(counts) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)


def _inputs(rng, counts, n_choices, *, ties):
    """Random chains for questions of the given sizes: ~20 % finished, ~10 % all-NaN rows,
    ~15 % NaN entries elsewhere, probabilities at and around min_prob = 1e-4, n_candidates
    often below C - 1. With ``ties``, scores and probabilities are powers of two (exact ties)."""
    off = _offsets(counts)
    b = int(off[-1])
    if ties:
        scores = 2.0 ** -rng.integers(0, 6, size=b).astype(np.float64)
        probs = rng.choice([0.0, 0.0625, 0.125, 0.25, 0.5, 1.0], size=(b, n_choices))
    else:
        scores = rng.uniform(0.0, 1.0, size=b)
        probs = rng.dirichlet(np.ones(n_choices), size=b) if b else np.zeros((0, n_choices))
        special = rng.random((b, n_choices)) < 0.1
        probs[special] = rng.choice([1e-4, np.nextafter(1e-4, 0.0), 0.0, 1.0], size=int(special.sum()))
    probs[rng.random((b, n_choices)) < 0.15] = np.nan
    probs[rng.random(b) < 0.1] = np.nan
    finished = rng.random(b) < 0.2
    n_cand = np.where(rng.random(b) < 0.5, n_choices - 1, rng.integers(0, n_choices, size=b)).astype(np.int64)
    return scores, finished, probs, n_cand, off


def _check(out, args, **kwargs):
    """Exactly the reference's output, plus the contract's invariants."""
    assert isinstance(out, ops.BeamStep)
    expected = beam_step_ref(*args, **kwargs)
    for name, dtype, got, want in zip(FIELDS, DTYPES, out, expected):
        assert isinstance(got, np.ndarray) and got.dtype == dtype, f"{name}: {type(got)} {getattr(got, 'dtype', '')}"
        assert_bitwise_equal(got, want, name=name)
    scores, finished, probs, _, off = args
    parent, choice, score, done, out_off = out
    assert out_off[0] == 0 and out_off[-1] == len(parent) and len(out_off) == len(off)
    assert (np.diff(out_off) <= kwargs.get("max_chains", 20)).all()
    for q in range(len(off) - 1):
        lo, hi = out_off[q], out_off[q + 1]
        assert ((parent[lo:hi] >= off[q]) & (parent[lo:hi] < off[q + 1])).all(), "a child of another question"
        assert (np.diff(score[lo:hi]) <= 0).all(), "scores not descending"
    carried = choice < 0
    assert_bitwise_equal(score[carried], scores[parent[carried]], name="carried-over score")
    assert (done[carried] == finished[parent[carried]]).all()
    c = np.maximum(choice, 0)
    assert_bitwise_equal(score[~carried], (scores[parent] * probs[parent, c])[~carried], name="child score")
    assert (done[~carried] == (choice[~carried] == 0)).all()
    assert not finished[parent[~carried]].any(), "a finished chain was extended"


# (counts per question, C, beams, max_chains): B = 0, 1, odd; Q = 0, 1, many with empty
# questions; C = 1 (only 'A'), 2, 21; beams 1, 5, > C; max_chains 1, 20, > children.
CASES = [
    ([], 21, 5, 20),
    ([0, 0, 0], 21, 5, 20),
    ([1], 1, 5, 20),
    ([1], 2, 1, 1),
    ([37], 21, 5, 20),
    ([5, 0, 3, 0, 0, 11, 1, 0, 17], 2, 5, 1),
    ([3, 0, 7, 1, 0, 9, 0, 13, 2, 0, 21, 4, 0, 0, 5, 3, 7, 0, 1, 10], 21, 1, 20),
    ([3, 0, 7, 1, 0, 9, 0, 13, 2, 0, 21, 4, 0, 0, 5, 3, 7, 0, 1, 10], 21, 30, 10**6),
    ([20] * 25 + [0, 19, 1], 21, 5, 20),
    ([6, 1, 0, 8, 11, 2, 9], 7, 5, 3),
    ([2, 1, 3], 21, 21, 20),
    ([4, 9, 2, 32, 33], 21, 16, 20),  # the most beams of the argmax passes; 32 / 33 chains
    ([4, 9, 2], 21, 17, 20),          # the fewest beams of the partial sort
    ([6, 0, 13], 40, 5, 20),
]


@CPU_BACKENDS
@pytest.mark.parametrize("counts,n_choices,beams,max_chains", CASES,
                         ids=[f"Q{len(c[0])}-B{sum(c[0])}-C{c[1]}-beams{c[2]}-F{c[3]}" for c in CASES])
@pytest.mark.parametrize("ties", [False, True], ids=["float", "pow2-ties"])
def test_random(backend, rng, counts, n_choices, beams, max_chains, ties):
    args = _inputs(rng, counts, n_choices, ties=ties)
    out = ops.beam_step(*args, beams=beams, max_chains=max_chains, backend=backend)
    _check(out, args, beams=beams, max_chains=max_chains)


@CPU_BACKENDS
@pytest.mark.parametrize("max_chains", [1, 20, 10**6])
def test_one_huge_question_among_many_empty(backend, rng, max_chains):
    counts = [0] * 301
    counts[150] = 2000
    counts[7] = 3
    args = _inputs(rng, counts, 21, ties=True)
    out = ops.beam_step(*args, max_chains=max_chains, backend=backend)
    _check(out, args, max_chains=max_chains)
    emitted = np.diff(beam_step_ref(*args, max_chains=10**9)[4])
    assert emitted[150] > 20 and np.diff(out.offsets).tolist() == np.minimum(emitted, max_chains).tolist()


@CPU_BACKENDS
def test_hand_worked_example(backend):
    # C = 4 letters (A = stop, B, C, D = candidates 0, 1, 2); beams = 2, min_prob = 0.1, F = 3.
    # Questions: q0 = chains 0, 1, 2; q1 = no chains; q2 = chains 3, 4.
    below = np.nextafter(0.1, 0.0)
    nan = np.nan
    scores = np.array([1.0, 0.5, 0.25, 0.5, 1.0])
    finished = np.array([False, False, True, False, False])
    probs = np.array([
        [0.25, 0.5, 0.125, 0.125],  # chain 0: top 2 = B (0.5), A (0.25)
        [0.25, 0.125, 0.5, 0.0],    # chain 1: top 2 = C (0.5), A (0.25); C is candidate 1 >= n_candidates 1
        [0.9, 0.1, 0.0, 0.0],       # chain 2: finished, its row is not read
        [nan, nan, nan, nan],       # chain 3: no choice in the reply
        [nan, 0.1, below, nan],     # chain 4: top 2 = B (0.1 == min_prob), C (just below min_prob)
    ])
    n_cand = np.array([3, 1, 3, 3, 2])
    off = np.array([0, 3, 3, 5])
    # q0 emits, in order:
    #   chain 0: (0, B=1, 1.0 * 0.5 = 0.5, unfinished), (0, A=0, 1.0 * 0.25 = 0.25, finished)
    #   chain 1: C skipped (letter past the 1 candidate shown; it used up a slot, so B = 0.125,
    #            third by probability, is NOT taken instead), then (1, A=0, 0.5 * 0.25 = 0.125, finished)
    #   chain 2: carried over (2, -1, 0.25, finished)
    # Stable sort by score: 0.5 (0, B); 0.25 (0, A) emitted before 0.25 (2, -1); 0.125 (1, A).
    # F = 3 keeps the first three; (1, A) is cut.
    # q1: nothing.
    # q2 emits: chain 3 carried over unfinished (3, -1, 0.5); chain 4: B kept (p == min_prob)
    #   -> (4, B=1, 1.0 * 0.1 = 0.1, unfinished), C skipped (p < min_prob). Sorted: 0.5, 0.1.
    out = ops.beam_step(scores, finished, probs, n_cand, off, beams=2, min_prob=0.1, max_chains=3, backend=backend)
    assert out.parent.tolist() == [0, 0, 2, 3, 4]
    assert out.choice.tolist() == [1, 0, -1, -1, 1]
    assert out.score.tolist() == [0.5, 0.25, 0.25, 0.5, 0.1]
    assert out.finished.tolist() == [False, True, True, False, False]
    assert out.offsets.tolist() == [0, 3, 3, 5]
    _check(out, (scores, finished, probs, n_cand, off), beams=2, min_prob=0.1, max_chains=3)


@CPU_BACKENDS
def test_exact_ties_keep_the_emission_order(backend):
    # Every child scores exactly 0.25: 0.5 * 0.5 (chain 0, both columns), 1.0 * 0.25
    # (chain 1, both columns), and the finished chain 2 carried over at 0.25. Equal
    # probabilities in a row: the lower column first; equal scores: the emission order.
    scores = np.array([0.5, 1.0, 0.25])
    finished = np.array([False, False, True])
    probs = np.array([[0.5, 0.5], [0.25, 0.25], [0.5, 0.5]])
    args = (scores, finished, probs, np.array([1, 1, 1]), np.array([0, 3]))
    out = ops.beam_step(*args, max_chains=20, backend=backend)
    assert out.parent.tolist() == [0, 0, 1, 1, 2]
    assert out.choice.tolist() == [0, 1, 0, 1, -1]
    assert out.score.tolist() == [0.25] * 5
    assert out.finished.tolist() == [True, False, True, False, True]
    cut = ops.beam_step(*args, max_chains=4, backend=backend)  # the last emitted tie is cut
    assert cut.parent.tolist() == [0, 0, 1, 1] and cut.choice.tolist() == [0, 1, 0, 1]
    # A higher score emitted later still comes first; ties behind it keep their order.
    probs2 = np.array([[0.5, 0.5], [0.5, 0.25], [0.5, 0.5]])
    out = ops.beam_step(scores, finished, probs2, np.array([1, 1, 1]), np.array([0, 3]), backend=backend)
    assert out.parent.tolist() == [1, 0, 0, 1, 2] and out.choice.tolist() == [0, 0, 1, 1, -1]
    assert out.score.tolist() == [0.5, 0.25, 0.25, 0.25, 0.25]


@CPU_BACKENDS
def test_min_prob_boundary(backend):
    at, below = 1e-4, np.nextafter(1e-4, 0.0)
    probs = np.array([[at, below, 0.0]])
    args = (np.array([1.0]), np.array([False]), probs, np.array([2]), np.array([0, 1]))
    out = ops.beam_step(*args, backend=backend)  # min_prob = 1e-4: p == min_prob kept, below skipped
    assert out.choice.tolist() == [0] and out.score.tolist() == [at]
    out = ops.beam_step(*args, min_prob=0.0, backend=backend)  # p = 0 is kept at min_prob 0
    assert out.choice.tolist() == [0, 1, 2] and out.score.tolist() == [at, below, 0.0]
    out = ops.beam_step(*args, min_prob=1.0, backend=backend)  # nothing reaches 1: the chain is dropped
    assert out.parent.size == 0 and out.offsets.tolist() == [0, 0]
    ones = ops.beam_step(np.array([0.5]), np.array([False]), np.array([[0.0, 1.0]]), np.array([1]),
                         np.array([0, 1]), min_prob=1.0, backend=backend)
    assert ones.choice.tolist() == [1] and ones.score.tolist() == [0.5]


@CPU_BACKENDS
def test_nan_rows(backend):
    nan = np.nan
    scores = np.array([0.75, 0.5, 0.25])
    probs = np.array([[nan, nan, nan], [nan, 0.25, nan], [0.5, nan, 0.25]])
    args = (scores, np.array([False, False, False]), probs, np.array([2, 2, 2]), np.array([0, 3]))
    # beams 5 > the non-NaN entries: NaN is never chosen; the all-NaN row is carried over
    # unfinished, and still competes on its score.
    out = ops.beam_step(*args, beams=5, backend=backend)
    assert out.parent.tolist() == [0, 1, 2, 2]
    assert out.choice.tolist() == [-1, 1, 0, 2]
    assert out.score.tolist() == [0.75, 0.125, 0.125, 0.0625]
    assert out.finished.tolist() == [False, False, True, False]
    _check(out, args, beams=5)


@CPU_BACKENDS
def test_signed_zeros(backend):
    # -0.0 is a valid score and probability: equal to 0.0 in every comparison (ties keep the
    # column / emission order), and its sign survives the multiply bitwise.
    probs = np.array([[-0.0, 0.0, 0.5], [0.0, -0.0, 0.25]])
    args = (np.array([-0.0, 1.0]), np.array([False, False]), probs, np.array([2, 2]), np.array([0, 2]))
    out = ops.beam_step(*args, min_prob=0.0, backend=backend)
    _check(out, args, min_prob=0.0)
    assert out.parent.tolist() == [1, 0, 0, 0, 1, 1] and out.choice.tolist() == [2, 2, 0, 1, 0, 1]
    # 0.25; then the zeros in emission order: -0.0 * 0.5, -0.0 * -0.0, -0.0 * 0.0, 1 * 0.0, 1 * -0.0
    assert np.signbit(out.score).tolist() == [False, True, False, True, False, True]


@CPU_BACKENDS
def test_all_finished(backend, rng):
    # Carried over unchanged, sorted by score (stably), the first max_chains kept.
    scores = np.array([0.25, 1.0, 0.25, 0.5, 0.5, 0.125])
    args = (scores, np.ones(6, dtype=bool), rng.uniform(size=(6, 3)), np.zeros(6, np.int64), np.array([0, 6]))
    out = ops.beam_step(*args, max_chains=4, backend=backend)
    assert out.parent.tolist() == [1, 3, 4, 0] and out.choice.tolist() == [-1] * 4
    assert out.finished.all() and out.score.tolist() == [1.0, 0.5, 0.5, 0.25]


@CPU_BACKENDS
def test_invalid_letters_use_up_slots(backend):
    probs = np.array([[0.1, 0.6, 0.3], [0.1, 0.6, 0.3], [0.1, 0.6, 0.3]])
    args = (np.ones(3), np.zeros(3, bool), probs, np.array([0, 1, 2]), np.array([0, 3]))
    # beams = 1: chain 0's top letter is B, but no candidate was shown: it is dropped.
    out = ops.beam_step(*args, beams=1, backend=backend)
    assert out.parent.tolist() == [1, 2] and out.choice.tolist() == [1, 1]
    # beams = 2 takes B and C: chain 0 keeps neither, chain 1 only B (C is past its 1 candidate).
    out = ops.beam_step(*args, beams=2, backend=backend)
    assert out.parent.tolist() == [1, 2, 2] and out.choice.tolist() == [1, 1, 2]
    # beams = 3: 'A' gets a slot too.
    out = ops.beam_step(*args, beams=3, backend=backend)
    assert out.parent.tolist() == [1, 2, 2, 0, 1, 2] and out.choice.tolist() == [1, 1, 2, 0, 0, 0]
    _check(out, args, beams=3)


@CPU_BACKENDS
def test_only_stop_column(backend, rng):
    # C = 1: the only letter is 'A'; every unfinished chain with a probability stops.
    args = _inputs(rng, [4, 0, 7], 1, ties=False)
    out = ops.beam_step(*args, backend=backend)
    _check(out, args)
    assert (out.choice <= 0).all() and (out.finished[out.choice == 0]).all()


# --------------------------------------------------------------------------- input kinds


def _small(rng):
    return _inputs(rng, [5, 0, 9, 3], 6, ties=False)


@CPU_BACKENDS
def test_input_kinds(backend, rng):
    s, f, p, nc, off = _small(rng)
    expected = ops.beam_step(s, f, p, nc, off, backend=backend)
    # float32 probabilities are converted to float64 first (the reference gets the same values).
    p32 = p.astype(np.float32)
    _check(ops.beam_step(s, f, p32, nc, off, backend=backend), (s, f, p32.astype(np.float64), nc, off))
    # lists and other integer dtypes, integer scores, Fortran-order and big-endian arrays.
    same = ops.beam_step(s.tolist(), f.tolist(), np.asfortranarray(p), nc.astype(np.int32).tolist(),
                         off.astype(np.uint16), backend=backend)
    for name, a, b in zip(FIELDS, same, expected):
        assert_bitwise_equal(a, b, name=name)
    same = ops.beam_step(s.astype(">f8"), f, p.astype(">f8"), nc.astype(">i8"), off, backend=backend)
    for name, a, b in zip(FIELDS, same, expected):
        assert_bitwise_equal(a, b, name=name)
    ints = ops.beam_step(np.array([3, 1]), np.array([False, False]), np.array([[0.5, 0.5], [1.0, 0.0]]),
                         np.array([1, 1]), np.array([0, 2]), backend=backend)
    assert ints.score.tolist() == [1.5, 1.5, 1.0] and ints.parent.tolist() == [0, 0, 1]
    # arrays that went through pickle are ordinary input.
    roundtrip = [pickle.loads(pickle.dumps(x)) for x in (s, f, p, nc, off)]
    for name, a, b in zip(FIELDS, ops.beam_step(*roundtrip, backend=backend), expected):
        assert_bitwise_equal(a, b, name=name)


@CPU_BACKENDS
def test_torch_in_torch_out(backend, rng, torch):
    s, f, p, nc, off = _small(rng)
    out = ops.beam_step(torch.from_numpy(s), torch.from_numpy(f), torch.from_numpy(p).float(),
                        torch.from_numpy(nc), torch.from_numpy(off), backend=backend)
    want = ops.beam_step(s, f, p.astype(np.float32).astype(np.float64), nc, off, backend=backend)
    for name, a, b in zip(FIELDS, out, want):
        assert isinstance(a, torch.Tensor), name
        assert_bitwise_equal(a, b, name=name)


def test_auto_backend_is_cpp(rng, core):
    args = _small(rng)
    for name, a, b in zip(FIELDS, rk.beam_step(*args), ops.beam_step(*args, backend="cpp")):
        assert_bitwise_equal(a, b, name=name)


def test_same_result_at_any_thread_count(rng, restore_threads_and_simd):
    counts = rng.integers(0, 30, size=400)
    counts[::17] = 0
    counts[200] = 3000
    args = _inputs(rng, counts, 21, ties=True)
    rk.set_num_threads(1)
    expected = ops.beam_step(*args, backend="cpp")
    _check(expected, args)
    for n in (2, 3, 7):
        rk.set_num_threads(n)
        for name, a, b in zip(FIELDS, ops.beam_step(*args, backend="cpp"), expected):
            assert_bitwise_equal(a, b, name=f"{name} at {n} threads")


# --------------------------------------------------------------------------- bad arguments

_NAN = np.nan
BAD = [
    ({"parent_scores": "abc"}, TypeError, "parent_scores"),
    ({"parent_scores": np.array([True, False, True])}, TypeError, "parent_scores"),
    ({"parent_scores": np.ones((3, 1))}, ValueError, "parent_scores"),
    ({"parent_scores": np.array([1.0, _NAN, 1.0])}, ValueError, "parent_scores"),
    ({"parent_scores": np.array([1.0, np.inf, 1.0])}, ValueError, "parent_scores"),
    ({"parent_scores": np.array([1.0, -0.5, 1.0])}, ValueError, "parent_scores"),
    ({"finished": np.array([0, 1, 0])}, TypeError, "finished"),
    ({"finished": np.array([False, True])}, ValueError, "finished"),
    ({"choice_probs": np.ones((3, 3), dtype=np.int64)}, TypeError, "choice_probs"),
    ({"choice_probs": np.ones(3)}, ValueError, "choice_probs"),
    ({"choice_probs": np.ones((2, 3))}, ValueError, "choice_probs"),
    ({"choice_probs": np.ones((3, 0)), "n_candidates": np.zeros(3, np.int64)}, ValueError, "choice_probs"),
    ({"choice_probs": np.array([[0.5, 1.5, 0.0]] * 3)}, ValueError, "choice_probs"),
    ({"choice_probs": np.array([[0.5, -0.1, 0.0]] * 3)}, ValueError, "choice_probs"),
    ({"choice_probs": np.array([[0.5, np.inf, 0.0]] * 3)}, ValueError, "choice_probs"),
    ({"n_candidates": np.array([0.0, 1.0, 2.0])}, TypeError, "n_candidates"),
    ({"n_candidates": np.array([0, -1, 2])}, ValueError, "n_candidates"),
    ({"n_candidates": np.array([0, 3, 2])}, ValueError, "n_candidates"),
    ({"n_candidates": np.array([0, 1])}, ValueError, "n_candidates"),
    ({"chain_offsets": np.array([0.0, 3.0])}, TypeError, "chain_offsets"),
    ({"chain_offsets": np.zeros(0, np.int64)}, ValueError, "chain_offsets"),
    ({"chain_offsets": np.array([1, 3])}, ValueError, "chain_offsets"),
    ({"chain_offsets": np.array([0, 2, 1, 3])}, ValueError, "chain_offsets"),
    ({"chain_offsets": np.array([0, 2])}, ValueError, "chain_offsets"),
    ({"chain_offsets": "0, 3"}, TypeError, "chain_offsets"),
    ({"beams": 0}, ValueError, "beams"),
    ({"beams": 2.0}, TypeError, "beams"),
    ({"beams": True}, TypeError, "beams"),
    ({"min_prob": -0.1}, ValueError, "min_prob"),
    ({"min_prob": 1.5}, ValueError, "min_prob"),
    ({"min_prob": _NAN}, ValueError, "min_prob"),
    ({"min_prob": "0.1"}, TypeError, "min_prob"),
    ({"max_chains": 0}, ValueError, "max_chains"),
    ({"max_chains": 1.5}, TypeError, "max_chains"),
    ({"backend": "triton"}, ValueError, "backend"),
    ({"backend": "gpu"}, ValueError, "backend"),
]


def _good():
    return {"parent_scores": np.array([1.0, 0.5, 0.25]), "finished": np.array([False, True, False]),
            "choice_probs": np.array([[0.5, 0.25, 0.25], [1.0, 0.0, 0.0], [_NAN, 0.5, 0.5]]),
            "n_candidates": np.array([2, 0, 1]), "chain_offsets": np.array([0, 1, 3])}


@CPU_BACKENDS
@pytest.mark.parametrize("change,exc,name", BAD, ids=[f"{b[2]}-{k}" for k, b in enumerate(BAD)])
def test_bad_input(backend, change, exc, name):
    kwargs = {**_good(), "backend": backend, **change}
    with pytest.raises(exc, match=rf"^{name}:"):
        ops.beam_step(**kwargs)


def test_core_rechecks(core):
    good = _good()
    args = [good[k] for k in ("parent_scores", "finished", "choice_probs", "n_candidates", "chain_offsets")]
    assert core.beam_step(*args, 5, 1e-4, 20)[4].tolist() == [0, 3, 5]  # A, B, C; carried over, B

    def call(k, value, *scalars):
        a = list(args)
        if k is not None:
            a[k] = value
        return core.beam_step(*a, *(scalars or (5, 1e-4, 20)))

    for k, value, exc, name in [
        (0, np.array([1.0, -1.0, 0.0]), ValueError, "parent_scores"),
        (0, np.array([1.0, np.nan, 0.0]), ValueError, "parent_scores"),
        (0, np.array([1.0, 0.0, 0.0], np.float32), TypeError, "parent_scores"),
        (1, np.array([0, 1, 0], np.uint8), TypeError, "finished"),
        (1, np.array([True, False]), ValueError, "finished"),
        (2, np.array([[0.5, 2.0, 0.0]] * 3), ValueError, "choice_probs"),
        (2, np.ones((3, 0)), ValueError, "choice_probs"),
        (2, np.ones((2, 3)), ValueError, "choice_probs"),
        (2, np.asfortranarray(np.ones((3, 3))[:, :2]), ValueError, "choice_probs"),
        (3, np.array([0, 5, 0]), ValueError, "n_candidates"),
        (4, np.array([0, 2, 1, 3]), ValueError, "chain_offsets"),
        (4, np.zeros(0, np.int64), ValueError, "chain_offsets"),
    ]:
        with pytest.raises(exc, match=rf"^{name}:"):
            call(k, value)
    for scalars, name in [((0, 1e-4, 20), "beams"), ((5, 1.5, 20), "min_prob"), ((5, np.nan, 20), "min_prob"),
                          ((5, 1e-4, 0), "max_chains")]:
        with pytest.raises(ValueError, match=rf"^{name}:"):
            call(None, None, *scalars)


@pytest.fixture
def tiny_budget():
    before = rk.get_memory_budget()
    rk.set_memory_budget(1 << 20)
    yield
    rk.set_memory_budget(before)


@CPU_BACKENDS
def test_memory_budget_checked_before_allocating(backend, tiny_budget):
    # 50,000 chains in one question, max_chains larger: up to 50,000 kept children of 25
    # bytes (1.2 MiB) > the 1 MiB budget, refused before any allocation or work.
    b = 50_000
    args = (np.ones(b), np.zeros(b, bool), np.full((b, 1), 0.5), np.zeros(b, np.int64), np.array([0, b]))
    with pytest.raises(ValueError, match=r"^max_chains: the kept children .* would need 1\.2 MiB, more than "
                                         r"the memory budget of 1\.0 MiB"):
        ops.beam_step(*args, max_chains=10**6, backend=backend)
    small = (args[0][:2000], args[1][:2000], args[2][:2000], args[3][:2000], np.array([0, 2000]))
    out = ops.beam_step(*small, max_chains=10**6, backend=backend)
    assert out.offsets.tolist() == [0, 2000] and out.parent.tolist() == list(range(2000))


def test_core_rechecks_the_budget(core, tiny_budget):
    b = 50_000
    with pytest.raises(ValueError, match=r"^max_chains: the kept children .* would need 1\.2 MiB"):
        core.beam_step(np.ones(b), np.zeros(b, bool), np.full((b, 1), 0.5), np.zeros(b, np.int64),
                       np.array([0, b]), 5, 1e-4, 10**6)
