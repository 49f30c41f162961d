"""The pictures: a MIRAGE claim graph, the conformal trade-off straight from a calibrator and
the benchmark plots from the results CSVs. Each is rendered to PNG and what it drew is
checked against the numbers it was drawn from (node and edge artists against the result,
curve data against ``conformal_sweep``, bar heights against the CSV rows)."""

from __future__ import annotations

import csv
import importlib.util
import struct
import sys
from pathlib import Path

import numpy as np
import pytest
from conformal_data import claims
from test_mirage_corroboration import FALSE, _passages

from rrag_kernels.models.nli import LexicalNLI
from rrag_kernels.ops import conformal_sweep
from rrag_kernels.pipelines.conformal import FIELDS, ClaimConformal, plot_tradeoff
from rrag_kernels.pipelines.mirage import MirageDefense, MirageResult, plot_claim_graph

pytest.importorskip("matplotlib", reason="matplotlib is not installed (the plot extra)")

REPO = Path(__file__).resolve().parents[1]
PNG = b"\x89PNG\r\n\x1a\n"


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == PNG and data[12:16] == b"IHDR", f"{path} is not a PNG"
    return struct.unpack(">II", data[16:24])


def _patches(fig, prefix: str) -> list:
    return [p for ax in fig.axes for p in ax.patches if (p.get_gid() or "").startswith(prefix)]


def _texts(fig) -> str:
    return "\n".join(t.get_text() for ax in fig.axes for t in ax.texts)


# --------------------------------------------------------------------------- claim graph


@pytest.fixture(scope="module")
def canal():
    """Five clean sources and two polluted ones that contradict them, judged by the model-free
    LexicalNLI (corroboration mode): the false claims are dropped, the gate passes."""
    return MirageDefense(nli=LexicalNLI()).defend("When did the Panama Canal open?", _passages())


def test_result_edges_are_the_graph_the_decision_read(canal):
    assert canal.edges and all(k in (1, -1) for _, _, k in canal.edges)
    index = {c.index for c in canal.claims}
    assert all(a in index and b in index and a != b for a, b, _ in canal.edges)
    source = {c.index: c.source for c in canal.claims}
    assert all(source[a] != source[b] for a, b, _ in canal.edges)  # pairs are cross-source
    for c in canal.claims:  # support edges are never filtered: they are the claims' support counts
        assert sum(1 for a, b, k in canal.edges if k > 0 and c.index in (a, b)) == c.support
    paper = MirageDefense(nli=LexicalNLI(), mode="paper").defend("q", _passages())
    for c in paper.claims:  # mode="paper" keeps every contradiction edge
        assert sum(1 for a, b, k in paper.edges if k < 0 and c.index in (a, b)) == c.contradictions


