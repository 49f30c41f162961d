"""Shared benchmark harness for rrag_kernels.

A benchmark script builds :class:`Case` objects (one kernel at one shape, with its minimal
memory traffic and flop count, a correctness check and a list of named :class:`Provider`
callables) and hands them to :func:`run_cases`, which

1. measures this machine's memory bandwidth and float32 matmul rate once, to give each case
   a roofline floor (``max(bytes / bandwidth, flops / matmul rate)``);
2. calls every provider once and checks its output (against the float64 reference on a
   subset, and against the first baseline on the whole output) -- a provider that raises or
   disagrees is reported and never gets a speed row;
3. times the providers interleaved, in blocks separated by a pause (see below), and reports
   the median, p20 and p80 of the per-call times;
4. prints a table per case, appends one CSV row per provider, and ends with one line per case
   giving each rrag provider's speed-up over the best baseline and its fraction of the floor.

Why the pause: numpy's OpenBLAS and torch's OpenMP workers keep spinning for ~0.1-0.2 s after
a call returns, and a call of another multi-threaded library made inside that window fights
them for the cores (measured 10-70x slower on 2 cores). Every block of calls of one provider
therefore starts ``PAUSE_S`` after the previous block ended, and the order of providers
rotates between rounds so that no provider always follows the same one.

Timing never asserts anything: speed is reported, not tested.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import datetime as _dt
import gc
import os
import platform
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

REPO_ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = REPO_ROOT / "benchmarks" / "results"

#: Idle time before every block of calls, longer than the ~0.1-0.2 s that BLAS/OpenMP
#: workers keep spinning after a call.
PAUSE_S = 0.25

#: Provider kinds. Only "baseline" rows define the best baseline; "rrag" rows get the
#: summary line; "reference" (the float64 truth) is timed only at small sizes.
BASELINE = "baseline"
RRAG = "rrag"
REFERENCE = "reference"
KINDS = (BASELINE, RRAG, REFERENCE)

CSV_COLUMNS = (
    "timestamp",
    "machine",
    "cores",
    "threads",
    "package_version",
    "commit",
    "simd_level",
    "libs",
    "mode",
    "kernel",
    "provider",
    "kind",
    "shape",
    "median_ms",
    "p20_ms",
    "p80_ms",
    "samples",
    "throughput",
    "throughput_unit",
    "speedup_vs_best_baseline",
    "best_baseline",
    "floor_ms",
    "floor_bound",
    "floor_fraction",
    "bandwidth_gbs",
    "matmul_gflops",
)


# --------------------------------------------------------------------------------------
# Providers and cases
# --------------------------------------------------------------------------------------


@dataclass
class Provider:
    """One way of computing a case's result.

    Parameters
    ----------
    name : str
        Row label, e.g. ``"numpy-padded"``, ``"torch-bmm"``, ``"rrag-cpp"``.
    fn : callable () -> Any
        A closure over the case's prepared inputs; its return value is what ``Case.check``
        and ``Case.compare`` receive. Input preparation that a user would do once (building
        a faiss index, say) belongs outside ``fn``; everything a call costs belongs inside.
    kind : {"baseline", "rrag", "reference"}
    note : str
        Printed under the table (what the provider does, what it leaves out of the timing).
    """

    name: str
    fn: Callable[[], Any]
    kind: str = BASELINE
    note: str = ""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind: must be one of {KINDS}, got {self.kind!r}")

    @property
    def is_baseline(self) -> bool:
        return self.kind == BASELINE


@dataclass
class Case:
    """One kernel at one shape.

    Parameters
    ----------
    kernel : str
        Public kernel name, e.g. ``"claim_relevance"``.
    shape : str
        Human-readable shape, also the CSV key, e.g. ``"Q=10000 docs/q=10 claims/q=8 d=384"``.
    bytes : float
        Minimal memory traffic of one call: every input read once, every output written once.
    flops : float
        Multiply-adds times two (norms included) of one call.
    providers : list of Provider
        Baselines first: the first baseline that passes ``check`` is the anchor that every
        later provider's full output is compared with.
    check : callable (Any) -> None
        Raises ``AssertionError`` with a message when an output is wrong. Usually compares a
        subset against the float64 reference.
    compare : callable (Any, Any) -> None, optional
        ``compare(output, anchor_output)`` raises ``AssertionError`` when a provider's full
        output disagrees with the anchor baseline's.
    """

    kernel: str
    shape: str
    bytes: float
    flops: float
    providers: list[Provider]
    check: Callable[[Any], None]
    compare: Callable[[Any, Any], None] | None = None
    notes: list[str] = field(default_factory=list)


@dataclass
class Timing:
    """Per-call wall times of one provider, in milliseconds."""

    samples_ms: np.ndarray

    @property
    def median(self) -> float:
        return float(np.median(self.samples_ms))

    @property
    def p20(self) -> float:
        return float(np.percentile(self.samples_ms, 20))

    @property
    def p80(self) -> float:
        return float(np.percentile(self.samples_ms, 80))


@dataclass
class TimingPlan:
    """How hard to time.

    repeats : rounds of blocks per provider (fewer for a provider whose calls would exceed
        ``max_s_per_provider``, but never fewer than ``min_repeats``).
    block_s : a fast provider repeats its call inside one block until about this long.
    max_calls_per_block : upper bound on calls per block.
    """

    repeats: int = 7
    min_repeats: int = 3
    max_s_per_provider: float = 20.0
    block_s: float = 0.2
    max_calls_per_block: int = 20
    pause_s: float = PAUSE_S

    @classmethod
    def quick(cls) -> "TimingPlan":
        return cls(repeats=2, min_repeats=2, max_s_per_provider=1.0, block_s=0.1,
                   max_calls_per_block=10)


# --------------------------------------------------------------------------------------
# Environment: rrag import, threads, machine description
# --------------------------------------------------------------------------------------


def import_rrag():
    """Import ``rrag_kernels``: the installed package, else the source tree.

    The source tree without a build gives the reference and the pure-Python layers; the
    ``cpp`` backend then fails in its provider's check and is reported as skipped.

    Returns
    -------
    module
    """
    import importlib

    try:
        return importlib.import_module("rrag_kernels")
    except ImportError:
        sys.path.insert(0, str(REPO_ROOT / "python"))
        return importlib.import_module("rrag_kernels")


def import_optional(name: str):
    """The module, or None when it is not installed (a missing baseline is skipped)."""
    try:
        return __import__(name)
    except ImportError:
        return None


_thread_limiter: Any = None


def set_threads(n: int, rrag: Any = None) -> None:
    """Give every library ``n`` threads: numpy's BLAS, torch, faiss, rrag_kernels.

    Call after every library is imported (threadpoolctl only limits the pools that are
    loaded at the time).
    """
    global _thread_limiter
    try:
        from threadpoolctl import threadpool_limits

        _thread_limiter = threadpool_limits(limits=n)
    except ImportError:
        print(f"note: threadpoolctl missing; numpy's BLAS keeps its own thread count "
              f"(set OPENBLAS_NUM_THREADS={n} before starting to pin it)")
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(n)
    if "faiss" in sys.modules:
        sys.modules["faiss"].omp_set_num_threads(n)
    if rrag is not None and hasattr(rrag, "set_num_threads"):
        try:
            rrag.set_num_threads(n)
        except Exception as exc:  # an unbuilt package may lack the native pool
            print(f"note: rrag_kernels.set_num_threads({n}) failed: {exc}")


def cpu_model() -> str:
    """CPU model name, e.g. ``"AMD EPYC 7B13"``.

    A virtual machine may report a generic name ("Intel(R) Xeon(R) Processor"); the CPU
    family and model numbers are then appended, which still identify the generation (Intel
    family 6 model 207 is Emerald Rapids).
    """
    fields: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if not line.strip():
                    break  # the first processor is enough
                key, _, value = line.partition(":")
                fields.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    name = fields.get("model name") or platform.processor() or platform.machine() or "unknown"
    if not any(ch.isdigit() for ch in name) and "model" in fields:
        name += f" (family {fields.get('cpu family', '?')} model {fields['model']})"
    return name


def git_commit() -> str:
    """Short commit of the working tree, ``+dirty`` when it has changes; ``""`` without git."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO_ROOT,
                              capture_output=True, text=True, timeout=5)
        if head.returncode != 0:
            return ""
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=REPO_ROOT, capture_output=True, text=True, timeout=5)
        return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return ""


