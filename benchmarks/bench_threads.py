"""Threads on a busy machine: every kernel with and without a background load (issue 9).

Users run these kernels beside other work (a multi-worker server, a shared box). The
question is whether the kernels' threads behave there: a kernel must never lose to the
NumPy a user would write because its own threads wait for each other.

For each kernel at one typical shape, in one process, twice -- on a quiet machine and while
``--load`` (default 2) busy processes (``while True: pass``) run beside it -- this times:

  * ``rrag``      the op at the default thread count (``rrag_kernels.get_num_threads()``)
  * ``rrag-1t``   the op with ``set_num_threads(1)``
  * baselines     what a user writes (the same functions as the per-kernel benchmarks),
                  as installed (NumPy's BLAS at its own thread count) and, where BLAS does
                  the work, also with BLAS limited to one thread; the best one is the
                  baseline of that condition

Providers run interleaved (the order rotates between rounds), so a drift of the machine hits
all of them alike. It prints one table and appends one CSV row per (condition, kernel,
provider) to ``benchmarks/results/threads.csv`` (``mode`` = ``quiet`` or ``load2``), from
which ``make_table.py`` builds the README's table. The targets of issue 9: under load, at
default settings, every kernel >= 1x its best baseline and within 1.5x of its own 1-thread
time. Timing never asserts anything.

Usage::

    python benchmarks/bench_threads.py                   # ~3 minutes
    python benchmarks/bench_threads.py --quick           # smaller, fewer rounds (results-quick)
    python benchmarks/bench_threads.py --kernel segmented_cosine --kernel claim_relevance
    python benchmarks/bench_threads.py --load 4
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Callable

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_beam  # noqa: E402
import bench_conformal  # noqa: E402
import bench_cosine  # noqa: E402
import bench_mirage  # noqa: E402
import bench_nli  # noqa: E402
import bench_reliablerag  # noqa: E402
import harness  # noqa: E402

KERNELS = (
    "cosine_matrix", "segmented_cosine", "claim_relevance", "topk_cosine",
    "claim_token_ids", "select_pairs", "nli_graph", "greedy_prune", "gate_stats",
    "lexical_opcodes", "r_scores", "conformal_quantile", "conformal_sweep",
    "triple_reliability", "beam_step",
)
D = 384


@dataclass
class Spec:
    """One kernel at one shape: the op call and the baselines (name -> (fn, uses_blas))."""

    kernel: str
    shape: str
    rrag: Callable[[], Any]
    baselines: dict[str, tuple[Callable[[], Any], bool]]
    check: Callable[[Any, Any], None]
    notes: list[str] = field(default_factory=list)


def _close(atol: float = 2e-5) -> Callable[[Any, Any], None]:
    def check(out, base):
        harness.assert_close(out, base, atol=atol, rtol=1e-4, what="rrag vs baseline")
    return check


def _equal_arrays(out, base) -> None:
    for k, (x, y) in enumerate(zip(out, base)):
        if not np.array_equal(harness.to_numpy(x), harness.to_numpy(y)):
            raise AssertionError(f"output {k} differs from the baseline's")


def _tokens_numpy(texts):
    """claim_token_ids as a user writes it: the regex per text, ids from a dict."""
    vocab: dict[str, int] = {}
    ids, off = [], [0]
    for toks in bench_mirage.regex_tokens(texts):
        ids.extend(vocab.setdefault(t, len(vocab)) for t in toks)
        off.append(len(ids))
    return np.array(ids, dtype=np.int64), np.array(off, dtype=np.int64)


def _graph_check(out, base) -> None:
    for name, x, y in zip(bench_mirage.GRAPH_FIELDS, out, base):
        if not np.array_equal(harness.to_numpy(x), np.asarray(y)):
            raise AssertionError(f"nli_graph {name} differs")


def _prune_check(out, base) -> None:
    keep, _, _ = out
    if not np.array_equal(keep, base[0]):
        raise AssertionError("greedy_prune keep differs")


def _sweep_check(out, base) -> None:
    if not np.array_equal(out.q_hat[:, :, 0], base["q_hat"]):
        raise AssertionError("conformal_sweep q_hat differs")


def _stats_check(out, base) -> None:
    if dict(out) != dict(base):
        raise AssertionError(f"gate stats differ: {out} vs {base}")


def _exact(what: str) -> Callable[[Any, Any], None]:
    def check(out, base):
        if not np.array_equal(harness.to_numpy(out), harness.to_numpy(base)):
            raise AssertionError(f"{what} differs from the baseline's")
    return check


def build_specs(rk, quick: bool, kernels: tuple[str, ...]) -> list[Spec]:
    """The inputs and providers of every kernel (one shape each; smaller with ``quick``)."""
    from rrag_kernels import reference as ref

    rng = np.random.default_rng(0)
    scale = 4 if quick else 1
    specs: list[Spec] = []
    want = set(kernels)

    def emb(n):
        return rng.standard_normal((n, D), dtype=np.float32)

    if "cosine_matrix" in want:
        a, b = emb(1024 // scale), emb(4096 // scale)
        specs.append(Spec("cosine_matrix", f"n={len(a)} m={len(b)} d={D}", partial(rk.cosine_matrix, a, b),
                          {"numpy": (partial(bench_cosine.cosine_matrix_numpy, a, b), True)}, _close()))
    if "segmented_cosine" in want:
        q, per = 1000 // scale, 20
        queries, docs = emb(q), emb(q * per)
        off = np.arange(0, q * per + 1, per, dtype=np.int64)
        specs.append(Spec("segmented_cosine", f"Q={q} docs/q={per} d={D}", partial(rk.segmented_cosine, queries, docs, off),
                          {"numpy-padded": (partial(bench_cosine.segmented_numpy_padded, queries, docs, off), True),
                           "numpy-segids": (partial(bench_cosine.segmented_numpy_segids, queries, docs, off), False)},
                          _close()))
    if "claim_relevance" in want:
        q, per_d, per_c = 1000 // scale, 20, 8
        queries, docs, claims = emb(q), emb(q * per_d), emb(q * per_c)
        d_off = np.arange(0, q * per_d + 1, per_d, dtype=np.int64)
        c_off = np.arange(0, q * per_c + 1, per_c, dtype=np.int64)
        specs.append(Spec("claim_relevance", f"Q={q} docs/q={per_d} claims/q={per_c} d={D}",
                          partial(rk.claim_relevance, queries, docs, d_off, claims, c_off),
                          {"numpy-padded": (partial(bench_cosine.claim_numpy_padded, queries, docs, d_off, claims, c_off),
                                            True)}, _close()))
    if "topk_cosine" in want:
        queries, corpus = emb(256 // scale), emb(50_000 // scale)
        k = 10

        def check_topk(out, base):
            harness.assert_close(out[0], base[0], atol=2e-5, rtol=1e-4, what="top-k scores")

        specs.append(Spec("topk_cosine", f"Q={len(queries)} N={len(corpus)} k={k} d={D}",
                          partial(rk.topk_cosine, queries, corpus, k),
                          {"numpy-chunked": (partial(bench_cosine.topk_numpy_chunked, queries, corpus, k), True)},
                          check_topk))
    corpus_words = bench_mirage.Corpus(np.random.default_rng(1))
    if "claim_token_ids" in want:
        texts, _ = corpus_words.claims(rng, 5000 // scale)
        specs.append(Spec("claim_token_ids", f"N={len(texts)} claims", partial(rk.claim_token_ids, texts),
                          {"python-regex": (partial(_tokens_numpy, texts), False)}, _equal_arrays))
    if "select_pairs" in want:
        texts, src = corpus_words.claims(rng, 1000 // scale)
        ids, off = rk.claim_token_ids(texts)
        tau, cap = bench_mirage.TAU, bench_mirage.P_MAX
        import scipy.sparse as sp

        specs.append(Spec("select_pairs", f"N={len(texts)} tau={tau} P_max={cap}",
                          partial(rk.select_pairs, ids, off, src, tau=tau, max_pairs=cap),
                          {"scipy-sparse": (partial(bench_mirage.scipy_pairs, sp, ids, off, src, tau, cap), False)},
                          _equal_arrays))
    if "nli_graph" in want:
        n, p = 10_000 // scale, 100_000 // scale
        i, j, fwd, bwd = bench_mirage.random_pairs_probs(rng, n, p)
        specs.append(Spec("nli_graph", f"N={n} P={p}", partial(rk.nli_graph, i, j, fwd, bwd, n),
                          {"numpy": (partial(bench_mirage.numpy_nli_graph, i, j, fwd, bwd, n), False)}, _graph_check))
    if "greedy_prune" in want:
        n, e = 10_000 // scale, 100_000 // scale
        s, ei, ej, w = bench_mirage.random_graph(rng, n, e)
        specs.append(Spec("greedy_prune", f"N={n} E={e}", partial(rk.greedy_prune, s, ei, ej, w),
                          {"numpy-vectorised": (partial(bench_mirage.numpy_greedy, s, ei, ej, w), False)},
                          _prune_check))
    if "gate_stats" in want:
        n, e = 10_000 // scale, 100_000 // scale
        keep, ei, ej, kind, dom = bench_mirage.random_gate_input(rng, n, e)
        specs.append(Spec("gate_stats", f"N={n} E={e}", partial(rk.gate_stats, keep, ei, ej, kind, dom),
                          {"numpy": (partial(bench_mirage.numpy_gate_stats, keep, ei, ej, kind, dom), False)},
                          _stats_check))
    if "lexical_opcodes" in want:
        premises, hypotheses = bench_nli.minimal_edit_pairs(rng, 2000 // scale)
        (ta, oa), (tb, ob) = bench_nli._csr(premises), bench_nli._csr(hypotheses)
        specs.append(Spec("lexical_opcodes", f"pairs={len(premises)} tokens=8-40",
                          partial(rk.lexical_opcodes, ta, oa, tb, ob),
                          {"python-loop": (partial(bench_nli.opcodes_python, ref, premises, hypotheses, True), False)},
                          _equal_arrays))
    if "r_scores" in want:
        s, ok, off = bench_conformal.make_data(rng, 1_000_000 // scale)
        specs.append(Spec("r_scores", f"n={len(off) - 1} p={bench_conformal.P} a=1", partial(rk.r_scores, s, ok, off),
                          {"numpy": (partial(bench_conformal.r_scores_numpy_a1, s, ok, off), False)}, _exact("r")))
    if "conformal_quantile" in want:
        r = rng.random(1_000_000 // scale)
        alphas = bench_conformal.ALPHAS
        ranks = [ref.conformal_rank(len(r), a) for a in alphas.tolist()]
        specs.append(Spec("conformal_quantile", f"n={len(r)} alphas={len(alphas)}",
                          partial(rk.conformal_quantile, r, alphas),
                          {"numpy-partition": (partial(bench_conformal.quantile_numpy_partition, r, ranks), False)},
                          _exact("q_hat")))
    if "conformal_sweep" in want:
        # The NumPy baseline always runs bench_conformal's N_SPLITS splits, so the op does too.
        s, ok, off = bench_conformal.make_data(rng, 10_000)
        splits, alphas = bench_conformal.N_SPLITS, bench_conformal.ALPHAS
        specs.append(Spec("conformal_sweep", f"n=10000 p={bench_conformal.P} alphas={len(alphas)} splits={splits}",
                          partial(rk.conformal_sweep, s, ok, off, alphas=alphas, n_splits=splits, seed=0),
                          {"numpy": (partial(bench_conformal.sweep_numpy, ref, s, ok, off, 0), False)}, _sweep_check))
    if "triple_reliability" in want:
        b, t, k, alpha = 10_000 // scale, 200, 20, 0.4
        q, tr = emb(b), emb(t)
        cred = rng.integers(0, 11, size=t).astype(np.float64)
        used = rng.random((b, t)) < 0.02

        def check_reliability(out, base):
            harness.assert_close(out[0], base[0], atol=2e-5, rtol=1e-4, what="reliability scores")

        specs.append(Spec("triple_reliability", f"B={b} T={t} k={k} d={D}",
                          partial(rk.triple_reliability, q, tr, cred, alpha=alpha, used=used, k=k),
                          {"numpy": (partial(bench_reliablerag.single_numpy, q, tr, cred, used, alpha, k), True)},
                          check_reliability))
    if "beam_step" in want:
        hop = bench_beam.random_hop(rng, 500 // scale, 20)
        specs.append(Spec("beam_step", f"Q={500 // scale} chains/q=20 C={bench_beam.N_CHOICES}",
                          partial(rk.beam_step, *hop),
                          {"numpy-vectorised": (partial(bench_beam.numpy_beam_step, *hop), False)}, _equal_arrays))
    return specs


# ------------------------------------------------------------------------------ load and timing


@dataclass
class Provider:
    name: str
    fn: Callable[[], Any]
    threads: int  # the rrag thread count, or the BLAS limit (0 = as installed)
    kind: str


def providers_of(rk, spec: Spec, default_threads: int) -> list[Provider]:
    from threadpoolctl import threadpool_limits

    def with_rrag_threads(n):
        def call():
            rk.set_num_threads(n)
            try:
                return spec.rrag()
            finally:
                rk.set_num_threads(default_threads)
        return call

    def with_blas_limit(fn):
        def call():
            with threadpool_limits(limits=1, user_api="blas"):
                return fn()
        return call

    out = [Provider("rrag", spec.rrag, default_threads, harness.RRAG),
           Provider("rrag-1t", with_rrag_threads(1), 1, harness.RRAG)]
    for name, (fn, uses_blas) in spec.baselines.items():
        out.append(Provider(name, fn, 0, harness.BASELINE))
        if uses_blas:
            out.append(Provider(f"{name} (1 BLAS thread)", with_blas_limit(fn), 1, harness.BASELINE))
    return out


def time_interleaved(providers: list[Provider], rounds: int, block_s: float) -> dict[str, np.ndarray]:
    """Per provider, the per-call times (ms) of ``rounds`` blocks, provider order rotating."""
    samples: dict[str, list[float]] = {p.name: [] for p in providers}
    for r in range(rounds):
        order = providers[r % len(providers):] + providers[:r % len(providers)]
        for p in order:
            t_block = time.perf_counter()
            while True:
                t0 = time.perf_counter()
                p.fn()
                samples[p.name].append((time.perf_counter() - t0) * 1e3)
                if time.perf_counter() - t_block >= block_s or len(samples[p.name]) >= 200 * (r + 1):
                    break
    return {k: np.array(v) for k, v in samples.items()}


def run_condition(rk, specs: list[Spec], label: str, rounds: int, block_s: float, meta: dict[str, str],
                  mode: str) -> tuple[list[dict[str, str]], dict[str, dict[str, float]]]:
    default_threads = rk.get_num_threads()
    rows, medians = [], {}
    stamp = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    for spec in specs:
        provs = providers_of(rk, spec, default_threads)
        for p in provs:  # warm up (and load pool threads, BLAS, caches)
            p.fn()
        times = time_interleaved(provs, rounds, block_s)
        med = {name: float(np.median(t)) for name, t in times.items()}
        best_name = min((p.name for p in provs if p.kind == harness.BASELINE), key=med.__getitem__)
        base = med[best_name]
        medians[spec.kernel] = med | {"_best_baseline": base, "_best_name": best_name}
        for p in provs:
            t = times[p.name]
            rows.append({**meta, "timestamp": stamp, "threads": str(p.threads), "mode": mode, "kernel": spec.kernel,
                         "provider": p.name, "kind": p.kind, "shape": spec.shape,
                         "median_ms": f"{med[p.name]:.4f}", "p20_ms": f"{np.percentile(t, 20):.4f}",
                         "p80_ms": f"{np.percentile(t, 80):.4f}", "samples": str(len(t)),
                         "speedup_vs_best_baseline": f"{base / med[p.name]:.3f}", "best_baseline": best_name})
        m = medians[spec.kernel]
        print(f"  [{label}] {spec.kernel:<18} rrag {m['rrag']:8.3f} ms  1t {m['rrag-1t']:8.3f} ms  "
              f"best baseline {base:8.3f} ms ({best_name})", flush=True)
    return rows, medians


def check_specs(rk, specs: list[Spec]) -> list[Spec]:
    """Drop (with a note) a spec whose op output disagrees with its first baseline."""
    good = []
    for spec in specs:
        first = next(iter(spec.baselines.values()))[0]
        try:
            spec.check(spec.rrag(), first())
        except Exception as exc:
            print(f"  {spec.kernel}: output check failed ({harness._short_error(exc)}); no timing")
            continue
        good.append(spec)
    return good


def summary(quiet: dict[str, dict[str, float]], loaded: dict[str, dict[str, float]], n_load: int) -> None:
    print(f"\nkernel               quiet: vs baseline   load {n_load}: vs baseline   vs own 1-thread   targets")
    for kernel in quiet:
        q, lo = quiet[kernel], loaded[kernel]
        vs_base_q = q["_best_baseline"] / q["rrag"]
        vs_base_l = lo["_best_baseline"] / lo["rrag"]
        vs_1t = lo["rrag"] / lo["rrag-1t"]
        ok = "ok" if vs_base_l >= 1.0 and vs_1t <= 1.5 else "MISSED"
        print(f"{kernel:<20} {vs_base_q:10.2f}x          {vs_base_l:10.2f}x          {vs_1t:8.2f}x time    {ok}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kernel", action="append", choices=KERNELS, help="only these kernels (repeatable)")
    parser.add_argument("--load", type=int, default=2, help="busy background processes (default 2)")
    parser.add_argument("--quick", action="store_true", help="smaller shapes, fewer rounds; rows to threads-quick.csv")
    parser.add_argument("--rounds", type=int, default=None, help="rounds per condition (default 7, quick 3)")
    parser.add_argument("--no-csv", action="store_true", help="print only")
    args = parser.parse_args(argv)
    if args.load < 1:
        parser.error("--load: must be >= 1")
    rk = harness.import_rrag()
    kernels = tuple(args.kernel or KERNELS)
    rounds = args.rounds or (3 if args.quick else 7)
    block_s = 0.05 if args.quick else 0.15
    missing = [k for k in kernels if not hasattr(rk, k)]
    if missing:  # an older build (e.g. to compare with the OpenMP one)
        print(f"note: this rrag_kernels has no {', '.join(missing)}; left out")
        kernels = tuple(k for k in kernels if k not in missing)
    specs = check_specs(rk, build_specs(rk, args.quick, kernels))
    meta = harness.machine_info(rk.get_num_threads(), rk)
    print(f"threads={rk.get_num_threads()} cores={meta['cores']} load={args.load} rounds={rounds}")
    quiet_rows, quiet = run_condition(rk, specs, "quiet", rounds, block_s, meta, "quiet")
    with harness.busy_processes(args.load):
        load_rows, loaded = run_condition(rk, specs, f"load {args.load}", rounds, block_s, meta, f"load{args.load}")
    summary(quiet, loaded, args.load)
    if not args.no_csv:
        path = harness.RESULTS_DIR / ("threads-quick.csv" if args.quick else "threads.csv")
        harness.append_csv(path, quiet_rows + load_rows)
        print(f"\n{len(quiet_rows) + len(load_rows)} rows appended to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
