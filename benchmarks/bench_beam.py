"""Benchmark of ReliableRAG's beam step over reasoning chains against what a researcher writes today.

Kernel: ``beam_step`` (one hop of TRACE's ``construct_reasoning_chains`` beam search).

Case
----
``beam_step`` at 10,000 beams: Q = 500 questions x 20 chains, C = 21 choices ('A' + 20
candidate letters), beams = 5, max_chains F = 20 (``--quick``: Q = 100, 2,000 beams). The
letter probabilities look like an LLM's renormalised top logprobs: a peaked distribution
over the letters that came up (about 12 of 21), NaN for the rest; ~10 % of the chains are
finished, ~1 % of the replies held no choice (an all-NaN row), and ~30 % of the chains were
shown fewer than 20 candidates (their letters past the candidates use up a beam slot).
  * ``python-loop``       ``rrag_kernels.reference.beam_step_ref``: the reference's loop
                          over questions and chains, a sort per row, a stable sort per
                          question (what the TRACE code does, in one function)
  * ``numpy-vectorised``  stable ``argsort`` of -p per row (NaN last, lower column first on
                          ties), top 5, masks for NaN / min_prob / letters past the
                          candidates / finished, one multiply, carried-over chains in rank 0,
                          then one ``np.lexsort`` on (emission order, -score, question) and a
                          rank-within-question cut at F
  * ``rrag-cpp``          ``beam_step(..., backend="cpp")``

Every provider's output (all five fields, scores bitwise) is checked against the reference
first; a wrong one gets no speed row. Rows go to ``benchmarks/results/reliablerag.csv``
(``reliablerag-quick.csv`` with ``--quick``), shared with the other ReliableRAG benchmarks.

Usage::

    python benchmarks/bench_beam.py --quick
    python benchmarks/bench_beam.py --threads 2
"""

from __future__ import annotations

import argparse
import sys
from functools import partial
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402
from harness import BASELINE, RRAG, Case, Provider  # noqa: E402

KERNELS = ("beam_step",)
N_CHOICES, BEAMS, MIN_PROB, MAX_CHAINS = 21, 5, 1e-4, 20
FULL = ((500, 20),)  # (questions, chains per question)
QUICK = ((100, 20),)
FIELDS = ("parent", "choice", "score", "finished", "offsets")


def random_hop(rng, n_questions: int, chains: int):
    """One hop's inputs, shaped like ReliableRAG's (see the module docstring)."""
    b = n_questions * chains
    logits = rng.normal(0.0, 2.0, size=(b, N_CHOICES))
    came_up = rng.random((b, N_CHOICES)) < 12 / N_CHOICES
    came_up[np.arange(b), np.argmax(logits, axis=1)] = True  # the reply's own letter is always there
    came_up[rng.random(b) < 0.01] = False
    p = np.where(came_up, np.exp(logits), 0.0)
    with np.errstate(invalid="ignore"):
        p = p / p.sum(axis=1, keepdims=True)
    p[~came_up] = np.nan
    scores = rng.uniform(0.05, 1.0, size=b)
    finished = rng.random(b) < 0.1
    n_cand = np.where(rng.random(b) < 0.3, rng.integers(1, N_CHOICES - 1, size=b), N_CHOICES - 1).astype(np.int64)
    offsets = np.arange(0, b + 1, chains, dtype=np.int64)
    return scores, finished, p, n_cand, offsets


