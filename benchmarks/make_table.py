"""Print the benchmark tables of docs/benchmarks.md (Markdown) from the results CSVs.

Takes the latest row per (hardware, threads, kernel, provider, shape) and prints one table
per results file and hardware, naming the hardware, in the order of the files. By default
one line per (kernel, shape) and rrag provider: the best baseline, ours, the speed-up and
the fraction of the roofline floor (the ``check_finite=False`` diagnostic rows are left
out); ``--all`` lists every provider.

Usage::

    python benchmarks/make_table.py                       # every results file: the tables of docs/benchmarks.md
    python benchmarks/make_table.py benchmarks/results/mirage.csv --kernel nli_graph --kernel gate_stats
    python benchmarks/make_table.py --all --kernel claim_relevance
    python benchmarks/make_table.py benchmarks/results/cosine-quick.csv --mode quick
    python benchmarks/make_table.py --threads             # bench_threads.py: quiet vs under load
"""

from __future__ import annotations

import argparse
import csv
import sys
from collections import defaultdict
from pathlib import Path

RESULTS_DIR = Path(__file__).resolve().parent / "results"
#: The tables of docs/benchmarks.md, in its order: one per file (and hardware).
DEFAULT_FILES = ("cosine.csv", "mirage.csv", "conformal.csv", "nli.csv", "gpu.csv")
#: Kernels in pipeline order within a table; others follow alphabetically.
KERNEL_ORDER = (
    "cosine_matrix", "segmented_cosine", "claim_relevance", "topk_cosine",
    "claim_token_ids", "select_pairs", "nli_graph", "greedy_prune", "gate_stats", "graph_stage",
    "r_scores", "conformal_quantile", "conformal_sweep",
    "lexical_opcodes", "nli_batch",
)
KIND_ORDER = {"baseline": 0, "rrag": 1, "reference": 2}


def read_rows(paths: list[Path]) -> list[dict[str, str]]:
    rows: list[dict[str, str]] = []
    for path in paths:
        with open(path, newline="") as fh:
            for row in csv.DictReader(fh):
                row["_file"] = path.name
                rows.append(row)
    return rows


def latest(rows: list[dict[str, str]]) -> list[dict[str, str]]:
    """The newest row per (machine, threads, kernel, provider, shape); later lines win ties."""
    best: dict[tuple, dict[str, str]] = {}
    for row in rows:
        key = (row["machine"], row.get("threads", ""), row["kernel"], row["provider"], row["shape"])
        if key not in best or row["timestamp"] >= best[key]["timestamp"]:
            best[key] = row
    return list(best.values())


def _ms(value: str) -> str:
    ms = float(value)
    return f"{ms:.0f}" if ms >= 100 else f"{ms:.1f}" if ms >= 10 else f"{ms:.2f}" if ms >= 1 else f"{ms:.3f}"


def _shape_key(shape: str) -> tuple:
    # "Q=10000 docs/q=20 d=384" -> d first, then the numbers in order.
    parts = dict(p.split("=", 1) for p in shape.split() if "=" in p)
    nums = tuple(float("".join(c for c in v if c.isdigit() or c == ".") or 0) for v in parts.values())
    return (float(parts.get("d", 0) or 0),) + nums


def _case_key(kernel: str, shape: str) -> tuple:
    order = KERNEL_ORDER.index(kernel) if kernel in KERNEL_ORDER else len(KERNEL_ORDER)
    return (order, kernel, _shape_key(shape))


def hardware_heading(rows: list[dict[str, str]]) -> str:
    r = max(rows, key=lambda x: x["timestamp"])
    n = r.get("threads", "")
    threads = f", {n} thread{'' if n == '1' else 's'}" if n else ""
    cores = f", {r['cores']} cores" if r.get("cores") and r.get("mode") != "gpu" else ""
    when = min(x["timestamp"] for x in rows)[:10], max(x["timestamp"] for x in rows)[:10]
    dates = when[0] if when[0] == when[1] else f"{when[0]} to {when[1]}"
    rates = (f"measured {float(r['bandwidth_gbs']):.0f} GB/s, {float(r['matmul_gflops']):.0f} GFLOP/s"
             if r.get("bandwidth_gbs") else "")
    version = r.get("package_version", "")
    commit = f" ({r['commit']})" if r.get("commit") else ""
    parts = [f"rrag_kernels {version}{commit}", r.get("libs", ""), rates, dates]
    return f"**{r['machine']}{cores}{threads}** - " + "; ".join(p for p in parts if p)