def machine_info(threads: int, rrag: Any = None, machine: str | None = None) -> dict[str, str]:
    """The machine/version columns shared by every row of one run."""
    version = getattr(rrag, "__version__", "") if rrag is not None else ""
    simd = ""
    if rrag is not None and hasattr(rrag, "show_config"):
        try:
            cfg = rrag.show_config()
            simd = str(cfg.get("simd_level", ""))
            if cfg.get("gemm"):
                simd += f" gemm={cfg['gemm']}"
        except Exception:
            simd = ""
    libs = [f"numpy={np.__version__}"]
    for name in ("torch", "faiss", "triton"):
        mod = sys.modules.get(name)
        if mod is not None:
            libs.append(f"{name}={getattr(mod, '__version__', '?')}")
    return {
        "machine": machine or cpu_model(),
        "cores": str(os.cpu_count() or ""),
        "threads": str(threads),
        "package_version": version or "unbuilt",
        "commit": git_commit(),
        "simd_level": simd,
        "libs": " ".join(libs),
    }


# --------------------------------------------------------------------------------------
# Machine rates (roofline)
# --------------------------------------------------------------------------------------


@dataclass
class MachineRates:
    """Measured peak rates of this machine at the benchmark's thread count."""

    read_gbs: float
    copy_gbs: float
    matmul_gflops: float
    matmul_source: str

    @property
    def bandwidth_gbs(self) -> float:
        # The floor must be a lower bound on time, so take the faster of the two streams.
        return max(self.read_gbs, self.copy_gbs)

    def floor(self, nbytes: float, flops: float) -> tuple[float, str, float, float]:
        """Roofline floor of one call.

        Returns
        -------
        floor_ms, bound ("memory" | "compute"), memory_ms, compute_ms
        """
        mem_ms = nbytes / (self.bandwidth_gbs * 1e9) * 1e3
        cmp_ms = flops / (self.matmul_gflops * 1e9) * 1e3
        return (mem_ms, "memory", mem_ms, cmp_ms) if mem_ms >= cmp_ms else (
            cmp_ms, "compute", mem_ms, cmp_ms)