def numpy_beam_step(scores, finished, probs, n_cand, offsets, beams=BEAMS, min_prob=MIN_PROB,
                    max_chains=MAX_CHAINS):
    """The vectorised NumPy beam step: the same rules as the reference, in whole-array steps."""
    b, c = probs.shape
    kb = min(beams, c)
    # Stable argsort of -p: descending probability, the lower column first on ties, NaN last.
    cols = np.argsort(-probs, axis=1, kind="stable")[:, :kb]
    p = np.take_along_axis(probs, cols, axis=1)
    present = ~np.isnan(p)
    carried = finished | ~present[:, 0]  # finished, or no choice in the reply
    emit = present & (p >= min_prob) & ((cols == 0) | (cols - 1 < n_cand[:, None])) & ~carried[:, None]
    emit[:, 0] |= carried  # a carried-over chain takes its rank-0 slot
    slot = np.flatnonzero(emit)  # chain-major, rank-minor: the emission order
    parent = slot // kb
    rank0 = cols.reshape(-1)[slot]
    carry = carried[parent]
    choice = np.where(carry, -1, rank0)
    score = np.where(carry, scores[parent], scores[parent] * p.reshape(-1)[slot])
    question = np.repeat(np.arange(len(offsets) - 1), np.diff(offsets))[parent]
    order = np.lexsort((slot, -score, question))
    question = question[order]
    counts = np.bincount(question, minlength=len(offsets) - 1)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    keep = order[np.arange(len(order)) - starts[question] < max_chains]
    kept = np.minimum(counts, max_chains)
    done = np.where(carry[keep], finished[parent[keep]], choice[keep] == 0)
    return (parent[keep].astype(np.int64), choice[keep].astype(np.int64), score[keep], done,
            np.concatenate([[0], np.cumsum(kept)]).astype(np.int64))


def _same(out, want) -> None:
    for name, x, y in zip(FIELDS, out, want):
        x, y = harness.to_numpy(x), harness.to_numpy(y)
        if x.dtype != y.dtype or x.shape != y.shape:
            raise AssertionError(f"{name}: {x.dtype}{x.shape} != {y.dtype}{y.shape}")
        if x.tobytes() != y.tobytes():
            raise AssertionError(f"{name} differs (first at {int(np.argmax(x != y))})")


def beam_cases(ops, rng, sizes):
    from rrag_kernels import reference as ref

    for n_questions, chains in sizes:
        args = random_hop(rng, n_questions, chains)
        kwargs = {"beams": BEAMS, "min_prob": MIN_PROB, "max_chains": MAX_CHAINS}
        providers = [
            Provider("python-loop", partial(ref.beam_step_ref, *args, **kwargs), BASELINE,
                     "rrag_kernels.reference.beam_step_ref: loops over questions and chains"),
            Provider("numpy-vectorised", partial(numpy_beam_step, *args, **kwargs), BASELINE,
                     "stable argsort top-5 per row, masks, one lexsort (emission, -score, question)"),
        ]
        if ops is not None:
            providers.append(Provider("rrag-cpp", partial(ops.beam_step, *args, **kwargs, backend="cpp"), RRAG))
        want = ref.beam_step_ref(*args, **kwargs)
        b = n_questions * chains
        nbytes = b * (8 + 1 + 8 * N_CHOICES + 8) + 8 * (n_questions + 1) + 25 * len(want[0])
        dropped = int(np.count_nonzero(np.diff(want[4]) < MAX_CHAINS))
        yield Case("beam_step", f"Q={n_questions} chains/q={chains} C={N_CHOICES} beams={BEAMS} F={MAX_CHAINS}",
                   float(nbytes), 0.0, providers, check=partial(_same, want=want), compare=_same,
                   notes=[f"{len(want[0])} children kept of {b} chains; {dropped} questions kept fewer than F"])


def cpp_ops():
    """``rrag_kernels.ops`` when its C++ ``beam_step`` runs, else None (baselines only)."""
    try:
        from rrag_kernels import ops

        ops.beam_step([1.0], [False], [[1.0]], [0], [0, 1], backend="cpp")
        return ops
    except Exception as exc:  # unbuilt package
        print(f"note: rrag_kernels C++ beam_step unavailable ({exc}); timing baselines only")
        return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    harness.add_common_args(parser, KERNELS)
    args = parser.parse_args(argv)
    rk = harness.import_rrag()
    ops = cpp_ops()
    harness.set_threads(args.threads, rk)
    factory = partial(beam_cases, ops, np.random.default_rng(args.seed), QUICK if args.quick else FULL)
    results = harness.run_cases("reliablerag", [("beam_step", factory)], args, rk)
    harness.print_ratios_vs_rrag(results, unit="us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