def test_claim_graph_png_draws_every_claim_and_edge(canal, tmp_path):
    path = tmp_path / "graph.png"
    fig = plot_claim_graph(canal, path, dpi=80)
    w, h = fig.get_size_inches()
    assert _png_size(path) == (round(w * 80), round(h * 80))
    g = fig.claim_graph
    kept = [c for c in canal.claims if c.kept]
    n_support = sum(k > 0 for *_, k in canal.edges)
    n_contr = sum(k < 0 for *_, k in canal.edges)
    assert (g.kept, g.dropped, g.support, g.contradiction) == (len(kept), len(canal.claims) - len(kept),
                                                               n_support, n_contr)
    assert n_support > 0 and n_contr > 0 and g.hidden == 0
    # What is on the canvas, not only what the summary says.
    kept_nodes, dropped_nodes = _patches(fig, "claim-kept-"), _patches(fig, "claim-dropped-")
    assert sorted(int(p.get_gid().rsplit("-", 1)[1]) for p in kept_nodes) == [c.index for c in kept]
    assert len(dropped_nodes) == g.dropped
    assert len(_patches(fig, "edge-support-")) == n_support
    assert len(_patches(fig, "edge-contradiction-")) == n_contr
    assert {p.get_facecolor()[:3] for p in kept_nodes} != {p.get_facecolor()[:3] for p in dropped_nodes}
    # Each edge runs from the centre of one claim's node to the other's.
    centre = {int(p.get_gid().rsplit("-", 1)[1]): p.center for p in kept_nodes + dropped_nodes}
    for e in _patches(fig, "edge-"):
        a, b = map(int, e.get_gid().split("-")[-2:])
        verts = e.get_path().vertices
        np.testing.assert_allclose(verts[0], centre[a])
        np.testing.assert_allclose(verts[-1], centre[b])
    support_style = {p.get_linestyle() for p in _patches(fig, "edge-support-")}
    contr_style = {p.get_linestyle() for p in _patches(fig, "edge-contradiction-")}
    assert support_style == {"-"} and "-" not in contr_style
    # Every false claim is drawn dropped, with a contradiction edge at it.
    false = [c.index for c in canal.claims if c.text in FALSE]
    assert false and all(f"claim-dropped-{k}" in {p.get_gid() for p in dropped_nodes} for k in false)
    assert all(any(k in map(int, e.get_gid().split("-")[-2:]) for e in _patches(fig, "edge-contradiction-"))
               for k in false)
    # One labelled arc per passage; the gate decision and every claim's text in the picture.
    assert sorted(g.sources) == sorted({c.source for c in canal.claims})
    text = _texts(fig)
    assert "gate PASS" in text and "When did the Panama Canal open?" in text
    assert all(f"P{s}\n" in text for s in g.sources)
    assert "dropped: contradicted" in text


def test_claim_graph_caps_blocks_and_errors(canal, tmp_path):
    fig = plot_claim_graph(canal, max_claims=5)
    g = fig.claim_graph
    assert len(g.shown) == 5 and g.hidden == len(canal.claims) - 5
    assert len(_patches(fig, "claim-")) == 5 and "showing 5 of" in _texts(fig)
    shown = set(g.shown)
    assert g.support + g.contradiction == sum(1 for a, b, _ in canal.edges if a in shown and b in shown)

    blocked = MirageDefense(nli=LexicalNLI(), d_min=50).defend("q", _passages())
    assert not blocked.gate_passed
    assert "gate BLOCK" in _texts(plot_claim_graph(blocked))

    failed = MirageResult(question="q", gate_passed=False, claims=[], stats={"gate_reason": "error"}, prompt="",
                          error="RuntimeError: judge failed")
    fig = plot_claim_graph(failed, tmp_path / "empty.png")
    assert fig.claim_graph.kept == 0 and "judge failed" in _texts(fig)

    from matplotlib.figure import Figure

    host = Figure(figsize=(12, 7))
    ax = host.add_axes((0.05, 0.1, 0.4, 0.75))
    assert plot_claim_graph(canal, ax=ax, claim_list=False) is host
    assert len(_patches(host, "claim-")) == len(canal.claims)
    with pytest.raises(ValueError, match="^max_claims:"):
        plot_claim_graph(canal, max_claims=0)
    with pytest.raises(TypeError, match="^result:"):
        plot_claim_graph({"claims": []})


def test_defend_cli_draws_the_graph(tmp_path):
    import json

    from rrag_kernels.__main__ import main

    src = tmp_path / "in.jsonl"
    src.write_text("\n".join(json.dumps({"question": q, "passages": _passages()}) for q in ("q1", "q2")) + "\n")
    assert main(["defend", str(src), str(tmp_path / "out.jsonl"), "--nli", "lexical", "--quiet",
                 "--graph", str(tmp_path / "first.png")]) == 0
    assert _png_size(tmp_path / "first.png")[0] > 500
    assert main(["defend", str(src), str(tmp_path / "out.jsonl"), "--nli", "lexical", "--quiet",
                 "--graph", str(tmp_path / "g{line}.png")]) == 0
    assert sorted(p.name for p in tmp_path.glob("g*.png")) == ["g1.png", "g2.png"]


# --------------------------------------------------------------------------- conformal trade-off


def _curves(fig) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    return {line.get_label(): (np.asarray(line.get_xdata()), np.asarray(line.get_ydata()))
            for line in fig.axes[0].lines}