def _floor(row: dict[str, str], short: bool = False) -> str:
    """The "of floor" cell; "-" for rows without a roofline floor (bench_defend's end-to-end
    defend / defend_batch rows record none: their time is mostly the NLI model's)."""
    if not row.get("floor_fraction"):
        return "-"
    if short:
        return f"{float(row['floor_fraction']):.2f}"
    return f"{float(row['floor_fraction']):.2f} ({row['floor_bound']}, {_ms(row['floor_ms'])} ms)"


def _throughput(row: dict[str, str]) -> str:
    """The throughput cell; "-" where the row records none (the end-to-end defend rows)."""
    return f"{float(row['throughput']):.1f} {row['throughput_unit']}" if row.get("throughput") else "-"


def compact_table(rows: list[dict[str, str]]) -> list[str]:
    by_case: dict[tuple, list[dict[str, str]]] = defaultdict(list)
    for row in rows:
        by_case[(row["kernel"], row["shape"])].append(row)
    out = ["| Kernel | Shape | Best baseline (ms) | rrag (ms, p20-p80) | Speed-up | Of floor (bound) |",
           "| --- | --- | --- | --- | --- | --- |"]
    for kernel, shape in sorted(by_case, key=lambda k: _case_key(*k)):
        case = by_case[(kernel, shape)]
        base = [r for r in case if r["kind"] == "baseline"]
        best = min(base, key=lambda r: float(r["median_ms"])) if base else None
        best_txt = f"{best['provider']} {_ms(best['median_ms'])}" if best else "-"
        # The check_finite=False diagnostic rows stay in --all.
        ours = [r for r in case if r["kind"] == "rrag" and "nocheck" not in r["provider"]] or [None]
        for r in ours:
            if r is None:
                out.append(f"| {kernel} | {shape} | {best_txt} | not measured | - | - |")
                continue
            speed = f"{float(best['median_ms']) / float(r['median_ms']):.2f}x" if best else "-"
            out.append(f"| {kernel} | {shape} | {best_txt} | {r['provider']} {_ms(r['median_ms'])} "
                       f"({_ms(r['p20_ms'])}-{_ms(r['p80_ms'])}) | {speed} | "
                       f"{_floor(r)} |")
    return out


def full_table(rows: list[dict[str, str]]) -> list[str]:
    by_case: dict[tuple, list[dict[str, str]]] = defaultdict(list)
    for row in rows:
        by_case[(row["kernel"], row["shape"])].append(row)
    out = ["| Kernel | Shape | Provider | Median ms (p20-p80) | Throughput | vs best baseline | Of floor |",
           "| --- | --- | --- | --- | --- | --- | --- |"]
    for kernel, shape in sorted(by_case, key=lambda k: _case_key(*k)):
        case = by_case[(kernel, shape)]
        base = [float(r["median_ms"]) for r in case if r["kind"] == "baseline"]
        best = min(base) if base else float("nan")
        for r in sorted(case, key=lambda r: (KIND_ORDER.get(r["kind"], 9), float(r["median_ms"]))):
            name = r["provider"] if r["kind"] != "baseline" else f"{r['provider']} (baseline)"
            out.append(f"| {kernel} | {shape} | {name} | {_ms(r['median_ms'])} ({_ms(r['p20_ms'])}-"
                       f"{_ms(r['p80_ms'])}) | {_throughput(r)} | "
                       f"{best / float(r['median_ms']):.2f}x | {_floor(r, short=True)} |")
    return out