def _best_seconds(fn: Callable[[], Any], repeats: int) -> float:
    fn()
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def measure_machine(threads: int, *, quick: bool = False) -> MachineRates:
    """Measure memory bandwidth and float32 matmul rate with ``threads`` threads.

    Bandwidth: a 1 GiB float32 buffer (512 MiB with ``quick``; either larger than the
    last-level cache of the machines we run on) is split into ``threads`` chunks, each reduced (``max``; read only) or copied
    (read + write, counted as 2 x bytes) by its own thread -- numpy releases the GIL in both.
    Best of a few runs, since the floor must be optimistic.

    Matmul: numpy ``float32`` ``(2048, 2048) @ (2048, 2048)`` and, when installed, the same
    in torch; the faster one.
    """
    repeats = 1 if quick else 4
    bytes_ = (1 << 29) if quick else (1 << 30)
    n = bytes_ // 4
    src = np.ones(n, dtype=np.float32)
    dst = np.empty_like(src)
    src_chunks = np.array_split(src, threads)
    dst_chunks = np.array_split(dst, threads)
    with ThreadPoolExecutor(threads) as pool:
        def par(fn):
            return lambda: list(pool.map(fn, range(threads)))

        read_s = _best_seconds(par(lambda i: src_chunks[i].max()), repeats)
        copy_s = _best_seconds(par(lambda i: np.copyto(dst_chunks[i], src_chunks[i])), repeats)
    src = dst = None  # free the 2 GiB before the matmul (the closures hold the chunks)
    src_chunks.clear()
    dst_chunks.clear()
    time.sleep(PAUSE_S)

    size = 2048
    rng = np.random.default_rng(0)
    a = rng.standard_normal((size, size), dtype=np.float32)
    b = rng.standard_normal((size, size), dtype=np.float32)
    flops = 2.0 * size ** 3
    rates = {"numpy": flops / _best_seconds(lambda: a @ b, repeats) / 1e9}
    torch = sys.modules.get("torch")
    if torch is not None:
        time.sleep(PAUSE_S)
        ta, tb = torch.from_numpy(a), torch.from_numpy(b)
        rates["torch"] = flops / _best_seconds(lambda: ta @ tb, repeats) / 1e9
    time.sleep(PAUSE_S)
    source = max(rates, key=rates.get)
    return MachineRates(read_gbs=bytes_ / read_s / 1e9, copy_gbs=2 * bytes_ / copy_s / 1e9,
                        matmul_gflops=rates[source],
                        matmul_source=" ".join(f"{k}={v:.0f}" for k, v in rates.items()))