def test_tradeoff_straight_from_a_calibrator(rng, tmp_path):
    s, ok, off = claims(rng, 300)
    cc = ClaimConformal(alpha=0.15).calibrate(s, ok, off)
    path = tmp_path / "tradeoff.png"
    fig = cc.plot_tradeoff(path, n_splits=25, seed=7)
    assert _png_size(path)[0] > 300
    alphas = sorted({0.05, 0.1, 0.2, 0.3, 0.4, 0.15})
    want = conformal_sweep(s, ok, off, alphas=alphas, n_splits=25, seed=7).summary()
    curves = _curves(fig)
    order = np.argsort(1 - np.asarray(alphas))
    for metric, label in (("fully_supported", "fully supported (empirical factuality)"),
                          ("retention", "claims retained"), ("non_empty", "non-empty responses")):
        x, y = curves[label]
        np.testing.assert_array_equal(x, (1 - np.asarray(alphas))[order])
        np.testing.assert_array_equal(y, want[metric]["mean"][order])
    marker = [label for label in curves if label.startswith("this calibrator")]
    assert marker == [f"this calibrator: alpha 0.15, q_hat {cc.q_hat:.4g}"]
    np.testing.assert_allclose(curves[marker[0]][0], [0.85, 0.85])
    # The function form and the method agree; the saved file is unchanged (no data in it).
    again = _curves(plot_tradeoff(cc, n_splits=25, seed=7))
    assert all(np.array_equal(again[k][1], curves[k][1]) for k in curves)
    assert tuple(cc.to_dict()) == FIELDS


def test_a_loaded_calibrator_sweeps_its_own_data_only(rng, tmp_path):
    s, ok, off = claims(rng, 200)
    cc = ClaimConformal(alpha=0.1, a=0.8).calibrate(s, ok, off)
    cc.save(tmp_path / "cal.json")
    loaded = ClaimConformal.load(tmp_path / "cal.json")
    with pytest.raises(RuntimeError, match="^data:"):
        loaded.sweep()
    a = cc.sweep(n_splits=10, seed=1)
    b = loaded.sweep(n_splits=10, seed=1, data=(s, ok, off))
    np.testing.assert_array_equal(a.fully_supported, b.fully_supported)
    assert a.meta["a"] == 0.8 and a.meta["alpha"] == 0.1
    with pytest.raises(ValueError, match="^data: not the data"):
        loaded.sweep(data=(s, ~ok, off))
    s[0] += 1.0  # calibrate() kept a copy: changing the caller's array changes nothing
    np.testing.assert_array_equal(cc.sweep(n_splits=10, seed=1).fully_supported, a.fully_supported)
    groups = ["x" if k % 2 else "y" for k in range(200)]
    g = ClaimConformal(alpha=0.2).calibrate(s, ok, off, groups)
    fig = g.plot_tradeoff(n_splits=10)
    assert any(label.startswith("this calibrator: alpha 0.2") for label in _curves(fig))
    with pytest.raises(ValueError, match="^data: groups"):
        g.sweep(data=(s, ok, off))
    with pytest.raises(RuntimeError):
        ClaimConformal().sweep()


def test_conformal_plot_cli_takes_a_saved_calibration(tmp_path, capsys):
    from rrag_kernels.__main__ import main

    cal, png = tmp_path / "cal.json", tmp_path / "t.png"
    assert main(["conformal", "calibrate", "--alpha", "0.15", "-o", str(cal), "--quiet"]) == 0
    assert main(["conformal", "plot", "--calibration", str(cal), "--splits", "10", "-o", str(png)]) == 0
    assert _png_size(png)[0] > 300 and "wrote" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exc:
        main(["conformal", "plot", "--calibration", str(cal), "--supported", "Y", "N", "-o", str(png)])
    assert exc.value.code == 2
    assert "--calibration: data: not the data" in capsys.readouterr().err


# --------------------------------------------------------------------------- benchmark plots