def threads_table(rows: list[dict[str, str]]) -> list[str]:
    """bench_threads.py rows: per kernel, the latest quiet and loaded medians of rrag (default
    threads), rrag-1t and the best baseline, the speed-ups and rrag's time over its own
    1-thread time under load."""
    latest_rows: dict[tuple, dict[str, str]] = {}
    for r in rows:
        key = (r["mode"], r["kernel"], r["provider"])
        if key not in latest_rows or r["timestamp"] >= latest_rows[key]["timestamp"]:
            latest_rows[key] = r
    modes = sorted({m for m, _, _ in latest_rows}, key=lambda m: (m != "quiet", m))
    if len(modes) != 2:
        return [f"(threads table: expected a quiet and a loaded mode, got {modes})"]
    quiet, loaded = modes
    head = (f"| Kernel | Shape | {quiet}: rrag / 1 thread / best baseline (ms) | speed-up | "
            f"{loaded}: rrag / 1 thread / best baseline (ms) | speed-up | rrag / own 1-thread |")
    out = [head, "| --- | --- | --- | --- | --- | --- | --- |"]
    kernels = sorted({k for _, k, _ in latest_rows}, key=lambda k: _case_key(k, ""))
    for kernel in kernels:
        cells, shape = [], ""
        for mode in (quiet, loaded):
            case = {p: r for (m, k, p), r in latest_rows.items() if m == mode and k == kernel}
            if "rrag" not in case or "rrag-1t" not in case:
                cells.append(("-", "-", None))
                continue
            shape = case["rrag"]["shape"]
            base = min((r for r in case.values() if r["kind"] == "baseline"), key=lambda r: float(r["median_ms"]))
            ours, one = float(case["rrag"]["median_ms"]), float(case["rrag-1t"]["median_ms"])
            cells.append((f"{_ms(ours)} / {_ms(one)} / {_ms(base['median_ms'])} ({base['provider']})",
                          f"{float(base['median_ms']) / ours:.2f}x", ours / one))
        (q_txt, q_speed, _), (l_txt, l_speed, ratio) = cells
        ratio_txt = f"{ratio:.2f}" if ratio is not None else "-"
        out.append(f"| {kernel} | {shape} | {q_txt} | {q_speed} | {l_txt} | {l_speed} | {ratio_txt} |")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("csv", nargs="*", type=Path,
                        help=f"results files (default: {', '.join(DEFAULT_FILES)} under {RESULTS_DIR})")
    parser.add_argument("--all", action="store_true", help="every provider, not only best baseline + rrag")
    parser.add_argument("--kernel", action="append", metavar="NAME")
    parser.add_argument("--mode", default="full,gpu",
                        help="comma-separated modes to include: full, quick, gpu (default full,gpu)")
    parser.add_argument("--machine", metavar="TEXT", help="only rows whose machine name contains TEXT")
    parser.add_argument("--threads", action="store_true",
                        help="the quiet-vs-loaded table of bench_threads.py (default file threads.csv)")
    args = parser.parse_args(argv)
    if args.threads:
        paths = args.csv or [RESULTS_DIR / "threads.csv"]
        rows = [r for r in read_rows([p for p in paths if p.exists()])
                if not args.kernel or r["kernel"] in args.kernel]
        if not rows:
            print(f"make_table: no rows in {', '.join(map(str, paths))}; run benchmarks/bench_threads.py",
                  file=sys.stderr)
            return 1
        print(hardware_heading(rows) + "\n")
        print("\n".join(threads_table(rows)))
        print("\nrrag: the default thread count; speed-up: best baseline / rrag; last column: rrag's time "
              "over its own 1-thread time in the same condition.")
        return 0

    paths = args.csv or [RESULTS_DIR / f for f in DEFAULT_FILES if (RESULTS_DIR / f).exists()]
    if not paths:
        print(f"make_table: no results under {RESULTS_DIR}; run the benchmarks/bench_*.py scripts first",
              file=sys.stderr)
        return 1
    modes = set(args.mode.split(","))
    all_rows = read_rows(paths)
    foreign = sorted({r["_file"] for r in all_rows if not {"machine", "kernel", "kind", "median_ms"} <= set(r)})
    if foreign:
        # gpu_tune.csv and nli_sweep.csv keep other columns (tile grids, NLI recipes): read them as CSV.
        parser.error(f"{', '.join(foreign)}: not a benchmark timing file (needs machine, kernel, kind and "
                     "median_ms columns)")
    rows = [r for r in all_rows if r.get("mode", "full") in modes
            and (not args.kernel or r["kernel"] in args.kernel)
            and (not args.machine or args.machine in r["machine"])]
    if not rows:
        print(f"make_table: no rows with mode in {sorted(modes)} in {', '.join(map(str, paths))}",
              file=sys.stderr)
        return 1
    file_order = {path.name: k for k, path in enumerate(paths)}
    by_hw: dict[tuple, list[dict[str, str]]] = defaultdict(list)
    for row in latest(rows):
        by_hw[(file_order[row["_file"]], row["machine"], row.get("threads", ""))].append(row)
    blocks = []
    for hw in sorted(by_hw):
        hw_rows = by_hw[hw]
        lines = [hardware_heading(hw_rows), ""]
        lines += full_table(hw_rows) if args.all else compact_table(hw_rows)
        blocks.append("\n".join(lines))
    print("\n\n".join(blocks))
    print("\nSpeed-up: best baseline median / rrag median. Of floor: roofline floor / median "
          "(1.0 = at the measured memory-bandwidth or matmul-rate limit).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
