"""``rrag bench``: a short throughput check of a few kernels on random data.

Not the benchmark harness (``benchmarks/``, not in the wheel, writes the results CSVs): this
runs from an installed package in seconds and prints, per kernel and backend, the median
time with p20 / p80 over ``--repeat`` calls after one warm-up call, and a throughput.
"""

from __future__ import annotations

import argparse
import time
from typing import Any, Callable

from .common import UsageError, int_at_least

BACKENDS = ("auto", "cpp", "reference")


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p = sub.add_parser("bench", help="a short kernel throughput check on random data (medians)",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="small sizes and 3 repeats (well under a second)")
    p.add_argument("--repeat", type=int_at_least(1), default=None, help="timed calls per case (default 10; 3 quick)")
    p.add_argument("--backend", nargs="+", default=["auto"], choices=BACKENDS,
                   help="backends to time (default auto: C++ for numpy input when built; reference: the "
                        "slow NumPy truth)")
    p.add_argument("--seed", type=int_at_least(0), default=0, help="seed of the random data")
    p.set_defaults(func=run)
    return p


def _cases(quick: bool, seed: int) -> list[tuple[str, str, float, str, Callable[[str | None], Any]]]:
    """(kernel, size, work units per call, unit, call(backend))."""
    import numpy as np

    from .. import ops

    rng = np.random.default_rng(seed)
    d = 384
    n, m = (256, 1024) if quick else (1024, 8192)
    a = rng.standard_normal((n, d), dtype=np.float32)
    b = rng.standard_normal((m, d), dtype=np.float32)
    q, k = (16, 10)
    per = 64 if quick else 512
    docs = rng.standard_normal((q * per, d), dtype=np.float32)
    offsets = np.arange(0, q * per + 1, per, dtype=np.int64)
    r = 2000 if quick else 20_000
    sizes = rng.integers(1, 12, size=r)
    c_off = np.r_[0, np.cumsum(sizes)].astype(np.int64)
    scores = rng.random(int(c_off[-1]))
    ok = rng.random(int(c_off[-1])) < 0.7
    splits = 8 if quick else 20
    alphas = np.array([0.05, 0.1, 0.2, 0.3])
    return [
        ("cosine_matrix", f"{n}x{m}, d={d}", n * m, "pairs/s", lambda be: ops.cosine_matrix(a, b, backend=be)),
        ("topk_cosine", f"{q} queries x {m}, k={k}", q * m, "pairs/s",
         lambda be: ops.topk_cosine(a[:q], b, k, backend=be)),
        ("segmented_cosine", f"{q} queries x {per} docs, d={d}", q * per, "docs/s",
         lambda be: ops.segmented_cosine(a[:q], docs, offsets, backend=be)),
        ("conformal_sweep", f"{r} responses, {len(scores)} claims, {len(alphas)} alphas x {splits} splits",
         r * splits, "response-splits/s",
         lambda be: ops.conformal_sweep(scores, ok, c_off, alphas=alphas, n_splits=splits, seed=1, backend=be)),
    ]


def run(args: argparse.Namespace) -> int:
    import numpy as np

    from .. import show_config

    repeat = args.repeat or (3 if args.quick else 10)
    cfg = show_config()
    shown = {k: cfg[k] for k in ("version", "simd_level", "threads", "cuda_available") if k in cfg}
    print("rrag bench: " + ", ".join(f"{k} {v}" for k, v in shown.items()) + f"; {repeat} timed calls per case "
          "after one warm-up; median [p20, p80]")
    print(f"{'kernel':<17} {'backend':<9} {'size':<52} {'median ms':>10} {'[p20, p80]':>19}  throughput")
    for kernel, size, work, unit, call in _cases(args.quick, args.seed):
        for backend in args.backend:
            be = None if backend == "auto" else backend
            try:
                call(be)  # warm-up (and: is this backend available?)
            except (RuntimeError, ValueError) as exc:
                if backend == "auto":
                    raise UsageError(f"{kernel}: {exc}") from exc
                print(f"{kernel:<17} {backend:<9} {size:<52} {'-':>10} {'':>19}  unavailable ({exc})")
                continue
            times = []
            for _ in range(repeat):
                t0 = time.perf_counter()
                call(be)
                times.append(time.perf_counter() - t0)
            t = np.asarray(times) * 1e3
            med, p20, p80 = (float(np.percentile(t, p)) for p in (50, 20, 80))
            rate = work / (med / 1e3) if med > 0 else float("inf")
            print(f"{kernel:<17} {backend:<9} {size:<52} {med:>10.3f} {f'[{p20:.3f}, {p80:.3f}]':>19}  "
                  f"{rate:.3g} {unit}")
    return 0
