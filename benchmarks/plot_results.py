"""Plots of the benchmark results CSVs (one PNG per results file and kernel).

Reads the rows that ``harness.py`` appends to ``benchmarks/results/*.csv`` and nothing else.
Per (file, kernel) one PNG: a column per hardware (machine, threads, mode), the top row the
median time per call of every provider at every shape (bars, p20-p80 error bars, log
scale), the bottom row each rrag provider's speed-up over the best baseline at that shape
(or over ``--baseline``), with 1x marked; a kernel without baseline rows has only the time
row. Like ``make_table.py`` it takes the latest row per (machine, threads, mode, kernel,
provider, shape); where every provider has its own thread count (``threads.csv``) the panels
are (machine, mode).

Usage::

    python benchmarks/plot_results.py                         # every results file -> benchmarks/plots/
    python benchmarks/plot_results.py --kernel nli_graph --kernel gate_stats --out /tmp/plots
    python benchmarks/plot_results.py benchmarks/results/cosine.csv --baseline numpy-padded
    python benchmarks/plot_results.py --results benchmarks/results --mode full --machine EPYC

Needs matplotlib (``pip install 'rrag_kernels[plot]'``); no pyplot, no display.
"""

from __future__ import annotations

import argparse
import re
import sys
import textwrap
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_table import KIND_ORDER, RESULTS_DIR, _case_key, read_rows  # noqa: E402

OUT_DIR = Path(__file__).resolve().parent / "plots"
#: Provider colours: rrag providers in strong colours, baselines in muted ones, the
#: reference in grey, each provider keeping its colour across the panels of a picture.
RRAG_COLOURS = ("#1f5fa8", "#d1495b", "#2a9d3c", "#7b3fa0", "#e08a00")
BASELINE_COLOURS = ("#9fb8cf", "#e6b8a2", "#b9d3a8", "#cdb4db", "#d9c27a", "#a8d5d0", "#c9c9a3", "#e3b3c9")
REFERENCE_COLOUR = "#8c8c8c"


@dataclass
class Plot:
    """One picture written: its path, kernel, hardware panels and the series of each row."""

    path: Path
    source: str
    kernel: str
    panels: list[str] = field(default_factory=list)
    time_series: list[int] = field(default_factory=list)  # providers drawn in each time panel
    speedup_series: list[int] = field(default_factory=list)  # providers drawn in each speed-up panel
    providers: list[str] = field(default_factory=list)
    figure: Any = field(default=None, repr=False)  # the matplotlib Figure


def latest(rows: list[dict[str, str]]) -> list[dict[str, str]]:
    """The newest row per (machine, threads, mode, kernel, provider, shape); later lines win
    ties (make_table's rule, with the mode: threads.csv holds a quiet and a loaded run)."""
    best: dict[tuple, dict[str, str]] = {}
    for row in rows:
        key = (*_hardware(row), row["kernel"], row["provider"], row["shape"])
        if key not in best or row["timestamp"] >= best[key]["timestamp"]:
            best[key] = row
    return list(best.values())


def _natural(text: str) -> tuple:
    """Numbers in a shape compare as numbers ("8 passages" before "20 passages")."""
    return tuple((0, float(t), "") if t[0].isdigit() else (1, 0.0, t) for t in re.findall(r"\d+(?:\.\d+)?|\D+", text))


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower()


def _hardware(row: dict[str, str]) -> tuple[str, str, str]:
    return row["machine"], row.get("threads", ""), row.get("mode", "full")


def _panels(rows: list[dict[str, str]]) -> dict[tuple[str, str, str], list[dict[str, str]]]:
    """The rows of each panel: one per (machine, threads, mode); but where every provider has
    one thread count of its own (bench_threads.py: "rrag-1t", "numpy (1 BLAS thread)"), the
    thread count belongs to the provider and the panel is (machine, mode)."""
    per: dict[tuple, set[str]] = defaultdict(set)
    for r in rows:
        per[(r["machine"], r.get("mode", "full"), r["provider"])].add(r.get("threads", ""))
    own = len({t for ts in per.values() for t in ts}) > 1 and all(len(ts) == 1 for ts in per.values())
    out: dict[tuple, list[dict[str, str]]] = defaultdict(list)
    for r in rows:
        machine, threads, mode = _hardware(r)
        out[(machine, "per provider" if own else threads, mode)].append(r)
    return out


def _panel_title(hw: tuple[str, str, str], rows: list[dict[str, str]]) -> str:
    machine, threads, mode = hw
    newest = max(rows, key=lambda r: r["timestamp"])
    if threads in ("", "per provider"):
        what = "thread count per provider" if threads else ""
    else:
        what = "default threads" if threads == "0" else f"{threads} thread{'' if threads == '1' else 's'}"
    bits = [what, mode if mode != "full" else "",
            newest.get("package_version", ""), newest["timestamp"][:10]]
    return "\n".join(textwrap.wrap(machine, 34) + [", ".join(b for b in bits if b)])


