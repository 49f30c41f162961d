"""Soak run: the MIRAGE defense, the conformal claim filter and the kernels, over and over, on
random valid inputs from several threads; reports peak RSS at the start and the end.

    python benchmarks/soak.py                       # 2,000 iterations per thread, 4 threads
    python benchmarks/soak.py --iterations 50 --threads 2 --max-growth-mb 64

Each iteration draws fresh seeded inputs and runs: ``cosine_matrix``, ``topk_cosine``,
``segmented_cosine``, ``triple_reliability``, ``conformal_quantile``, a
``ClaimConformal`` calibrate + filter, and ``MirageDefense(nli="lexical").defend`` on a few
random passages. Results are checked against what they must be (shapes, finite values, kept
claims a subset of the candidates); any exception is an error. Peak RSS (``ru_maxrss``) is
read after a warm-up round and at the end: growth beyond ``--max-growth-mb`` (default 64 MiB)
means memory is leaking, and the run exits 1, as it does on any error.
"""

from __future__ import annotations

import argparse
import resource
import sys
import threading
import time
import traceback

import numpy as np

WORDS = ("river bridge tower museum opened closed built designed city north south 1889 1905 1914 "
         "Paris Lyon engineer Gustave Eiffel Maria Lopez metres tall long wide the of in by and was").split()


def _peak_rss_mb() -> float:
    # ru_maxrss is in KiB on Linux.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _sentence(rng: np.random.Generator) -> str:
    words = rng.choice(WORDS, size=int(rng.integers(4, 12)))
    return " ".join(words).capitalize() + "."


def _passages(rng: np.random.Generator) -> list[dict]:
    hosts = ("en.wikipedia.org", "example.com", "news.example.org", "blog.example.net")
    return [{"text": " ".join(_sentence(rng) for _ in range(int(rng.integers(1, 4)))),
             "url": f"https://{hosts[int(rng.integers(0, len(hosts)))]}/{n}",
             "retrieval_score": float(rng.uniform(0.1, 1.0))}
            for n in range(int(rng.integers(1, 7)))]


def one_iteration(rk, defense, rng: np.random.Generator) -> None:
    """One round of every workload on fresh inputs; raises AssertionError on a wrong result."""
    from rrag_kernels.pipelines.conformal import ClaimConformal

    n, m, d = (int(x) for x in rng.integers(1, 64, 3))
    a = rng.standard_normal((n, d), dtype=np.float32)
    b = rng.standard_normal((m, d), dtype=np.float32)
    c = rk.cosine_matrix(a, b)
    assert c.shape == (n, m) and np.isfinite(c).all()
    k = int(rng.integers(1, m + 1))
    s, i = rk.topk_cosine(a, b, k)
    assert s.shape == (n, k) and (i >= 0).all() and (i < m).all()
    counts = rng.integers(0, 5, n)
    docs = rng.standard_normal((int(counts.sum()), d), dtype=np.float32)
    off = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    assert rk.segmented_cosine(a, docs, off).shape == (docs.shape[0],)
    cred = rng.uniform(0, 10, m)
    used = rng.random((n, m)) < 0.2
    s, i = rk.triple_reliability(a, b, cred, alpha=0.4, used=used, k=k)
    assert all(not used[r, j] for r in range(n) for j in i[r] if j >= 0)
    scores = rng.random(200)
    q = rk.conformal_quantile(scores, 0.1)
    assert np.isfinite(q)
    cal = ClaimConformal(alpha=float(rng.uniform(0.05, 0.5)))
    sizes = rng.integers(1, 6, 30)
    coff = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    cs = rng.random(int(coff[-1]))
    cal.calibrate(cs, rng.random(cs.size) < 0.6, coff)
    kept = cal.filter(cs, coff)
    assert kept.shape == cs.shape
    result = defense.defend(_sentence(rng), _passages(rng))
    assert all(cl.kept in (True, False) for cl in result.claims)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iterations", type=int, default=2000, help="iterations per thread (default 2000)")
    parser.add_argument("--threads", type=int, default=4, help="Python threads (default 4)")
    parser.add_argument("--max-growth-mb", type=float, default=64.0,
                        help="allowed peak-RSS growth after the warm-up round (default 64 MiB)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.iterations < 1 or args.threads < 1:
        parser.error("--iterations and --threads must be >= 1")

    import rrag_kernels as rk
    from rrag_kernels.pipelines.mirage import MirageDefense

    defense = MirageDefense(nli="lexical")
    one_iteration(rk, defense, np.random.default_rng(args.seed))  # warm-up: imports, pools, caches
    start_rss = _peak_rss_mb()
    errors: list[str] = []
    done = [0] * args.threads
    lock = threading.Lock()

    def worker(t: int) -> None:
        rng = np.random.default_rng([args.seed, t])
        for _ in range(args.iterations):
            try:
                one_iteration(rk, defense, rng)
            except Exception:  # every error is reported, the soak goes on
                with lock:
                    errors.append(traceback.format_exc(limit=3))
            done[t] += 1

    t0 = time.perf_counter()
    threads = [threading.Thread(target=worker, args=(t,)) for t in range(args.threads)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    seconds = time.perf_counter() - t0
    end_rss = _peak_rss_mb()
    growth = end_rss - start_rss
    print(f"soak: {sum(done)} iterations ({args.threads} threads x {args.iterations}) in {seconds:.1f} s; "
          f"peak RSS {start_rss:.1f} MiB after warm-up, {end_rss:.1f} MiB at the end (growth {growth:.1f} MiB, "
          f"bound {args.max_growth_mb:.0f}); {len(errors)} errors")
    for e in errors[:5]:
        print(e, file=sys.stderr)
    return 1 if errors or growth > args.max_growth_mb else 0


if __name__ == "__main__":
    sys.exit(main())