# --------------------------------------------------------------------------------------
# Timing
# --------------------------------------------------------------------------------------


def cuda_event_ms(torch: Any, fn: Callable[[], Any], repeats: int, warmup: int = 2,
                  before: Callable[[], Any] | None = None) -> list[float]:
    """Milliseconds per call of ``fn`` on the current CUDA device, each call bracketed by CUDA
    events (after ``warmup`` untimed calls); ``before`` runs, untimed, ahead of each timed call
    (e.g. an L2 flush)."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(repeats):
        if before is not None:
            before()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        out.append(start.elapsed_time(end))
    return out


def _call_once_s(fn: Callable[[], Any]) -> float:
    t0 = time.perf_counter_ns()
    fn()
    return (time.perf_counter_ns() - t0) * 1e-9


def time_providers(providers: Sequence[Provider], plan: TimingPlan,
                   first_call_s: dict[str, float] | None = None) -> dict[str, Timing]:
    """Time providers interleaved, a pause before every block.

    Each provider gets rounds of blocks; round ``r`` visits the providers rotated by ``r``.
    A block is ``plan.pause_s`` of sleep, one untimed call (fast providers only: it wakes the
    provider's own thread pool, which the pause put to sleep), then ``c`` timed calls, where
    ``c`` fills about ``plan.block_s``. The garbage collector is off inside a block.

    Parameters
    ----------
    first_call_s : dict, optional
        Seconds each provider's (already made, e.g. by the correctness check) first call took;
        used to size blocks and rounds. Providers missing from it get one sizing call here.

    Returns
    -------
    dict name -> Timing
    """
    est: dict[str, float] = {}
    for p in providers:
        t = first_call_s.get(p.name) if first_call_s else None
        if t is None:
            time.sleep(plan.pause_s)
            t = _call_once_s(p.fn)
        # A first call also pays one-off costs (page faults, thread start-up), so this
        # over-estimates: blocks come out a little shorter, never longer, than planned.
        est[p.name] = max(t, 1e-7)

    calls = {n: int(min(plan.max_calls_per_block, max(1, plan.block_s // t))) for n, t in est.items()}
    rounds = {n: int(min(plan.repeats, max(plan.min_repeats,
                                           plan.max_s_per_provider // (t * calls[n]))))
              for n, t in est.items()}
    samples: dict[str, list[float]] = {p.name: [] for p in providers}
    for r in range(max(rounds.values(), default=0)):
        order = list(providers[r % len(providers):]) + list(providers[:r % len(providers)])
        for p in order:
            if r >= rounds[p.name]:
                continue
            time.sleep(plan.pause_s)
            gc.disable()
            try:
                if est[p.name] < 0.05:
                    p.fn()
                for _ in range(calls[p.name]):
                    t0 = time.perf_counter_ns()
                    p.fn()
                    samples[p.name].append((time.perf_counter_ns() - t0) * 1e-6)
            finally:
                gc.enable()
    return {n: Timing(np.asarray(s)) for n, s in samples.items()}


# --------------------------------------------------------------------------------------
# Running cases, reporting
# --------------------------------------------------------------------------------------


def _throughput(case: Case, bound: str, median_ms: float) -> tuple[float, str]:
    seconds = median_ms * 1e-3
    if bound == "memory":
        return case.bytes / seconds / 1e9, "GB/s"
    return case.flops / seconds / 1e9, "GFLOP/s"


def _fmt_ms(ms: float) -> str:
    if ms >= 100:
        return f"{ms:.0f}"
    if ms >= 10:
        return f"{ms:.1f}"
    if ms >= 1:
        return f"{ms:.2f}"
    return f"{ms:.3f}"


def _short_error(exc: BaseException, limit: int = 300) -> str:
    text = f"{type(exc).__name__}: {exc}".strip().replace("\n", " | ")
    return text if len(text) <= limit else text[:limit] + "..."


@dataclass
class CaseResult:
    case: Case
    rows: list[dict[str, str]]
    skipped: dict[str, str]
    floor_ms: float
    bound: str


Timer = Callable[[Sequence[Provider], TimingPlan, "dict[str, float] | None"], "dict[str, Timing]"]


def run_case(case: Case, plan: TimingPlan, rates: MachineRates, meta: dict[str, str],
             mode: str, timer: Timer | None = None) -> CaseResult:
    """Check, time and report one case; returns its CSV rows (already formatted).

    ``timer`` defaults to :func:`time_providers` (CPU wall clock); ``gpu_check.py`` passes
    one that times with CUDA events.
    """
    floor_ms, bound, mem_ms, cmp_ms = rates.floor(case.bytes, case.flops)
    print()
    print(f"== {case.kernel}  [{case.shape}]")
    print(f"   floor {_fmt_ms(floor_ms)} ms ({bound}-bound; memory {case.bytes / 1e6:.1f} MB -> "
          f"{_fmt_ms(mem_ms)} ms, compute {case.flops / 1e9:.2f} GFLOP -> {_fmt_ms(cmp_ms)} ms)")

    skipped: dict[str, str] = {}
    passed: list[Provider] = []
    first_call_s: dict[str, float] = {}
    anchor_name, anchor_out = None, None
    for p in case.providers:
        try:
            t0 = time.perf_counter()
            out = p.fn()
            first_call_s[p.name] = time.perf_counter() - t0
        except Exception as exc:
            skipped[p.name] = "raised " + _short_error(exc)
            continue
        against = "reference"
        try:
            case.check(out)
            if anchor_out is not None and case.compare is not None:
                against = anchor_name
                case.compare(out, anchor_out)
        except AssertionError as exc:
            skipped[p.name] = f"WRONG RESULT vs {against}: {exc}"
            continue
        except Exception as exc:  # a check that cannot even read the output
            skipped[p.name] = f"WRONG RESULT vs {against}: check raised {_short_error(exc)}"
            continue
        if anchor_out is None and p.is_baseline:
            anchor_name, anchor_out = p.name, out
        del out
        passed.append(p)
    del anchor_out

    timings = (timer or time_providers)(passed, plan, first_call_s) if passed else {}
    base = {n: t.median for n, t in timings.items()
            if next(p for p in passed if p.name == n).is_baseline}
    best_base = min(base, key=base.get) if base else ""

    header = (f"   {'provider':<22} {'kind':<9} {'median ms':>10} {'p20':>9} {'p80':>9} "
              f"{'throughput':>16} {'vs best base':>12} {'of floor':>8}")
    print(header)
    rows: list[dict[str, str]] = []
    stamp = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    for p in passed:
        t = timings[p.name]
        thr, unit = _throughput(case, bound, t.median)
        speedup = base[best_base] / t.median if best_base else float("nan")
        frac = floor_ms / t.median
        print(f"   {p.name:<22} {p.kind:<9} {_fmt_ms(t.median):>10} {_fmt_ms(t.p20):>9} "
              f"{_fmt_ms(t.p80):>9} {thr:>9.1f} {unit:<6} {speedup:>11.2f}x {frac:>8.2f}")
        rows.append({
            **meta, "timestamp": stamp, "mode": mode, "kernel": case.kernel,
            "provider": p.name, "kind": p.kind, "shape": case.shape,
            "median_ms": f"{t.median:.4f}", "p20_ms": f"{t.p20:.4f}", "p80_ms": f"{t.p80:.4f}",
            "samples": str(len(t.samples_ms)), "throughput": f"{thr:.3f}",
            "throughput_unit": unit, "speedup_vs_best_baseline": f"{speedup:.3f}",
            "best_baseline": best_base, "floor_ms": f"{floor_ms:.4f}", "floor_bound": bound,
            "floor_fraction": f"{frac:.3f}", "bandwidth_gbs": f"{rates.bandwidth_gbs:.2f}",
            "matmul_gflops": f"{rates.matmul_gflops:.1f}",
        })
    for name, why in skipped.items():
        print(f"   {name:<22} skipped: {why}")
    for p in case.providers:
        if p.note:
            print(f"   - {p.name}: {p.note}")
    for note in case.notes:
        print(f"   - {note}")
    return CaseResult(case, rows, skipped, floor_ms, bound)


@contextlib.contextmanager
def busy_processes(n: int):
    """``n`` processes that each keep one core busy until the block ends."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        time.sleep(1.0)  # let the scheduler spread them
        yield
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait()


def append_csv(path: Path, rows: Sequence[dict[str, str]]) -> None:
    """Append rows to ``path``; a new file gets a header. An existing file keeps its own
    header (columns it lacks are dropped, so old files stay readable)."""
    if not rows:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    columns: Sequence[str] = CSV_COLUMNS
    new = not path.exists() or path.stat().st_size == 0
    if not new:
        with open(path, newline="") as fh:
            columns = next(csv.reader(fh), None) or CSV_COLUMNS
    with open(path, "a", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(columns), extrasaction="ignore")
        if new:
            writer.writeheader()
        writer.writerows(rows)


def summarise(results: Sequence[CaseResult]) -> None:
    """The last lines: each rrag provider against the best baseline and against the floor."""
    print()
    print("== summary: rrag against the best baseline and the roofline floor")
    for res in results:
        label = f"{res.case.kernel} [{res.case.shape}]"
        by_name = {row["provider"]: row for row in res.rows}
        rrag = [p for p in res.case.providers if p.kind == RRAG]
        if not rrag:
            print(f"{label}: no rrag provider")
        for p in rrag:
            row = by_name.get(p.name)
            if row is None:
                print(f"{label}: {p.name} not measured ({res.skipped.get(p.name, 'unavailable')})")
                continue
            best = row["best_baseline"]
            best_ms = float(by_name[best]["median_ms"]) if best else float("nan")
            print(f"{label}: {p.name} {_fmt_ms(float(row['median_ms']))} ms = "
                  f"{float(row['speedup_vs_best_baseline']):.2f}x best baseline "
                  f"({best} {_fmt_ms(best_ms)} ms), {float(row['floor_fraction']):.2f}x of "
                  f"{res.bound} floor ({_fmt_ms(res.floor_ms)} ms)")


def add_common_args(parser: argparse.ArgumentParser, kernels: Sequence[str]) -> None:
    """The flags every ``bench_*.py`` shares."""
    parser.add_argument("--quick", action="store_true",
                        help="small sizes, few repeats (well under a minute)")
    parser.add_argument("--kernel", action="append", choices=list(kernels), metavar="NAME",
                        help=f"run only this kernel (repeatable); one of {', '.join(kernels)}")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1,
                        help="threads for every library (default: all cores)")
    parser.add_argument("--csv", type=Path, default=None,
                        help="results file to append to (default: benchmarks/results/<name>.csv, "
                             "<name>-quick.csv with --quick)")
    parser.add_argument("--no-csv", action="store_true", help="print only, write no rows")
    parser.add_argument("--repeats", type=int, default=None,
                        help="rounds of timed blocks per provider (default 7, 2 with --quick)")


