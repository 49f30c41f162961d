"""The fuzzing corpus as regression tests: every file in ``fuzz/corpus/<target>/`` is decoded
(``fuzz/decode.py``) and checked by the fuzzer's own oracle (``fuzz/oracle.py``): ``_core``
and the public op return or raise ValueError / TypeError naming the argument, the result does
not change with the thread count or the testing hooks, and on small tame inputs the reference
backend agrees (bitwise for the discrete kernels).

Files named ``crash-*`` / ``timeout-*`` / ``oom-*`` reproduced a bug when the fuzzer found it
(see fuzz/README.md); they run in a child process, so a regression fails that one test
instead of killing the suite. The rest are the inputs that gave the fuzzer new coverage.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FUZZ = os.path.join(ROOT, "fuzz")
CORPUS = os.path.join(FUZZ, "corpus")
sys.path.insert(0, FUZZ)

import decode  # noqa: E402  (fuzz/, importable without atheris)
from fuzz_ops import REPRODUCERS, corpus_files  # noqa: E402  (the driver's corpus layout)
import oracle  # noqa: E402


FILES = corpus_files(CORPUS)


@pytest.fixture
def fuzz_core(core):
    """``_core`` with the fuzzer's 64 MiB memory budget (restored afterwards)."""
    budget = core.memory_budget()
    core.set_memory_budget(64 << 20)
    yield core
    core.set_memory_budget(budget)


def test_the_corpus_covers_every_target_and_stays_small():
    targets = {t for t, _ in FILES}
    assert targets == set(decode.TARGETS), f"targets without a corpus: {sorted(set(decode.TARGETS) - targets)}, " \
                                           f"folders without a target: {sorted(targets - set(decode.TARGETS))}"
    total = sum(os.path.getsize(p) for _, p in FILES)
    assert total < 1 << 20, f"fuzz/corpus holds {total} bytes; keep it under 1 MiB"


@pytest.mark.parametrize("target,path", FILES, ids=[f"{t}/{os.path.basename(p)}" for t, p in FILES])
def test_corpus_file(fuzz_core, target, path):
    import rrag_kernels.ops as ops

    if os.path.basename(path).startswith(REPRODUCERS):
        # A bug's reproducer: in a child process (a crash there fails this test only).
        result = subprocess.run([sys.executable, os.path.join(FUZZ, "fuzz_ops.py"), "--replay", target, path],
                                capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
        return
    with open(path, "rb") as f:
        data = f.read()
    case = decode.decode(target, data)
    oracle.check(case, fuzz_core, ops)  # raises oracle.Finding, with the case, on a broken contract


@pytest.mark.parametrize("target", sorted(decode.TARGETS))
def test_the_empty_input_is_an_ordinary_valid_call(fuzz_core, target):
    # Every byte past the end reads 0, the ordinary choice: the fuzzer starts from a call
    # that succeeds and walks away from it.
    import rrag_kernels.ops as ops

    outcome = oracle.check(decode.decode(target, b""), fuzz_core, ops)
    assert outcome.core == "ok" and outcome.op in ("ok", ""), outcome