def _providers(rows: list[dict[str, str]]) -> list[str]:
    """Providers in drawing order: baselines, rrag, reference; then by name."""
    kind = {r["provider"]: r["kind"] for r in rows}
    return sorted(kind, key=lambda p: (KIND_ORDER.get(kind[p], 9), p))


def _colours(rows: list[dict[str, str]]) -> dict[str, str]:
    kind = {r["provider"]: r["kind"] for r in rows}
    out, counts = {}, defaultdict(int)
    for p in _providers(rows):
        k = kind[p]
        palette = RRAG_COLOURS if k == "rrag" else BASELINE_COLOURS if k == "baseline" else (REFERENCE_COLOUR,)
        out[p] = palette[counts[k] % len(palette)]
        counts[k] += 1
    return out


def _leading(y: float) -> int:
    """The leading digit of a positive number (for the minor tick labels of a log axis)."""
    return int(f"{y:.0e}"[0]) if y > 0 else 0


def plot_kernel(source: str, kernel: str, rows: list[dict[str, str]], out_dir: Path, *,
                baseline: str | None = None, dpi: int = 110) -> Plot:
    """Draw one kernel of one results file (``rows``: its latest rows, any hardware)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.container import BarContainer
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter

    by_hw = _panels(rows)
    hws = sorted(by_hw, key=lambda hw: (hw[0], hw[2] != "quiet", hw[2], hw[1]))
    kind = {r["provider"]: r["kind"] for r in rows}
    colours = _colours(rows)
    # The speed-up row only where there is a baseline to compare with.
    speed = any(k == "baseline" and (baseline is None or p == baseline) for p, k in kind.items())
    n_shapes = max(len({r["shape"] for r in v}) for v in by_hw.values())
    per_shape = max(1.1, 0.35 + 0.16 * len(kind))
    panel_w = max(3.6, 0.9 + n_shapes * per_shape)
    fig = Figure(figsize=(panel_w * len(hws) + 0.6, 7.6 if speed else 5.4))
    FigureCanvasAgg(fig)
    axes = fig.subplots(2 if speed else 1, len(hws), squeeze=False, sharey="row",
                        gridspec_kw={"height_ratios": (3, 2)} if speed else None)
    info = Plot(path=out_dir / f"{_slug(source)}-{kernel}.png", source=source, kernel=kernel,
                providers=_providers(rows))
    handles: dict[str, object] = {}
    wrap = max(10, int(per_shape * 72 / 4.3))  # characters of a 7.5 pt shape label that fit under its bars
    for col, hw in enumerate(hws):
        hw_rows = by_hw[hw]
        shapes = sorted({r["shape"] for r in hw_rows}, key=lambda s: (_case_key(kernel, s), _natural(s)))
        cell = {(r["provider"], r["shape"]): r for r in hw_rows}
        provs = _providers(hw_rows)
        width = 0.8 / max(len(provs), 1)
        t_ax = axes[0][col]
        info.panels.append(" / ".join(x for x in hw if x))
        # Top: median time per call with p20-p80 bars.
        for k, p in enumerate(provs):
            xs, med, lo, hi = [], [], [], []
            for x, shape in enumerate(shapes):
                r = cell.get((p, shape))
                if r is None:
                    continue
                m = float(r["median_ms"])
                xs.append(x - 0.4 + width * (k + 0.5))
                med.append(m)
                lo.append(max(m - float(r["p20_ms"]), 0.0))
                hi.append(max(float(r["p80_ms"]) - m, 0.0))
            label = p if kind[p] != "baseline" else f"{p} (baseline)"
            bars = t_ax.bar(xs, med, width * 0.92, yerr=(lo, hi), color=colours[p], edgecolor="#333333", lw=0.4,
                            error_kw={"elinewidth": 0.8, "capsize": 1.5, "ecolor": "#222222"}, label=label)
            handles.setdefault(label, bars)
        info.time_series.append(sum(isinstance(c, BarContainer) for c in t_ax.containers))
        t_ax.set_yscale("log")
        t_ax.set_title(_panel_title(hw, hw_rows), fontsize=8.5)
        t_ax.grid(axis="y", which="major", alpha=0.3)
        t_ax.set_xlim(-0.6, len(shapes) - 0.4)
        ticks = ["\n".join(textwrap.wrap(s, wrap)) for s in shapes]
        t_ax.set_xticks(range(len(shapes)), [""] * len(shapes) if speed else ticks, fontsize=7.5)
        if col == 0:
            t_ax.set_ylabel("median ms per call (p20-p80)")
        if not speed:
            continue
        # Bottom: speed-up over the best (or the named) baseline, per shape.
        s_ax = axes[1][col]
        others = [p for p in provs if kind[p] == "rrag"]
        drawn = 0
        for k, p in enumerate(others):
            xs, ys = [], []
            for x, shape in enumerate(shapes):
                r = cell.get((p, shape))
                base = [cell[(b, shape)] for b in provs if kind[b] == "baseline" and (b, shape) in cell
                        and (baseline is None or b == baseline)]
                if r is None or not base:
                    continue
                best = min(float(b["median_ms"]) for b in base)
                xs.append(x - 0.4 + (0.8 / len(others)) * (k + 0.5))
                ys.append(best / float(r["median_ms"]))
            if xs:
                s_ax.bar(xs, ys, (0.8 / len(others)) * 0.92, color=colours[p], edgecolor="#333333", lw=0.4)
                for x, y in zip(xs, ys):
                    s_ax.annotate(f"{y:.3g}x", (x, y), xytext=(0, 2), textcoords="offset points", ha="center",
                                  va="bottom", fontsize=6.5)
                drawn += 1
        info.speedup_series.append(drawn)
        if not drawn:
            s_ax.text(0.5, 0.5, f"no {baseline or 'baseline'} row to compare with", transform=s_ax.transAxes,
                      ha="center", va="center", fontsize=8, color="#666666")
        s_ax.axhline(1.0, color="#333333", lw=0.9, ls="--")
        s_ax.set_yscale("log")
        s_ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _: f"{y:g}x"))
        s_ax.yaxis.set_minor_formatter(FuncFormatter(lambda y, _: f"{y:g}x" if _leading(y) in (2, 5) else ""))
        s_ax.tick_params(axis="y", which="minor", labelsize=7)
        s_ax.grid(axis="y", which="major", alpha=0.3)
        s_ax.set_xticks(range(len(shapes)), ticks, fontsize=7.5)
        s_ax.set_xlim(-0.6, len(shapes) - 0.4)
        if col == 0:
            s_ax.set_ylabel(f"speed-up over {baseline or 'best baseline'}")
    if speed:
        # The speed-up row shares its y axis: one range over every panel's bars, with room for the labels.
        heights = [bar.get_height() for ax in axes[1] for c in ax.containers if isinstance(c, BarContainer)
                   for bar in c] + [1.0]
        axes[1][0].set_ylim(min(heights) / 1.6, max(heights) * 1.8)
    fig.suptitle(f"{kernel} ({source})", fontsize=11, fontweight="bold")
    ncol = min(4, max(len(handles), 1))
    fig.legend(list(handles.values()), list(handles), loc="lower center", ncol=ncol, fontsize=8, frameon=False)
    h = fig.get_size_inches()[1]
    legend_in = 0.2 * -(-len(handles) // ncol) + 0.15
    fig.subplots_adjust(left=0.6 / fig.get_size_inches()[0] + 0.04, right=0.98, top=1 - 1.0 / h, hspace=0.08,
                        wspace=0.08, bottom=(legend_in + 0.55) / h)
    out_dir.mkdir(parents=True, exist_ok=True)
    fig.savefig(info.path, dpi=dpi)
    info.figure = fig
    return info


def plot_files(paths: list[Path], out_dir: Path, *, kernels: list[str] | None = None, modes: set[str] | None = None,
               machine: str | None = None, baseline: str | None = None) -> list[Plot]:
    """One PNG per (results file, kernel) of ``paths``; returns what was drawn."""
    plots = []
    for path in paths:
        rows = [r for r in read_rows([path]) if (not kernels or r["kernel"] in kernels)
                and (modes is None or r.get("mode", "full") in modes) and (not machine or machine in r["machine"])]
        by_kernel: dict[str, list[dict[str, str]]] = defaultdict(list)
        for r in latest(rows):
            by_kernel[r["kernel"]].append(r)
        for kernel in sorted(by_kernel, key=lambda k: _case_key(k, "")):
            plots.append(plot_kernel(path.stem, kernel, by_kernel[kernel], out_dir, baseline=baseline))
    return plots


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("csv", nargs="*", type=Path, help="results files (default: every *.csv under --results)")
    parser.add_argument("--results", type=Path, default=RESULTS_DIR, help=f"results directory (default {RESULTS_DIR})")
    parser.add_argument("--out", type=Path, default=OUT_DIR, help=f"where the PNGs go (default {OUT_DIR})")
    parser.add_argument("--kernel", action="append", metavar="NAME", help="only this kernel (repeatable)")
    parser.add_argument("--mode", default=None, help="comma-separated modes to include (default: every mode)")
    parser.add_argument("--machine", metavar="TEXT", help="only rows whose machine name contains TEXT")
    parser.add_argument("--baseline", metavar="PROVIDER", help="speed-up over this baseline, not the best one")
    args = parser.parse_args(argv)
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print("plot_results: needs matplotlib: pip install 'rrag_kernels[plot]'", file=sys.stderr)
        return 2
    paths = args.csv or sorted(args.results.glob("*.csv"))
    missing = [p for p in paths if not p.is_file()]
    if missing or not paths:
        print(f"plot_results: no results file {missing[0] if missing else 'under ' + str(args.results)}",
              file=sys.stderr)
        return 1
    modes = set(args.mode.split(",")) if args.mode else None
    plots = plot_files(paths, args.out, kernels=args.kernel, modes=modes, machine=args.machine,
                       baseline=args.baseline)
    if not plots:
        print("plot_results: no rows matched", file=sys.stderr)
        return 1
    for p in plots:
        print(f"{p.path}  ({len(p.panels)} hardware panel(s), {len(p.providers)} providers)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