def run_cases(name: str, cases_by_kernel: Sequence[tuple[str, Callable[[], list[Case]]]],
              args: argparse.Namespace, rrag: Any) -> list[CaseResult]:
    """Measure the machine, run every selected case, write the CSV, print the summary.

    Parameters
    ----------
    name : str
        Results file stem (``benchmarks/results/<name>.csv``).
    cases_by_kernel : sequence of (kernel, factory)
        ``factory()`` builds that kernel's cases (inputs are allocated only when selected, and
        dropped before the next kernel's are built).
    """
    plan = TimingPlan.quick() if args.quick else TimingPlan()
    if args.repeats:
        plan.repeats = args.repeats
        plan.min_repeats = min(plan.min_repeats, args.repeats)
    mode = "quick" if args.quick else "full"
    meta = machine_info(args.threads, rrag)
    print(f"machine: {meta['machine']}, {meta['cores']} cores; threads={args.threads}; "
          f"rrag_kernels {meta['package_version']} {meta['commit']} {meta['simd_level']}".rstrip())
    print(f"libs: {meta['libs']}; mode={mode}")
    started = time.perf_counter()
    rates = measure_machine(args.threads, quick=args.quick)
    print(f"measured: memory read {rates.read_gbs:.1f} GB/s, copy {rates.copy_gbs:.1f} GB/s "
          f"(floor uses {rates.bandwidth_gbs:.1f}); float32 matmul 2048^3 "
          f"{rates.matmul_gflops:.0f} GFLOP/s ({rates.matmul_source}) "
          f"[{time.perf_counter() - started:.1f} s]")

    results: list[CaseResult] = []
    for kernel, factory in cases_by_kernel:
        if args.kernel and kernel not in args.kernel:
            continue
        t0 = time.perf_counter()
        for case in factory():
            results.append(run_case(case, plan, rates, meta, mode))
            del case
        gc.collect()
        print(f"   [{kernel}: {time.perf_counter() - t0:.1f} s]")

    if not args.no_csv:
        path = args.csv or RESULTS_DIR / (f"{name}-quick.csv" if args.quick else f"{name}.csv")
        append_csv(path, [row for res in results for row in res.rows])
        print(f"\nrows appended to {path}")
    summarise(results)
    return results


