"""benchmarks/make_table.py over the committed results: every timing file renders (end-to-end
rows without a roofline floor or a throughput show "-"), and a CSV of another layout (the tile
sweep, the NLI recipe sweep) is a usage error naming the file, not a traceback."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TOOL = REPO / "benchmarks" / "make_table.py"
RESULTS = REPO / "benchmarks" / "results"


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(TOOL), *args], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("extra", [[], ["--all"]], ids=["compact", "all"])
def test_default_tables_render_rows_without_a_floor(extra):
    mirage = RESULTS / "mirage.csv"
    with mirage.open(encoding="utf-8") as fh:
        no_floor = [r for r in csv.DictReader(fh) if r["kind"] == "rrag" and not r["floor_fraction"]]
    assert no_floor, "mirage.csv holds end-to-end defend rows without a roofline floor"
    proc = _run(*extra)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(f"| {no_floor[0]['kernel']} |")]
    assert lines and all(ln.rstrip().endswith("| - |") for ln in lines if "rrag-" in ln)


@pytest.mark.parametrize("name", ["gpu_tune.csv", "nli_sweep.csv"])
def test_a_file_of_another_layout_is_a_usage_error(name):
    proc = _run(str(RESULTS / name))
    assert proc.returncode == 2
    assert f"{name}: not a benchmark timing file" in proc.stderr and "Traceback" not in proc.stderr
