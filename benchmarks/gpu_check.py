"""GPU check: every Triton kernel and torch formulation against the float64 reference, then
timed against torch.

Run on a machine with a CUDA device (budget: well under 5 minutes on an H200)::

    python benchmarks/gpu_check.py                 # checks + timings, rows -> results/gpu.csv
    python benchmarks/gpu_check.py --checks-only
    TRITON_INTERPRET=1 python benchmarks/gpu_check.py --device cpu   # dry run of this script

1. Checks: each op with ``backend="triton"`` and ``backend="torch"`` (``--backends``) on CUDA
   tensors, at sizes that break things
   (0, 1, odd primes, block-1/block/block+1, d not a multiple of the tile, empty segments,
   one huge segment among empty ones, zero rows, ties, k above the in-register limit; for
   triple_reliability also k > T padding, every triple used, and exact tie order at
   alpha = 0 with integer credibility),
   against ``rrag_kernels.reference`` in float64. The allowed error is
   ``max(4 * err(torch float32 formulation), 1e-5)``, TF32 off. The output must be a CUDA
   tensor of the right dtype and shape; top-k indices must match exactly where the
   reference's order is unambiguous (exact ties, zero queries).
2. Timings: the issue-2 sizes (and a few larger ones), ``rrag-triton``, ``rrag-torch`` (our
   torch formulation) and ``rrag-auto`` (what ``backend=None`` runs: ``CUDA_AUTO``) against
   the torch formulations a user runs on a GPU today, timed with CUDA events (median, p20, p80),
   after the same subset-vs-reference and whole-output-vs-torch checks as bench_cosine.py.
   The roofline floor uses this GPU's measured copy bandwidth and float32 (non-TF32)
   matmul rate.

Exit status: 0 when every check passes, or when there is no CUDA device (a message says so
and nothing runs); 1 when a check fails.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Callable, Sequence

DEFAULT_BUDGET_S = 270.0


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"),
                        help="cpu: dry run of this script under TRITON_INTERPRET=1 at tiny sizes")
    parser.add_argument("--checks-only", action="store_true", help="skip the timings")
    parser.add_argument("--quick", action="store_true", help="fewer timing sizes and repeats")
    parser.add_argument("--kernel", action="append", metavar="NAME",
                        choices=("cosine_matrix", "segmented_cosine", "claim_relevance", "topk_cosine",
                                 "triple_reliability"))
    parser.add_argument("--timing", default="call", choices=("call", "flushed"),
                        help="call: each call as a user sees it, back to back (inputs may sit in L2); "
                             "flushed: L2 overwritten before each call (the kernel from memory; "
                             "CSV mode gpu-flushed)")
    parser.add_argument("--no-checks", action="store_true", help="skip the edge checks (timings only)")
    parser.add_argument("--backends", nargs="+", default=["triton", "torch"], choices=("triton", "torch"),
                        help="the backends the edge checks run (default both)")
    parser.add_argument("--csv", type=Path, default=None,
                        help="results file (default benchmarks/results/gpu.csv; gpu-dryrun.csv on cpu)")
    parser.add_argument("--no-csv", action="store_true")
    parser.add_argument("--budget-s", type=float, default=DEFAULT_BUDGET_S,
                        help="stop starting new timing cases after this many seconds")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    if args.device == "cpu" and os.environ.get("TRITON_INTERPRET") != "1":
        # Triton reads it when a kernel module is first imported, which has not happened yet.
        os.environ["TRITON_INTERPRET"] = "1"
    try:
        import torch
    except ImportError:
        print("gpu_check: torch is not installed; nothing to check (install the [gpu] extra)")
        return 0
    if args.device == "cuda" and not torch.cuda.is_available():
        print("gpu_check: no CUDA device visible (torch.cuda.is_available() is False); "
              "nothing checked or timed. Run this on a machine with a GPU.")
        return 0
    return GpuCheck(args, torch).run()


# --------------------------------------------------------------------------------------


@dataclass
class CheckResult:
    kernel: str
    label: str
    ok: bool
    err: float
    tol: float
    message: str = ""


class GpuCheck:
    def __init__(self, args: argparse.Namespace, torch: Any) -> None:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        import numpy as np

        import bench_cosine as bc
        import harness

        self.args, self.torch, self.np, self.bc, self.harness = args, torch, np, bc, harness
        self.started = time.perf_counter()
        self.dry = args.device == "cpu"
        self.dev = torch.device("cuda" if not self.dry else "cpu")
        # Naive float32 means IEEE float32: no TF32 in the torch formulations.
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.set_float32_matmul_precision("highest")
        self.rrag = harness.import_rrag()
        from rrag_kernels import ops, reference

        self.ops, self.ref = ops, reference
        self.rng = np.random.default_rng(0)
        self.kernels = args.kernel or list(bc.KERNELS) + ["triple_reliability"]
        self.backend = "triton"  # the backend the edge checks run (run_checks sets each in turn)
        self._flush = None  # the L2 flush buffer of --timing flushed

    # ---------------------------------------------------------------- helpers

    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def t(self, x: Any) -> Any:
        """numpy -> tensor on the device (offsets and k pass through as they are)."""
        np = self.np
        if isinstance(x, np.ndarray) and x.dtype.kind == "f":
            return self.torch.from_numpy(np.ascontiguousarray(x)).to(self.dev)
        return x

    def sync(self) -> None:
        if not self.dry:
            self.torch.cuda.synchronize()

    def emb(self, n: int, d: int, zero_rows: Sequence[int] = ()) -> Any:
        x = self.rng.standard_normal((n, d), dtype=self.np.float32)
        for r in zero_rows:
            if r < n:
                x[r] = 0
        return x

    def offsets(self, counts: Sequence[int]) -> Any:
        return self.bc._offsets(self.np.asarray(counts, dtype=self.np.int64))

    def run_op(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """ops.<name> on device tensors with the backend under check (``self.backend``)."""
        targs = tuple(self.t(a) for a in args)
        tkw = {k: self.t(v) for k, v in kwargs.items()}
        return getattr(self.ops, name)(*targs, **tkw, backend=self.backend)

    def expect_device(self, out: Any, dtype: Any, shape: tuple, what: str) -> None:
        torch = self.torch
        if not isinstance(out, torch.Tensor):
            raise AssertionError(f"{what}: returned {type(out).__name__}, expected a torch tensor")
        if out.device.type != self.dev.type:
            raise AssertionError(f"{what}: on {out.device}, expected {self.dev}")
        if out.dtype != dtype:
            raise AssertionError(f"{what}: dtype {out.dtype}, expected {dtype}")
        if tuple(out.shape) != tuple(shape):
            raise AssertionError(f"{what}: shape {tuple(out.shape)}, expected {tuple(shape)}")

    @staticmethod
    def max_err(a: Any, b: Any) -> float:
        import numpy as np

        a = np.asarray(a, dtype=np.float64)
        b = np.asarray(b, dtype=np.float64)
        if a.size == 0:
            return 0.0
        return float(np.max(np.abs(a - b)))

    # ---------------------------------------------------------------- edge cases

    def edge_cases(self) -> dict[str, list[tuple[str, Callable[[], CheckResult]]]]:
        """kernel -> [(label, run)] ; the dry run keeps only the small ones."""
        small = self.dry
        cm = [(1, 1, 1, ()), (0, 5, 8, ()), (3, 7, 3, ()), (113, 203, 383, ()),
              (127, 129, 384, ()), (128, 256, 1024, ()), (257, 1023, 1000, (0, 5, 256))]
        seg = [("1 query, 1 doc, d=1", [1], 1, ()),
               ("all segments empty", [0, 0, 0, 0, 0], 8, ()),
               ("empty segments, d=3", [3, 0, 1, 0, 0, 5, 2], 3, ()),
               ("uniform 1000 x 20, d=384", [20] * 1000, 384, ()),
               ("ragged 513 q, d=383", "ragged", 383, (0, 7)),
               ("one huge segment among 63 empty, d=1024", "huge", 1024, ())]
        clm = [("1/1/1, d=1", [1], [1], 1, {}),
               ("query without docs, clip=False", [0, 2, 1], [2, 0, 3], 5, {"clip": False}),
               ("uniform 500 x 10 docs x 8 claims, d=384", [10] * 500, [8] * 500, 384, {}),
               ("ragged, clip=False, d=383", "ragged", "ragged", 383, {"clip": False}),
               ("ragged, query_doc_sim given, d=384", "ragged", "ragged", 384, {"sim": True}),
               ("one huge segment, d=1024", "huge", "huge", 1024, {})]
        topk = [(1, 1, 1, 1, ""), (5, 7, 7, 3, ""), (33, 1000, 10, 383, ""), (64, 4097, 1, 384, ""),
                (100, 5000, 100, 1024, ""), (70, 3001, 256, 384, "largest in-register list"),
                (17, 3000, 300, 384, "k above the in-register limit"),
                (20, 128, 40, 64, "ties"), (4, 50, 5, 16, "zero rows")]
        # (form, B or counts, T or chains per question, d, k, extra)
        rel = [("single", 1, 1, 1, 1, ""), ("single", 0, 5, 3, 2, ""), ("single", 3, 0, 4, 2, ""),
               ("single", 7, 13, 384, 20, "k > T"), ("single", 61, 257, 17, 7, ""),
               ("single", 200, 513, 384, 20, ""), ("single", 64, 300, 64, 600, "k above T, padding"),
               ("single", 40, 120, 16, 30, "ties"), ("single", 9, 50, 8, 5, "all used"),
               ("segmented", [3, 0, 1, 0, 5], 2, 9, 4, ""), ("segmented", "ragged", 3, 383, 20, ""),
               ("segmented", [0, 0, 700, 0], 5, 384, 20, "one big question"),
               ("segmented", [40, 17, 0, 64], 4, 16, 30, "ties")]
        if small:
            rel = [r for r in rel if not (isinstance(r[1], int) and r[1] * r[2] * r[3] > 500_000)
                   and r[1] != "ragged" and r[5] != "one big question"]
            cm = [c for c in cm if c[0] * c[1] * c[2] <= 200_000][:5]
            seg = [s for s in seg if s[1] not in ("huge",) and (not isinstance(s[1], list) or len(s[1]) < 50)]
            clm = [c for c in clm if not isinstance(c[1], list) or len(c[1]) < 50][:3]
            topk = [c for c in topk if c[0] * c[1] * c[3] <= 2_000_000]
        return {
            "cosine_matrix": [(f"n={n} m={m} d={d}" + (" zero rows" if z else ""),
                               partial(self.check_cosine, n, m, d, z)) for n, m, d, z in cm],
            "segmented_cosine": [(lab, partial(self.check_segmented, lab, c, d, z))
                                 for lab, c, d, z in seg],
            "claim_relevance": [(lab, partial(self.check_claim, lab, dc, cc, d, kw))
                                for lab, dc, cc, d, kw in clm],
            "topk_cosine": [(f"Q={q} N={n} k={k} d={d}" + (f" {x}" if x else ""),
                             partial(self.check_topk, q, n, k, d, x)) for q, n, k, d, x in topk],
            "triple_reliability": [(self._reliability_label(*r), partial(self.check_reliability, *r)) for r in rel],
        }

    def _result(self, kernel: str, label: str, out_np: Any, ref: Any, naive_np: Any,
                extra: Callable[[], None] | None = None) -> CheckResult:
        np = self.np
        err = self.max_err(out_np, ref)
        tol = max(4.0 * self.max_err(naive_np, ref), 1e-5)
        if np.asarray(out_np).size and not np.isfinite(np.asarray(out_np)).all():
            return CheckResult(kernel, label, False, err, tol, "non-finite values")
        if err > tol:
            return CheckResult(kernel, label, False, err, tol, "error above tolerance")
        if extra is not None:
            try:
                extra()
            except AssertionError as exc:
                return CheckResult(kernel, label, False, err, tol, str(exc))
        return CheckResult(kernel, label, True, err, tol)

    def check_cosine(self, n: int, m: int, d: int, zero_rows: tuple) -> CheckResult:
        label = f"n={n} m={m} d={d}"
        a, b = self.emb(n, d, zero_rows), self.emb(m, d, zero_rows)
        out = self.run_op("cosine_matrix", a, b)
        self.expect_device(out, self.torch.float32, (n, m), "cosine_matrix")
        ref = self.ref.cosine_matrix_ref(a, b)
        naive = self.bc.cosine_matrix_torch(self.torch, self.t(a), self.t(b))
        res = self._result("cosine_matrix", label, out.cpu().numpy(), ref, naive.cpu().numpy())
        if res.ok and n >= 8 and d >= 8:
            # float16 inputs are converted to float32: same answer as the float32 of them.
            h = self.run_op("cosine_matrix", a[:8].astype(self.np.float16), b[:8].astype(self.np.float16))
            href = self.ref.cosine_matrix_ref(a[:8].astype(self.np.float16), b[:8].astype(self.np.float16))
            if self.max_err(h.cpu().numpy(), href) > res.tol:
                return CheckResult("cosine_matrix", label, False, res.err, res.tol, "float16 input off")
        return res

    def _counts(self, spec: Any, q_default: int = 513) -> Any:
        np = self.np
        if isinstance(spec, list):
            return np.asarray(spec, dtype=np.int64)
        if spec == "ragged":
            c = self.rng.poisson(6, q_default).astype(np.int64)
            c[self.rng.random(q_default) < 0.15] = 0
            return c
        raise ValueError(spec)

    def _huge(self, big: int, other: int = 0) -> Any:
        c = self.np.zeros(64, dtype=self.np.int64)
        c[17] = big
        if other:
            c[[3, 40]] = other
        return c

    def check_segmented(self, label: str, spec: Any, d: int, zero_rows: tuple) -> CheckResult:
        counts = self._huge(5000) if spec == "huge" else self._counts(spec)
        off = self.offsets(counts)
        queries = self.emb(len(counts), d, zero_rows)
        docs = self.emb(int(off[-1]), d, zero_rows)
        out = self.run_op("segmented_cosine", queries, docs, off)
        self.expect_device(out, self.torch.float32, (docs.shape[0],), "segmented_cosine")
        ref = self.ref.segmented_cosine_ref(queries, docs, off)
        naive = self.bc.segmented_torch_bmm(self.torch, self.t(queries), self.t(docs), off)
        return self._result("segmented_cosine", label, out.cpu().numpy(), ref, naive.cpu().numpy())

    def check_claim(self, label: str, dspec: Any, cspec: Any, d: int, kw: dict) -> CheckResult:
        np = self.np
        if dspec == "huge":
            dcounts, ccounts = self._huge(3000, 0), self._huge(40, 2)
        else:
            dcounts = self._counts(dspec, 301)
            ccounts = self._counts(cspec, 301)
        doff, coff = self.offsets(dcounts), self.offsets(ccounts)
        queries = self.emb(len(dcounts), d)
        docs = self.emb(int(doff[-1]), d, (1,))
        claims = self.emb(int(coff[-1]), d, (2,))
        # Claims near a doc of their query, so scores are O(1) and often positive.
        cseg = np.repeat(np.arange(len(ccounts)), ccounts)
        has = dcounts[cseg] > 0
        claims[has] += docs[doff[cseg][has]]
        clip = kw.get("clip", True)
        sim = (self.rng.uniform(-1, 1, docs.shape[0]).astype(np.float32) if kw.get("sim") else None)
        out = self.run_op("claim_relevance", queries, docs, doff, claims, coff,
                          query_doc_sim=sim, clip=clip)
        self.expect_device(out, self.torch.float32, (claims.shape[0],), "claim_relevance")
        ref = self.ref.claim_relevance_ref(queries, docs, doff, claims, coff, query_doc_sim=sim, clip=clip)
        naive = self.bc.claim_torch_bmm(self.torch, self.t(queries), self.t(docs), doff, self.t(claims),
                                        coff, self.t(sim) if sim is not None else None, clip)
        out_np = out.cpu().numpy()

        def no_docs_zero():
            lonely = dcounts[cseg] == 0
            if lonely.any() and (out_np[lonely] != 0).any():
                raise AssertionError("a claim whose query has no docs is not 0")

        return self._result("claim_relevance", label, out_np, ref, naive.cpu().numpy(), no_docs_zero)

    def check_topk(self, q: int, n: int, k: int, d: int, extra: str) -> CheckResult:
        np = self.np
        label = f"Q={q} N={n} k={k} d={d}" + (f" {extra}" if extra else "")
        if extra == "ties":
            distinct = self.emb(8, d)
            corpus = distinct[self.rng.permutation(np.repeat(np.arange(8), n // 8))]
            queries = self.emb(q, d)
        else:
            corpus = self.emb(n, d, (3, 10) if extra == "zero rows" else ())
            queries = self.emb(q, d, (1,) if extra == "zero rows" else ())
        s, i = self.run_op("topk_cosine", queries, corpus, k)
        self.expect_device(s, self.torch.float32, (q, k), "topk_cosine scores")
        self.expect_device(i, self.torch.int64, (q, k), "topk_cosine indices")
        ref_s, ref_i = self.ref.topk_cosine_ref(queries, corpus, k)
        naive_s, _ = self.bc.topk_torch_chunked(self.torch, self.t(queries), self.t(corpus), k)
        s_np, i_np = s.cpu().numpy(), i.cpu().numpy()

        def indices():
            tol = max(4.0 * self.max_err(naive_s.cpu().numpy(), ref_s), 1e-5)
            self.harness.check_topk(s_np, i_np, queries, corpus, ref_s, atol=tol, what="topk")
            if extra == "ties" and not np.array_equal(i_np, ref_i):
                bad = np.argwhere(i_np != ref_i)[0]
                raise AssertionError(f"tie order differs at {tuple(bad)}: {i_np[tuple(bad)]} vs "
                                     f"{ref_i[tuple(bad)]} (ties -> lower index first)")
            if extra == "zero rows" and not np.array_equal(i_np[1], np.arange(k)):
                raise AssertionError(f"zero query: indices {i_np[1]} != 0..{k - 1}")

        return self._result("topk_cosine", label, s_np, ref_s, naive_s.cpu().numpy(), indices)

    @staticmethod
    def _reliability_label(form: str, chains: Any, triples: Any, d: int, k: int, extra: str) -> str:
        if form == "single":
            text = f"B={chains} T={triples} d={d} k={k}"
        else:
            q = len(chains) if isinstance(chains, list) else "101 ragged"
            text = f"segmented Q={q} chains/q={triples} d={d} k={k}"
        return text + (f" {extra}" if extra else "")

    def check_reliability(self, form: str, chains: Any, triples: Any, d: int, k: int, extra: str) -> CheckResult:
        """triple_reliability(_segmented) on device tensors against the float64 reference:
        scores within tol of the reference's k best, each returned index valid, unused, distinct
        and scored as the reference scores it; with ties (alpha = 0, integer credibility) the
        exact reference order (equal R: lower triple index first)."""
        np, torch = self.np, self.torch
        label = self._reliability_label(form, chains, triples, d, k, extra)
        ties = extra == "ties"
        alpha = 0.0 if ties else 0.4
        if form == "single":
            n_chains, n_triples = chains, triples
            offsets = np.array([0, n_triples], dtype=np.int64)
            cq = np.zeros(n_chains, dtype=np.int64)
        else:
            counts = (self._counts(chains, 101) if chains == "ragged"
                      else np.asarray(chains, dtype=np.int64))
            offsets = self.offsets(counts)
            n_triples = int(offsets[-1])
            cq = np.repeat(np.arange(len(counts), dtype=np.int64), triples)
            n_chains = len(cq)
        q, t = self.emb(n_chains, d, (0,)), self.emb(n_triples, d, (1, 7))
        cred = (self.rng.integers(0, 11, n_triples).astype(np.float64) if ties
                else self.rng.uniform(0, 10, n_triples))
        sizes = np.diff(offsets)[cq]
        used_flat = np.ones(int(sizes.sum()), dtype=bool) if extra == "all used" else (
            self.rng.random(int(sizes.sum())) < 0.3)
        if form == "single":
            used = used_flat.reshape(n_chains, n_triples)
            s, i = self.run_op("triple_reliability", q, t, cred, alpha=alpha, used=used, k=k)
            ref_s, ref_i = self.ref.triple_reliability_ref(q, t, cred, alpha=alpha, used=used, k=k)
        else:
            s, i = self.run_op("triple_reliability_segmented", q, t, cred, offsets, cq, alpha=alpha,
                               used=used_flat, k=k)
            ref_s, ref_i = self.ref.triple_reliability_segmented_ref(q, t, cred, offsets, cq, alpha=alpha,
                                                                     used=used_flat, k=k)
        self.expect_device(s, torch.float32, (n_chains, k), "triple_reliability scores")
        self.expect_device(i, torch.int64, (n_chains, k), "triple_reliability indices")
        s_np, i_np = s.cpu().numpy(), i.cpu().numpy()
        # The naive float32 formulation's error against the float64 R earns the tolerance.
        qn = torch.nn.functional.normalize(self.t(q), dim=1)
        tn = torch.nn.functional.normalize(self.t(t), dim=1)
        naive_full = (alpha * (qn @ tn.T) + self.t(((1 - alpha) * cred / 10).astype(np.float32))).cpu().numpy()
        full_ref = alpha * self.ref.cosine_matrix_ref(q, t) + (1 - alpha) * cred[None, :] / 10
        finite = np.isfinite(ref_s)
        used_at = np.cumsum(sizes) - sizes

        def indices():
            if not np.array_equal(np.isfinite(s_np), finite) or not np.array_equal(i_np < 0, ~finite):
                raise AssertionError("padding (-1 / -inf) differs from the reference")
            for b in range(n_chains):
                got = i_np[b][i_np[b] >= 0]
                lo, hi = int(offsets[cq[b]]), int(offsets[cq[b] + 1])
                if len(np.unique(got)) != len(got) or np.any((got < lo) | (got >= hi)):
                    raise AssertionError(f"chain {b}: a repeated or foreign triple")
                if np.any(used_flat[used_at[b] + got - lo]):
                    raise AssertionError(f"chain {b}: a used triple came back")
                if got.size and np.max(np.abs(full_ref[b, got] - s_np[b, :got.size])) > tol_r:
                    raise AssertionError(f"chain {b}: a returned score is not its triple's R")
            if ties and not np.array_equal(i_np, ref_i):
                bad = np.argwhere(i_np != ref_i)[0]
                raise AssertionError(f"tie order differs at {tuple(bad)}: {i_np[tuple(bad)]} vs "
                                     f"{ref_i[tuple(bad)]} (equal R -> lower triple index first)")

        rows = np.repeat(np.arange(n_chains), np.diff(offsets)[cq])
        cols = (np.concatenate([np.arange(offsets[c], offsets[c + 1]) for c in cq]) if n_chains
                else np.zeros(0, dtype=np.int64))
        naive_err = self.max_err(naive_full[rows, cols], full_ref[rows, cols]) if rows.size else 0.0
        tol_r = max(4.0 * naive_err, 1e-5)
        return self._result("triple_reliability", label, np.where(finite, s_np, 0), np.where(finite, ref_s, 0),
                            np.where(finite, ref_s, 0) + naive_err, indices)

    def run_checks(self) -> list[CheckResult]:
        results: list[CheckResult] = []
        for backend in self.args.backends:
            self.backend = backend
            results += self._run_checks()
        return results

    def _run_checks(self) -> list[CheckResult]:
        print(f"== checks: backend={self.backend!r} against the float64 reference "
              "(tol = max(4 x torch-float32 error, 1e-5))")
        results: list[CheckResult] = []
        explained: set[str] = set()
        for kernel, items in self.edge_cases().items():
            if kernel not in self.kernels:
                continue
            for label, run in items:
                label = f"{self.backend}: {label}"
                t0 = time.perf_counter()
                try:
                    res = run()
                except Exception as exc:  # a crash is a failed check, reported, not fatal
                    res = CheckResult(kernel, label, False, float("nan"), float("nan"),
                                      self.harness._short_error(exc))
                    if kernel not in explained:  # the whole message once per kernel (a compile
                        explained.add(kernel)    # error's cause is at its end)
                        print(f"   {kernel}: {type(exc).__name__}: {str(exc)[-2000:]}")
                self.sync()
                status = "ok  " if res.ok else "FAIL"
                print(f"   {status} {kernel:<17} {label:<44} err {res.err:.2e} tol {res.tol:.2e} "
                      f"[{time.perf_counter() - t0:.1f} s] {res.message}")
                results.append(res)
        return results

    # ---------------------------------------------------------------- timings

    def measure_rates(self) -> Any:
        """Copy bandwidth and float32 (non-TF32) matmul rate of this device."""
        torch, harness = self.torch, self.harness
        if self.dry:
            return harness.measure_machine(1, quick=True)
        nbytes = 4 << 30
        src = torch.empty(nbytes // 4, dtype=torch.float32, device=self.dev).fill_(1.0)
        dst = torch.empty_like(src)
        copy_s = min(self.cuda_time(lambda: dst.copy_(src), 5)) / 1e3
        read_s = min(self.cuda_time(lambda: src.amax(), 5)) / 1e3
        src = dst = None
        n = 8192
        a = torch.randn(n, n, device=self.dev)
        b = torch.randn(n, n, device=self.dev)
        mm_s = min(self.cuda_time(lambda: a @ b, 5)) / 1e3
        a = b = None
        torch.cuda.empty_cache()
        return harness.MachineRates(read_gbs=nbytes / read_s / 1e9, copy_gbs=2 * nbytes / copy_s / 1e9,
                                    matmul_gflops=2.0 * n ** 3 / mm_s / 1e9,
                                    matmul_source=f"torch fp32 {n}^3, TF32 off")

    def cuda_time(self, fn: Callable[[], Any], repeats: int, warmup: int = 2) -> list[float]:
        """Milliseconds per call, each call bracketed by CUDA events; with ``--timing flushed``
        a buffer twice the L2's size is overwritten before each call, untimed."""
        before = None
        if self.args.timing == "flushed" and not self.dry:
            if self._flush is None:
                l2 = int(getattr(self.torch.cuda.get_device_properties(self.dev), "L2_cache_size", 0)) or 64 << 20
                self._flush = self.torch.empty(2 * l2 // 4, dtype=self.torch.float32, device=self.dev)
            before = self._flush.zero_
        return self.harness.cuda_event_ms(self.torch, fn, repeats, warmup, before=before)

    def timer(self, providers: Sequence[Any], plan: Any, first_call_s: dict | None) -> dict:
        """harness-compatible timer: CUDA events on a GPU, wall clock in the dry run."""
        np, harness = self.np, self.harness
        result = {}
        for p in providers:
            if self.dry:
                result.update(harness.time_providers([p], plan, first_call_s))
                continue
            # The first call compiled the kernels; size the run from a few warm calls.
            est = float(np.median(self.cuda_time(p.fn, 3, warmup=1))) / 1e3
            repeats = int(min(50, max(5, 1.0 / max(est, 1e-5))))
            result[p.name] = harness.Timing(np.asarray(self.cuda_time(p.fn, repeats, warmup=0)))
        return result

    def timing_sizes(self) -> list[tuple[str, int, tuple]]:
        """(kernel, d, size) to time: issue 2's sizes, then a GPU-sized one per kernel."""
        if self.dry:
            return [("cosine_matrix", 64, (64, 256)), ("segmented_cosine", 64, (32, 4)),
                    ("claim_relevance", 64, (16, 4, 3)), ("topk_cosine", 64, (16, 512, 10)),
                    ("triple_reliability", 64, (64, 50)), ("triple_reliability_segmented", 64, (8, 4, 30))]
        sizes = [
            ("cosine_matrix", 384, (2048, 8192)), ("cosine_matrix", 1024, (2048, 8192)),
            ("segmented_cosine", 384, (10_000, 20)), ("segmented_cosine", 1024, (10_000, 20)),
            ("segmented_cosine", 384, (1_000, 20)),
            ("claim_relevance", 384, (10_000, 10, 8)), ("claim_relevance", 1024, (10_000, 10, 8)),
            ("topk_cosine", 384, (4096, 100_000, 10)), ("topk_cosine", 1024, (4096, 100_000, 10)),
            # issue 11's ReliableRAG shapes (k = 20)
            ("triple_reliability", 384, (10_000, 200)), ("triple_reliability_segmented", 384, (500, 20, 200)),
            # GPU-sized: the inputs are generated on the host, so keep them to a few GB.
            ("cosine_matrix", 1024, (8192, 65536)),
            ("segmented_cosine", 384, (100_000, 20)),
            ("claim_relevance", 384, (100_000, 10, 8)),
            ("topk_cosine", 384, (4096, 1_000_000, 10)),
            ("triple_reliability", 384, (100_000, 1000)),
        ]
        if self.args.quick:  # the first d=384 size of each kernel
            sizes = [s for i, s in enumerate(sizes) if s[1] == 384
                     and s[0] not in {t[0] for t in sizes[:i] if t[1] == 384}]
        return sizes

    def gpu_providers(self, p: Any) -> list[Any]:
        torch, bc, Provider = self.torch, self.bc, self.harness.Provider
        targs = tuple(self.t(a) for a in p.args)
        chunk = 1 << 28  # a GPU takes bigger score blocks than the CPU baseline's 64 MB
        if p.kernel == "cosine_matrix":
            base = [Provider("torch", partial(bc.cosine_matrix_torch, torch, *targs),
                             note="F.normalize + mm (TF32 off)")]
        elif p.kernel == "segmented_cosine":
            base = [Provider("torch-bmm", partial(bc.segmented_torch_bmm, torch, *targs),
                             note="padded + torch.bmm")]
        elif p.kernel == "claim_relevance":
            base = [Provider("torch-bmm", partial(bc.claim_torch_bmm, torch, *targs),
                             note="padded + torch.bmm, norms folded into the max")]
        else:
            base = [Provider("torch-chunked",
                             partial(bc.topk_torch_chunked, torch, *targs, chunk_elems=chunk),
                             note="F.normalize, mm + torch.topk over 1 GiB score blocks")]
        return base + self.rrag_providers(partial(getattr(self.ops, p.kernel), *targs))

    def rrag_providers(self, call: Callable[..., Any], note: str = "") -> list[Any]:
        """Ours, one per backend: the Triton kernel, the torch formulation and what auto runs."""
        Provider, RRAG = self.harness.Provider, self.harness.RRAG
        return [Provider(f"rrag-{name}", partial(call, backend=backend), RRAG,
                         note=f"ops.<kernel>(cuda tensors, backend={backend!r}){note}")
                for name, backend in (("triton", "triton"), ("torch", "torch"), ("auto", None))]

    def reliability_case(self, kernel: str, d: int, size: tuple) -> Any:
        """bench_reliablerag's case (inputs, reference check) with GPU providers: the torch
        formulation a user writes (normalize, mm, fuse, masked_fill, torch.topk) and ours."""
        import bench_reliablerag as br

        torch, np = self.torch, self.np
        case = next(br.cases(kernel, self.rrag, {"dim": d, kernel: size}, self.rng))
        single = case.providers[0].fn  # numpy baseline: a partial over the prepared inputs
        args, kw = list(single.args), dict(single.keywords)
        alpha, k = args[-2], args[-1]
        tq, tt = self.t(args[0]), self.t(args[1])
        w = self.t(((1.0 - alpha) * args[2] / 10.0).astype(np.float32))
        used_np = args[-3]
        t_used = torch.from_numpy(np.ascontiguousarray(used_np)).to(self.dev)
        F = torch.nn.functional

        if kernel == "triple_reliability":
            def torch_fn():
                r = torch.addmm(w[None, :], F.normalize(tq, dim=1), F.normalize(tt, dim=1).T, alpha=alpha)
                return torch.topk(r.masked_fill_(t_used, float("-inf")), min(k, r.shape[1]), dim=1)

            ours = partial(self.ops.triple_reliability, tq, tt, args[2], alpha=alpha, used=used_np, k=k)
        else:
            offsets, cq = args[3], args[4]
            n_q, per_q = len(offsets) - 1, int(offsets[1] - offsets[0])
            chains = len(cq) // n_q
            first = torch.from_numpy(np.asarray(offsets[:-1])).to(self.dev).view(n_q, 1, 1)

            def torch_fn():
                qn = F.normalize(tq, dim=1).view(n_q, chains, -1)
                tn = F.normalize(tt, dim=1).view(n_q, per_q, -1)
                r = torch.baddbmm(w.view(n_q, 1, per_q), qn, tn.transpose(1, 2), alpha=alpha)
                top = torch.topk(r.masked_fill_(t_used.view(r.shape), float("-inf")), min(k, per_q), dim=2)
                return top.values.reshape(n_q * chains, -1), (top.indices + first).reshape(n_q * chains, -1)

            ours = partial(self.ops.triple_reliability_segmented, tq, tt, args[2], offsets, cq, alpha=alpha,
                           used=used_np, k=k)
        del kw
        Provider = self.harness.Provider
        case.providers = [
            Provider("torch", torch_fn, note="F.normalize + addmm/baddbmm fused + masked_fill + torch.topk "
                                             "(scores only compared; torch.topk's tie order is unspecified)"),
            *self.rrag_providers(ours, "; used mask passed from the host"),
        ]
        case.compare = None  # torch.topk returns (values, indices) of another layout; check() covers ours
        return case

    def run_timings(self) -> list[Any]:
        harness, bc = self.harness, self.bc
        rates = self.measure_rates()
        print(f"\n== timings on {self.device_name()}")
        print(f"   measured: read {rates.read_gbs:.0f} GB/s, copy {rates.copy_gbs:.0f} GB/s, "
              f"float32 matmul {rates.matmul_gflops / 1e3:.1f} TFLOP/s ({rates.matmul_source})")
        meta = harness.machine_info(0 if not self.dry else 1, self.rrag, machine=self.device_name())
        meta["threads"] = ""
        plan = harness.TimingPlan.quick()
        plan.pause_s = 0.0 if not self.dry else plan.pause_s
        results = []
        for kernel, d, size in self.timing_sizes():
            if kernel.removesuffix("_segmented") not in self.kernels:
                continue
            if self.elapsed() > self.args.budget_s:
                print(f"   budget of {self.args.budget_s:.0f} s spent: skipping {kernel} {size} d={d}")
                continue
            if kernel.startswith("triple_reliability"):
                case = self.reliability_case(kernel, d, size)
            else:
                p = next(bc.problems(kernel, self.ref, {"dims": (d,), kernel: [size]}, self.rng))
                case = harness.Case(p.kernel, p.shape, p.bytes, p.flops, self.gpu_providers(p),
                                    check=p.check, compare=p.compare)
            mode = "gpu" if self.args.timing == "call" else "gpu-flushed"
            results.append(harness.run_case(case, plan, rates, meta, mode, timer=self.timer))
            print(f"   [{self.elapsed():.0f} s elapsed]")
            del case
            if not self.dry:
                self.torch.cuda.empty_cache()
        return results

    @staticmethod
    def suggest_cuda_auto(results: Sequence[Any]) -> dict[str, str]:
        """What ``ops._dispatch.CUDA_AUTO`` should say from these timings: "triton" for a kernel
        whose rrag-triton beat rrag-torch at every size timed, else "torch"; and each size where
        rrag-auto fell below the best baseline."""
        medians: dict[str, list[tuple[float, float]]] = {}
        slow_auto = []
        for res in results:
            by_name = {row["provider"]: row for row in res.rows}
            if "rrag-triton" in by_name and "rrag-torch" in by_name:
                medians.setdefault(res.case.kernel, []).append(
                    (float(by_name["rrag-triton"]["median_ms"]), float(by_name["rrag-torch"]["median_ms"])))
            auto = by_name.get("rrag-auto")
            if auto is not None and float(auto["speedup_vs_best_baseline"]) < 1.0:
                slow_auto.append(f"{res.case.kernel} [{res.case.shape}] {float(auto['speedup_vs_best_baseline']):.2f}x")
        choice = {kernel: "triton" if all(t < o for t, o in pairs) else "torch" for kernel, pairs in medians.items()}
        print(f"\nCUDA_AUTO from these timings (ops/_dispatch.py): {choice}")
        print("rrag-auto below the best baseline: " + ("; ".join(slow_auto) if slow_auto else "nowhere"))
        return choice

    def device_name(self) -> str:
        if self.dry:
            return "dry run on CPU (TRITON_INTERPRET=1): " + self.harness.cpu_model()
        props = self.torch.cuda.get_device_properties(self.dev)
        return f"{props.name} ({props.multi_processor_count} SMs, {props.total_memory / 2**30:.0f} GiB)"

    # ---------------------------------------------------------------- main

    def run(self) -> int:
        print(f"gpu_check on {self.device_name()}; torch {self.torch.__version__}, "
              f"rrag_kernels {getattr(self.rrag, '__version__', '?')}")
        checks = [] if self.args.no_checks else self.run_checks()
        failed = [c for c in checks if not c.ok]
        results = []
        if not self.args.checks_only:
            results = self.run_timings()
            if results and not self.args.no_csv:
                path = self.args.csv or self.harness.RESULTS_DIR / (
                    "gpu-dryrun.csv" if self.dry else "gpu.csv")
                self.harness.append_csv(path, [row for r in results for row in r.rows])
                print(f"\nrows appended to {path}")
            self.harness.summarise(results)
            self.suggest_cuda_auto(results)
            for r in results:
                for name, why in r.skipped.items():
                    if name.startswith("rrag-"):
                        failed.append(CheckResult(r.case.kernel, r.case.shape, False, float("nan"),
                                                  float("nan"), why))
        print(f"\n{len(checks)} edge checks, {len(failed)} failures; {self.elapsed():.0f} s in all")
        for f in failed:
            print(f"FAIL {f.kernel} [{f.label}]: {f.message}")
        return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
