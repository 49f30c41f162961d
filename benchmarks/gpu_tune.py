"""Tile-size sweep of the Triton kernels on a GPU: which block constants are fastest here.

Run on a CUDA machine (a few minutes on an H200)::

    python benchmarks/gpu_tune.py [--budget-s 150] [--csv results/gpu_tune.csv]
    TRITON_INTERPRET=1 python benchmarks/gpu_tune.py --device cpu   # dry run, tiny sizes

For each kernel it sets the module constants of ``rrag_kernels.triton_ops.<kernel>`` (the
launchers read them at call time) to each point of a small grid, runs the op at issue 2's
size (d = 384), checks the output against the torch float32 formulation (max abs error
< 1e-4; a config that fails or does not compile is reported, not timed) and times it with CUDA
events (median of 20 after 3 warm-ups). The shipped constants are always the first point, so
every row has its ratio against them. Nothing is changed in the package: the table says
which constants to ship.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import os
import statistics
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent

GRIDS = {
    "segmented_cosine": {"BLOCK_D": [8, 16, 32, 64], "BLOCK_K": [64, 128, 256], "NUM_WARPS": [2, 4, 8]},
    "cosine_matrix": {"BLOCK_M": [64, 128], "BLOCK_N": [64, 128], "BLOCK_K": [16, 32], "NUM_WARPS": [4, 8]},
    "claim_relevance": {"BLOCK_C": [16, 32], "BLOCK_DOC": [16, 32, 64], "BLOCK_K": [16, 32], "NUM_WARPS": [2, 4, 8]},
    "topk_cosine": {"BLOCK_Q": [16, 32], "MIN_BLOCK_N": [64, 128], "BLOCK_K": [16, 32], "PROGRAMS_PER_SM": [2, 4, 8]},
    "triple_reliability": {"BLOCK_B": [16, 32], "BLOCK_T": [32, 64], "BLOCK_K": [16, 32], "NUM_WARPS": [4, 8]},
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--budget-s", type=float, default=150.0, help="whole sweep; split evenly over kernels")
    parser.add_argument("--kernel", action="append", choices=sorted(GRIDS))
    parser.add_argument("--csv", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.device == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")
    import importlib

    import numpy as np
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        print("gpu_tune: no CUDA device; nothing tuned")
        return 0
    sys.path.insert(0, str(HERE))
    import harness

    rrag = harness.import_rrag()
    ops = rrag.ops

    dev = torch.device(args.device)
    dry = args.device == "cpu"
    rng = np.random.default_rng(0)

    def emb(n, d):
        return torch.from_numpy(rng.standard_normal((n, d)).astype(np.float32)).to(dev)

    def offs(n_seg, per):
        return torch.arange(0, (n_seg + 1) * per, per, dtype=torch.int64, device=dev)

    d = 64 if dry else 384
    s = (lambda big, small: small) if dry else (lambda big, small: big)
    F = torch.nn.functional
    cases = {}
    q, per = s(10_000, 8), 20 if not dry else 4
    seg_q, seg_docs = emb(q, d), emb(q * per, d)
    seg_off = offs(q, per)
    cases["segmented_cosine"] = (
        f"Q={q} docs/q={per} d={d}",
        lambda: ops.segmented_cosine(seg_q, seg_docs, seg_off, backend="triton"),
        lambda: (F.normalize(seg_docs, dim=1).view(q, per, d) @ F.normalize(seg_q, dim=1)[:, :, None]).reshape(-1))
    n, m = s(2048, 64), s(8192, 128)
    ca, cb = emb(n, d), emb(m, d)
    cases["cosine_matrix"] = (f"n={n} m={m} d={d}", lambda: ops.cosine_matrix(ca, cb, backend="triton"),
                              lambda: F.normalize(ca, dim=1) @ F.normalize(cb, dim=1).T)
    cq, dpq, cpq = s(10_000, 8), 10 if not dry else 3, 8 if not dry else 2
    cl_q, cl_d, cl_c = emb(cq, d), emb(cq * dpq, d), emb(cq * cpq, d)
    cl_doff, cl_coff = offs(cq, dpq), offs(cq, cpq)

    def claim_torch():
        qn, dn, cn = F.normalize(cl_q, dim=1), F.normalize(cl_d, dim=1).view(cq, dpq, d), F.normalize(cl_c, dim=1).view(cq, cpq, d)
        sim = (dn @ qn[:, :, None])  # (cq, dpq, 1)
        cd = cn @ dn.transpose(1, 2)  # (cq, cpq, dpq)
        return (cd * sim.transpose(1, 2)).clamp_min(0).amax(2).reshape(-1)

    cases["claim_relevance"] = (f"Q={cq} docs/q={dpq} claims/q={cpq} d={d}",
                                lambda: ops.claim_relevance(cl_q, cl_d, cl_doff, cl_c, cl_coff, backend="triton"),
                                claim_torch)
    tq, tn, tk = s(4096, 16), s(100_000, 512), 10
    tk_q, tk_x = emb(tq, d), emb(tn, d)
    cases["topk_cosine"] = (f"Q={tq} N={tn} k={tk} d={d}", lambda: ops.topk_cosine(tk_q, tk_x, tk, backend="triton")[0],
                            lambda: torch.cat([torch.topk(F.normalize(tk_q[i:i + 512], dim=1) @ F.normalize(tk_x, dim=1).T,
                                                          tk, dim=1).values for i in range(0, tq, 512)]))
    rb, rt, rk = s(10_000, 64), s(200, 50), 20
    r_q, r_t = emb(rb, d), emb(rt, d)
    r_c = torch.from_numpy(rng.integers(0, 11, rt).astype(np.float32)).to(dev)
    cases["triple_reliability"] = (
        f"B={rb} T={rt} d={d} k={rk}",
        lambda: ops.triple_reliability(r_q, r_t, r_c, k=rk, alpha=0.4, backend="triton")[0],
        lambda: torch.topk(0.4 * (F.normalize(r_q, dim=1) @ F.normalize(r_t, dim=1).T) + 0.6 * r_c / 10, rk, dim=1).values)

    def time_ms(fn, repeats=20, warmup=3):
        for _ in range(warmup):
            fn()
        if dry:
            out = []
            for _ in range(max(2, repeats // 10)):
                t0 = time.perf_counter()
                fn()
                out.append((time.perf_counter() - t0) * 1e3)
            return out
        return harness.cuda_event_ms(torch, fn, repeats, warmup=0)

    kernels = args.kernel or list(GRIDS)
    per_kernel = args.budget_s / len(kernels)
    rows = []
    name = torch.cuda.get_device_name() if not dry else "cpu (interpreter)"
    for kernel in kernels:
        mod = importlib.import_module(f"rrag_kernels.triton_ops.{kernel}")
        grid = GRIDS[kernel]
        shipped = {k: getattr(mod, k) for k in grid}
        points = [shipped] + [dict(zip(grid, v)) for v in itertools.product(*grid.values())
                              if dict(zip(grid, v)) != shipped]
        label, run, ref = cases[kernel]
        want = ref()
        t_start = time.perf_counter()
        base_ms = None
        print(f"== {kernel} [{label}] shipped {shipped}")
        for point in points:
            if time.perf_counter() - t_start > per_kernel:
                print(f"   budget reached after {len([r for r in rows if r['kernel'] == kernel])} configs")
                break
            for k, v in point.items():
                setattr(mod, k, v)
            try:
                got = run()
                err = float((got.float() - want.float()).abs().max()) if got.numel() else 0.0
                if not err < 1e-4:
                    raise AssertionError(f"max abs error {err:.2e} vs torch")
                ms = statistics.median(time_ms(run))
                note = ""
            except Exception as exc:  # a config that fails is reported, the sweep goes on
                ms, err, note = float("nan"), float("nan"), f"{type(exc).__name__}: {str(exc)[-200:]}".replace("\n", " ")
            finally:
                for k, v in shipped.items():
                    setattr(mod, k, v)
            if base_ms is None:
                base_ms = ms
            rows.append({"timestamp": datetime.now(timezone.utc).isoformat(timespec="seconds"), "device": name,
                         "kernel": kernel, "shape": label, "config": " ".join(f"{k}={v}" for k, v in point.items()),
                         "shipped": point == shipped, "median_ms": f"{ms:.4f}",
                         "vs_shipped": f"{base_ms / ms:.3f}" if ms == ms and base_ms == base_ms else "",
                         "max_abs_err": f"{err:.2e}", "note": note})
            print(f"   {rows[-1]['config']:<48} {ms:9.4f} ms  x{rows[-1]['vs_shipped'] or '-':>6}  {note}")
        timed = [r for r in rows if r["kernel"] == kernel and r["median_ms"] != "nan"]
        if timed:
            best = min(timed, key=lambda r: float(r["median_ms"]))
            print(f"   best: {best['config']} {best['median_ms']} ms ({best['vs_shipped']}x the shipped constants)")
    if args.csv is not None and rows:
        new = not args.csv.exists()
        args.csv.parent.mkdir(parents=True, exist_ok=True)
        with open(args.csv, "a", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=list(rows[0]))
            if new:
                w.writeheader()
            w.writerows(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
