"""Run the property tests with the thorough hypothesis profile and print examples per op.

    python tests/run_properties.py                  # >= 100,000 examples in total (the default)
    python tests/run_properties.py --total 10000    # a quicker pass
    python tests/run_properties.py -- -k select_pairs   # extra pytest arguments after --

It collects tests/test_properties.py, gives every test the same number of examples
(``ceil(total / tests)``, through ``RRAG_HYPOTHESIS_MAX_EXAMPLES``), runs pytest with
``RRAG_HYPOTHESIS_PROFILE=thorough --hypothesis-show-statistics`` and adds up hypothesis'
per-test statistics by op: a test named ``test_<op>__...`` or parametrized with the op
first (``test_...[<op>-<arg>]``) counts for that op. Examples are hypothesis' passing test
cases (invalid draws, rejected by ``assume``, are counted apart). The exit status is
pytest's. A test whose search space runs out stops early, so the total can fall short of
``--total``; the table says so.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
TEST_FILE = HERE / "test_properties.py"
# "3 passing, 0 failing, and 0 invalid test cases" (hypothesis >= 6.1xx) or "... examples".
PHASE = re.compile(r"(\d+) passing(?: examples?)?, (\d+) failing(?: examples?)?,(?: and)? (\d+) invalid")
HEADER = re.compile(r"^(\S*test_properties\.py::\S+):\s*$")


def op_of(nodeid: str) -> str:
    name = nodeid.split("::", 1)[1]
    if "[" in name:
        return name[name.index("[") + 1:].split("-", 1)[0].rstrip("]")
    base = name[len("test_"):] if name.startswith("test_") else name
    return base.split("__", 1)[0] if "__" in base else base


def collect(pytest_args: list[str]) -> list[str]:
    out = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--collect-only", "-q",
                          str(TEST_FILE), *pytest_args], capture_output=True, text=True, cwd=HERE.parent)
    ids = [line.strip() for line in out.stdout.splitlines() if "::" in line]
    if not ids:
        sys.exit(f"no tests collected:\n{out.stdout}\n{out.stderr}")
    return ids


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--total", type=int, default=100_000, help="examples over the whole file (default 100000)")
    parser.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    args = parser.parse_args()
    ids = collect(args.pytest_args)
    per_test = max(1, math.ceil(args.total / len(ids)))
    env = {**os.environ, "RRAG_HYPOTHESIS_PROFILE": "thorough", "RRAG_HYPOTHESIS_MAX_EXAMPLES": str(per_test)}
    print(f"{len(ids)} tests x {per_test} examples (target {args.total}), profile 'thorough'", flush=True)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--hypothesis-show-statistics",
                           str(TEST_FILE), *args.pytest_args], env=env, capture_output=True, text=True, cwd=HERE.parent)
    examples: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])  # tests, passing, failing, invalid
    current = None
    seen = set()
    for line in proc.stdout.splitlines():
        m = HEADER.match(line.strip())
        if m:
            current = op_of(m.group(1))
            if m.group(1) not in seen:
                seen.add(m.group(1))
                examples[current][0] += 1
            continue
        m = PHASE.search(line)
        if m and current is not None:
            for k in range(3):
                examples[current][k + 1] += int(m.group(k + 1))
    tail = [line for line in proc.stdout.splitlines() if re.search(r"\d+ (passed|failed|error)", line)]
    print(f"\n{'op':32} {'tests':>6} {'examples':>10} {'failing':>8} {'invalid':>8}")
    total = [0, 0, 0, 0]
    for op in sorted(examples):
        row = examples[op]
        total = [a + b for a, b in zip(total, row)]
        print(f"{op:32} {row[0]:>6} {row[1]:>10} {row[2]:>8} {row[3]:>8}")
    print(f"{'total':32} {total[0]:>6} {total[1]:>10} {total[2]:>8} {total[3]:>8}")
    if total[1] < args.total:
        print(f"note: {total[1]} < {args.total}: some tests ran out of distinct inputs or failed early")
    print(tail[-1] if tail else "(no pytest summary line)")
    if proc.returncode != 0:
        failures = [line for line in proc.stdout.splitlines() if line.startswith(("FAILED", "ERROR"))]
        print("\n".join(failures) or proc.stdout[-5000:])
        print(proc.stderr[-2000:], file=sys.stderr)
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