def _plot_results():
    spec = importlib.util.spec_from_file_location("plot_results", REPO / "benchmarks" / "plot_results.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


def _row(machine, kernel, provider, kind, shape, median, stamp="2026-01-01T00:00:00"):
    from harness import CSV_COLUMNS

    row = dict.fromkeys(CSV_COLUMNS, "")
    row.update(timestamp=stamp, machine=machine, cores="2", threads="2", package_version="0.1.0", mode="full",
               kernel=kernel, provider=provider, kind=kind, shape=shape, median_ms=str(median),
               p20_ms=str(median * 0.9), p80_ms=str(median * 1.2), samples="10")
    return row


@pytest.fixture
def results_csv(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    from harness import CSV_COLUMNS

    rows = []
    for machine, scale in (("Box A", 1.0), ("Box B", 2.0)):
        for n, shape in enumerate(("n=10", "n=100", "n=1000")):
            t = scale * 10.0 ** n
            rows += [_row(machine, "toy", "numpy", "baseline", shape, 4 * t),
                     _row(machine, "toy", "python-loop", "baseline", shape, 40 * t),
                     _row(machine, "toy", "rrag-cpp", "rrag", shape, t)]
    rows.append(_row("Box A", "toy", "rrag-cpp", "rrag", "n=10", 99.0, stamp="2025-01-01T00:00:00"))  # older: ignored
    rows.append(_row("Box A", "solo", "rrag-cpp", "rrag", "n=5", 3.0))  # no baseline: no speed-up row
    path = tmp_path / "results" / "toy.csv"
    path.parent.mkdir()
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=CSV_COLUMNS)
        w.writeheader()
        w.writerows(rows)
    return path


def test_benchmark_plots_from_a_results_csv(results_csv, tmp_path):
    from matplotlib.container import BarContainer

    pr = _plot_results()
    plots = {p.kernel: p for p in pr.plot_files([results_csv], tmp_path / "out")}
    assert set(plots) == {"toy", "solo"}
    toy = plots["toy"]
    assert toy.path == tmp_path / "out" / "toy-toy.png" and _png_size(toy.path)[0] > 500
    assert toy.panels == ["Box A / 2 / full", "Box B / 2 / full"]
    assert toy.time_series == [3, 3] and toy.speedup_series == [1, 1]
    assert toy.providers == ["numpy", "python-loop", "rrag-cpp"]  # baselines first
    time_ax, speed_ax = toy.figure.axes[0], toy.figure.axes[2]  # Box A: time, speed-up
    bars = [c for c in time_ax.containers if isinstance(c, BarContainer)]
    assert len(bars) == 3
    heights = {c.get_label(): [b.get_height() for b in c] for c in bars}
    assert heights["rrag-cpp"] == [1.0, 10.0, 100.0]  # the latest rows, by increasing size
    assert heights["numpy (baseline)"] == [4.0, 40.0, 400.0]
    np.testing.assert_allclose([b.get_height() for c in speed_ax.containers for b in c], [4.0, 4.0, 4.0])
    solo = plots["solo"]
    assert solo.time_series == [1] and solo.speedup_series == [] and len(solo.figure.axes) == 1
    # The command line: --results, --out, --kernel.
    assert pr.main(["--results", str(results_csv.parent), "--out", str(tmp_path / "cli"), "--kernel", "toy"]) == 0
    assert [p.name for p in (tmp_path / "cli").iterdir()] == ["toy-toy.png"]
    assert pr.main(["--results", str(results_csv.parent), "--out", str(tmp_path / "cli"), "--kernel", "nope"]) == 1


def test_benchmark_plots_of_the_repo_results(tmp_path):
    path = REPO / "benchmarks" / "results" / "cosine.csv"
    if not path.exists():
        pytest.skip("no benchmarks/results/cosine.csv in this checkout")
    pr = _plot_results()
    with open(path, newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if r["kernel"] == "cosine_matrix"]
    (plot,) = pr.plot_files([path], tmp_path, kernels=["cosine_matrix"])
    assert _png_size(plot.path)[0] > 500
    assert set(plot.providers) == {r["provider"] for r in rows}
    assert len(plot.panels) == len({(r["machine"], r["threads"], r["mode"]) for r in rows})
    assert all(n == len({r["provider"] for r in rows if r["machine"] in panel})
               for n, panel in zip(plot.time_series, plot.panels))