# --------------------------------------------------------------------------------------
# Shared correctness checks
# --------------------------------------------------------------------------------------


def to_numpy(x: Any) -> np.ndarray:
    """numpy view/copy of a numpy array or (CPU or CUDA) torch tensor."""
    if hasattr(x, "detach"):
        return x.detach().cpu().numpy()
    return np.asarray(x)


def assert_close(actual: Any, expected: Any, *, atol: float, rtol: float, what: str) -> None:
    """Raise AssertionError naming the worst element when ``actual`` is not close."""
    a = to_numpy(actual).astype(np.float64, copy=False)
    e = np.asarray(to_numpy(expected), dtype=np.float64)
    if a.shape != e.shape:
        raise AssertionError(f"{what}: shape {a.shape} != expected {e.shape}")
    if a.size == 0:
        return
    bad_finite = ~np.isfinite(a)
    if bad_finite.any():
        idx = np.unravel_index(np.argmax(bad_finite), a.shape)
        raise AssertionError(f"{what}: {int(bad_finite.sum())} non-finite values, first at {idx}")
    err = np.abs(a - e) - (atol + rtol * np.abs(e))
    if (err > 0).any():
        idx = np.unravel_index(np.argmax(err), a.shape)
        raise AssertionError(f"{what}: {int((err > 0).sum())} of {a.size} values off, worst at "
                             f"{idx}: {a[idx]:.7g} vs {e[idx]:.7g} (atol={atol}, rtol={rtol})")


