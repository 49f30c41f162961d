"""benchmarks/soak_resume.py, one short iteration: ``rrag defend`` killed (SIGKILL, then SIGTERM)
and resumed with ``--resume`` ends with one record per input line, equal to an uninterrupted
run's, and a killed rerun leaves the complete output as it was (the soak's own checks; its
exit status says whether they held). Model-free (``--param units=domain``): a run starts in
~0.5 s; the whole test takes a few seconds."""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

import soak_resume  # noqa: E402


def test_a_killed_and_resumed_defend_run_ends_with_every_record(capsys):
    rc = soak_resume.main(["--iterations", "1", "--lines", "30", "--seed", "3", "--model-free", "--no-csv"])
    out, err = capsys.readouterr()
    assert rc == 0, f"{out}\n{err}"
    assert "iteration 1:" in out and ": ok" in out, out
