"""Benchmarks of ReliableRAG's triple reliability against what a user runs today.

Kernels: triple_reliability (every chain against shared triples) and
triple_reliability_segmented (each chain against its own question's triples).

R(t) = alpha * cos(q, t) + (1 - alpha) * c(t) / 10 over the triples a chain has not used;
the top k by R per chain (alpha = 0.4, k = 20, 10 % of the triples used by each chain).

Providers per kernel
--------------------
baselines (the best NumPy a user would write):
  * ``numpy``          normalise, one matmul, fuse ``alpha * cos + w`` in place, mask used
                       triples with -inf, ``argpartition`` the k, sort those k (single form)
  * ``numpy-loop``     the same per question in a Python loop (segmented form)
  * ``numpy-padded``   the questions as one (Q, chains, d) x (Q, triples, d) batched matmul,
                       then the same top-k (segmented form; a free reshape only because every
                       question here has the same counts and its chains are consecutive)
ours:
  * ``rrag-cpp``       ``rrag_kernels.<op>(..., backend="cpp")`` with its defaults
  * ``reference``      the float64 truth (``backend="reference"``)

Every provider's output is checked first (a subset of chains against the reference, the
whole output against the first baseline); a wrong or failing provider gets no speed row. The
bare float32 ``Q @ T.T`` matmul of the single form is timed too and printed for context.

Usage::

    python benchmarks/bench_reliablerag.py --quick      # rows to results/reliablerag-quick.csv
    python benchmarks/bench_reliablerag.py              # the issue's sizes, results/reliablerag.csv
"""

from __future__ import annotations

import argparse
import os
import sys
from functools import partial
from pathlib import Path
from typing import Any, Iterator

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402
from harness import REFERENCE, RRAG, Case, Provider, TimingPlan, assert_close  # noqa: E402
# The cosine benchmarks' inputs (Gaussian rows; rows near others, cosine ~0.7, so cosines are
# O(1) rather than O(1/sqrt(d))) and their row normalisation.
from bench_cosine import _embeddings, _near, _normalize_np  # noqa: E402

KERNELS = ("triple_reliability", "triple_reliability_segmented")
ALPHA, K, USED_FRACTION = 0.4, 20, 0.1
#: float32 scores of different summation orders differ by ~1e-6 at d=384; a wrong kernel is
#: off by far more.
ATOL = 2e-5
CHECK_CHAINS = 300

FULL = {"dim": 384, "triple_reliability": (10_000, 200), "triple_reliability_segmented": (500, 20, 200)}
QUICK = {"dim": 384, "triple_reliability": (1_000, 200), "triple_reliability_segmented": (50, 20, 200)}


# --------------------------------------------------------------------------------------
# Baselines
# --------------------------------------------------------------------------------------


def _credibility_term(credibility: np.ndarray, alpha: float) -> np.ndarray:
    return ((1.0 - alpha) * credibility / 10.0).astype(np.float32)


