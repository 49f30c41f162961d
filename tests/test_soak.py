"""The soak command (benchmarks/soak.py) in its quick form: every workload from 2 threads, no
error, peak RSS growth within the bound. The documented long run is
``python benchmarks/soak.py`` (4 threads x 2,000 iterations)."""

import subprocess
import sys
from pathlib import Path

SOAK = Path(__file__).resolve().parents[1] / "benchmarks" / "soak.py"


def test_quick_soak_runs_clean():
    out = subprocess.run([sys.executable, str(SOAK), "--iterations", "15", "--threads", "2"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "30 iterations (2 threads x 15)" in out.stdout and "0 errors" in out.stdout


def test_soak_argument_error_is_an_argparse_message():
    out = subprocess.run([sys.executable, str(SOAK), "--threads", "0"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "must be >= 1" in out.stderr and "Traceback" not in out.stderr