def check_topk(scores: Any, indices: Any, queries: np.ndarray, corpus: np.ndarray,
               expected_scores: np.ndarray, *, rows: np.ndarray | slice = slice(None),
               atol: float = 1e-4, what: str = "topk") -> None:
    """Check a top-k answer without demanding equal indices where float32 near-ties flip.

    1. shapes, int64 indices in range, no duplicate index in a row;
    2. each row's scores are non-increasing;
    3. each returned score is the float64 cosine of its query with the returned corpus row
       (the indices are honest);
    4. the scores match ``expected_scores`` (the reference's, or the anchor's) -- so the
       returned rows are a correct top-k up to ties within ``atol``.

    Parameters
    ----------
    scores : (Q, k) float, indices : (Q, k) int
    queries : (Q, d), corpus : (N, d)
    expected_scores : (len(rows), k)
    rows : which query rows to check (``expected_scores`` covers exactly these)
    """
    s = to_numpy(scores)[rows]
    i = to_numpy(indices)[rows]
    if s.shape != expected_scores.shape or i.shape != expected_scores.shape:
        raise AssertionError(f"{what}: shapes {s.shape}/{i.shape} != {expected_scores.shape}")
    if i.dtype != np.int64:
        raise AssertionError(f"{what}: indices dtype {i.dtype}, expected int64")
    if i.size == 0:
        return
    if i.min() < 0 or i.max() >= corpus.shape[0]:
        raise AssertionError(f"{what}: index out of range [{i.min()}, {i.max()}]")
    srt = np.sort(i, axis=1)
    if (srt[:, 1:] == srt[:, :-1]).any():
        raise AssertionError(f"{what}: a row returns the same corpus index twice")
    if (np.diff(s.astype(np.float64), axis=1) > 1e-6).any():
        raise AssertionError(f"{what}: scores not descending")
    q = np.asarray(queries[rows], dtype=np.float64)
    c = np.asarray(corpus[i], dtype=np.float64)  # (R, k, d): gather first, convert only that
    qn = np.linalg.norm(q, axis=1)
    cn = np.linalg.norm(c, axis=2)
    with np.errstate(divide="ignore", invalid="ignore"):
        recomputed = np.where((qn[:, None] > 0) & (cn > 0),
                              np.einsum("rd,rkd->rk", q, c) / (qn[:, None] * cn), 0.0)
    assert_close(s, recomputed, atol=atol, rtol=0, what=f"{what} (score of returned index)")
    assert_close(s, expected_scores, atol=atol, rtol=0, what=f"{what} (scores vs expected)")


def print_ratios_vs_rrag(results, *, unit: str = "ms", exclude: tuple[str, ...] = ("reference",)) -> None:
    """Print, per case, rrag-cpp's median and every other provider's median / rrag's."""
    scale = {"ms": 1.0, "us": 1e3}[unit]
    print()
    print("== rrag-cpp against every baseline (median / median)")
    for res in results:
        rows = {row["provider"]: float(row["median_ms"]) for row in res.rows}
        if "rrag-cpp" not in rows:
            continue
        ours = rows["rrag-cpp"]
        ratios = ", ".join(f"{name} {ms / ours:.1f}x" for name, ms in rows.items()
                           if name != "rrag-cpp" and name not in exclude)
        print(f"{res.case.kernel} [{res.case.shape}]: rrag-cpp {ours * scale:.2f} {unit}; {ratios}")