def _top_k_rows(r: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(..., T) float32 scores with -inf for used triples -> the top k (scores, local indices),
    -1 / -inf padding: argpartition, then sort the k (ties by lower index)."""
    t = r.shape[-1]
    kk = min(k, t)
    scores = np.full(r.shape[:-1] + (k,), -np.inf, dtype=np.float32)
    indices = np.full(r.shape[:-1] + (k,), -1, dtype=np.int64)
    if kk == 0:
        return scores, indices
    part = np.argpartition(r, t - kk, axis=-1)[..., t - kk:]
    top = np.take_along_axis(r, part, axis=-1)
    order = np.lexsort((part, -top), axis=-1)
    best = np.take_along_axis(top, order, axis=-1)
    scores[..., :kk] = best
    indices[..., :kk] = np.where(best == -np.inf, -1, np.take_along_axis(part, order, axis=-1))
    return scores, indices


def single_numpy(q, t, credibility, used, alpha, k):
    r = _normalize_np(q) @ _normalize_np(t).T
    r *= np.float32(alpha)
    r += _credibility_term(credibility, alpha)[None, :]
    np.putmask(r, used, np.float32(-np.inf))
    return _top_k_rows(r, k)


def segmented_numpy_loop(q, t, credibility, offsets, chain_question, used, alpha, k):
    qn, tn, w = _normalize_np(q), _normalize_np(t), _credibility_term(credibility, alpha)
    sizes = np.diff(offsets)
    chain_size = sizes[chain_question]
    used_at = np.cumsum(chain_size) - chain_size
    order = np.argsort(chain_question, kind="stable")
    bounds = np.searchsorted(chain_question[order], np.arange(len(sizes) + 1))
    scores = np.full((len(chain_question), k), -np.inf, dtype=np.float32)
    indices = np.full((len(chain_question), k), -1, dtype=np.int64)
    for qi in range(len(sizes)):
        rows = order[bounds[qi]:bounds[qi + 1]]
        lo, hi = int(offsets[qi]), int(offsets[qi + 1])
        if rows.size == 0 or hi == lo:
            continue
        r = qn[rows] @ tn[lo:hi].T
        r *= np.float32(alpha)
        r += w[lo:hi][None, :]
        np.putmask(r, used[used_at[rows][:, None] + np.arange(hi - lo)], np.float32(-np.inf))
        s, i = _top_k_rows(r, k)
        scores[rows] = s
        indices[rows] = np.where(i >= 0, i + lo, -1)
    return scores, indices


def segmented_numpy_padded(q, t, credibility, offsets, chain_question, used, alpha, k):
    n_q, per_q = len(offsets) - 1, int(offsets[1] - offsets[0])
    chains = len(chain_question) // n_q
    qn = _normalize_np(q).reshape(n_q, chains, -1)
    tn = _normalize_np(t).reshape(n_q, per_q, -1)
    r = np.matmul(qn, tn.transpose(0, 2, 1))  # (Q, chains, per_q)
    r *= np.float32(alpha)
    r += _credibility_term(credibility, alpha).reshape(n_q, 1, per_q)
    np.putmask(r, used.reshape(r.shape), np.float32(-np.inf))
    s, i = _top_k_rows(r, k)
    i = np.where(i >= 0, i + offsets[:-1].reshape(n_q, 1, 1), -1)
    return s.reshape(-1, k), i.reshape(-1, k)


# --------------------------------------------------------------------------------------
# Checks
# --------------------------------------------------------------------------------------


def _checks(what: str, truth: tuple[np.ndarray, np.ndarray], rows: np.ndarray, valid_at):
    """check (against the reference on ``rows``) and compare (whole output against the anchor).

    ``valid_at(b, indices)`` says which returned indices chain b may return. Indices may
    differ from the reference only where scores tie within ATOL, so the scores are compared;
    each returned index must be one the chain may return.
    """
    ref_s, ref_i = truth

    def _valid(s, i, chains):
        if s.dtype != np.float32 or i.dtype != np.int64:
            raise AssertionError(f"{what}: dtypes {s.dtype}/{i.dtype}, expected float32/int64")
        if np.any(np.diff(s, axis=1) > 0):
            raise AssertionError(f"{what}: scores not descending")
        for b in chains[:: max(1, len(chains) // 500)]:
            got = i[b][i[b] >= 0]
            if not np.all(valid_at(b, got)) or len(np.unique(got)) != len(got):
                raise AssertionError(f"{what}: chain {b} returns a used, foreign or repeated triple")

    def check(out):
        s, i = (harness.to_numpy(x) for x in out)
        _valid(s, i, rows)
        if s.shape[1] != ref_s.shape[1]:
            raise AssertionError(f"{what}: shape {s.shape}, expected (B, {ref_s.shape[1]})")
        finite = np.isfinite(ref_s)
        if not np.array_equal(np.isfinite(s[rows]), finite):
            raise AssertionError(f"{what}: padding differs from the reference")
        assert_close(np.where(finite, s[rows], 0), np.where(finite, ref_s, 0), atol=ATOL, rtol=0, what=what)

    def compare(out, anchor):
        s, i = (harness.to_numpy(x) for x in out)
        a = harness.to_numpy(anchor[0])
        _valid(s, i, np.arange(len(s)))
        finite = np.isfinite(a)
        assert_close(np.where(finite, s, 0), np.where(finite, a, 0), atol=ATOL, rtol=0, what=f"{what} (whole output)")

    return check, compare


# --------------------------------------------------------------------------------------
# Cases
# --------------------------------------------------------------------------------------


def single_case(rk, rng: np.random.Generator, n_chains: int, n_triples: int, d: int) -> Case:
    t = _embeddings(rng, n_triples, d)
    q = _near(rng, t[rng.integers(0, n_triples, n_chains)])
    cred = rng.uniform(0, 10, n_triples)
    used = rng.random((n_chains, n_triples)) < USED_FRACTION
    rows = np.arange(min(n_chains, CHECK_CHAINS))
    truth = rk.reference.triple_reliability_ref(q[rows], t, cred, alpha=ALPHA, used=used[rows], k=K)
    check, compare = _checks("triple_reliability", truth, rows, lambda b, idx: ~used[b, idx])
    op = partial(rk.triple_reliability, q, t, cred, alpha=ALPHA, used=used, k=K)
    providers = [
        Provider("numpy", partial(single_numpy, q, t, cred, used, ALPHA, K),
                 note="normalise + matmul + fused alpha*cos + w in place + putmask(-inf) + argpartition + "
                      "sort the k"),
        Provider("rrag-cpp", partial(op, backend="cpp"), RRAG),
        Provider("reference", partial(op, backend="reference"), REFERENCE,
                 note='backend="reference": the float64 NumPy truth (a lexsort per chain)'),
    ]
    return Case("triple_reliability", f"B={n_chains} T={n_triples} d={d} k={K}",
                bytes=4.0 * (n_chains + n_triples) * d + 8.0 * n_triples + n_chains * n_triples + 12.0 * n_chains * K,
                flops=2.0 * n_chains * n_triples * d + 2.0 * (n_chains + n_triples) * d,
                providers=providers, check=check, compare=compare,
                notes=[f"{USED_FRACTION:.0%} of the triples used by each chain; alpha={ALPHA}"])


def segmented_case(rk, rng: np.random.Generator, n_questions: int, chains: int, per_q: int, d: int) -> Case:
    n_triples, n_chains = n_questions * per_q, n_questions * chains
    t = _embeddings(rng, n_triples, d)
    offsets = np.arange(0, n_triples + 1, per_q, dtype=np.int64)
    cq = np.repeat(np.arange(n_questions, dtype=np.int64), chains)
    q = _near(rng, t[offsets[cq] + rng.integers(0, per_q, n_chains)])
    cred = rng.uniform(0, 10, n_triples)
    used = rng.random(n_chains * per_q) < USED_FRACTION
    rows = np.arange(min(n_chains, CHECK_CHAINS))
    truth = rk.reference.triple_reliability_segmented_ref(
        q[rows], t, cred, offsets, cq[rows], alpha=ALPHA, used=used[: len(rows) * per_q], k=K)

    def valid_at(b, idx):
        lo = offsets[cq[b]]
        return (idx >= lo) & (idx < lo + per_q) & ~used[b * per_q + np.clip(idx - lo, 0, per_q - 1)]

    check, compare = _checks("triple_reliability_segmented", truth, rows, valid_at)
    args = (q, t, cred, offsets, cq)
    op = partial(rk.triple_reliability_segmented, *args, alpha=ALPHA, used=used, k=K)
    providers = [
        Provider("numpy-loop", partial(segmented_numpy_loop, *args, used, ALPHA, K),
                 note="per question: (chains x d) @ (d x triples) + fuse + putmask + argpartition + sort"),
        Provider("numpy-padded", partial(segmented_numpy_padded, *args, used, ALPHA, K),
                 note="one batched matmul over (Q, chains, d) x (Q, triples, d) (equal counts: free reshape)"),
        Provider("rrag-cpp", partial(op, backend="cpp"), RRAG),
        Provider("reference", partial(op, backend="reference"), REFERENCE,
                 note='backend="reference": the float64 NumPy truth (a lexsort per chain)'),
    ]
    return Case("triple_reliability_segmented", f"Q={n_questions} chains/q={chains} triples/q={per_q} d={d} k={K}",
                bytes=4.0 * (n_chains + n_triples) * d + 8.0 * n_triples + 16.0 * n_chains + used.size
                + 12.0 * n_chains * K,
                flops=2.0 * n_chains * per_q * d + 2.0 * (n_chains + n_triples) * d,
                providers=providers, check=check, compare=compare,
                notes=[f"{USED_FRACTION:.0%} of each chain's triples used; alpha={ALPHA}"])


def cases(kernel: str, rk, sizes: dict, rng: np.random.Generator) -> Iterator[Case]:
    if kernel == "triple_reliability":
        yield single_case(rk, rng, *sizes[kernel], sizes["dim"])
    else:
        yield segmented_case(rk, rng, *sizes[kernel], sizes["dim"])


def matmul_context(sizes: dict, plan: TimingPlan) -> None:
    """Time the single form's bare float32 ``Q @ T.T`` (no norms, no top-k) and print it."""
    n_chains, n_triples = sizes["triple_reliability"]
    rng = np.random.default_rng(1)
    q, t = _embeddings(rng, n_chains, sizes["dim"]), _embeddings(rng, n_triples, sizes["dim"])
    timing = harness.time_providers([Provider("numpy-matmul", lambda: q @ t.T)], plan)["numpy-matmul"]
    print(f"\ncontext: bare float32 Q @ T.T at B={n_chains} T={n_triples} d={sizes['dim']}: "
          f"median {timing.median:.2f} ms (p20 {timing.p20:.2f}, p80 {timing.p80:.2f})")


def main(argv: list[str] | None = None) -> int:
    rk = harness.import_rrag()
    import rrag_kernels.reference  # noqa: F401  (rk.reference, for the truth)

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    harness.add_common_args(parser, KERNELS)
    parser.add_argument("--seed", type=int, default=0, help="seed of the inputs")
    args = parser.parse_args(argv)

    harness.set_threads(args.threads, rk)
    sizes = QUICK if args.quick else FULL
    load = os.getloadavg()
    print(f"load average before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} (1/5/15 min) on "
          f"{os.cpu_count()} cores: other processes share the machine when this exceeds ~0")
    rng = np.random.default_rng(args.seed)
    factories = [(k, partial(cases, k, rk, sizes, rng)) for k in KERNELS]
    results = harness.run_cases("reliablerag", factories, args, rk)
    harness.print_ratios_vs_rrag(results)
    if not args.kernel or "triple_reliability" in args.kernel:
        matmul_context(sizes, TimingPlan.quick() if args.quick else TimingPlan())
    load = os.getloadavg()
    print(f"load average after: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
