"""The shells' fuzzing corpus as regression tests: every file in ``fuzz/corpus_shells/<target>/``
is decoded (``fuzz/shells.py``) and checked by the fuzzer's own oracle: the ``rrag defend`` /
``rrag conformal filter`` batch commands, run in process on the decoded JSONL file, raise
nothing, exit 0, 1 (every item failed) or 2 (not UTF-8 / not JSONL, a previous OUT left as it
was), and write one JSON record per non-blank input line with its ``line`` number, in order;
the HTTP server answers the decoded request with a documented status (never 500), a JSON body,
one result per item on 200, and ``GET /health`` answers 200 afterwards.

Files named ``crash-*`` / ``timeout-*`` reproduced a bug when the fuzzer found it (see
fuzz/README.md, "The shells"); they run in a child process, so a regression fails that one test
and cannot hang or break the suite. The rest are the inputs that gave the fuzzer new coverage.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FUZZ = os.path.join(ROOT, "fuzz")
CORPUS = os.path.join(FUZZ, "corpus_shells")
sys.path.insert(0, FUZZ)

import shells  # noqa: E402  (fuzz/, importable without atheris)
from fuzz_ops import REPRODUCERS, corpus_files  # noqa: E402  (the driver's corpus layout)


FILES = corpus_files(CORPUS)


@pytest.fixture(scope="module")
def env():
    """A scratch folder, a calibration made by ``rrag conformal calibrate`` and (on first use) the
    server app, shared by the module's tests."""
    e = shells.Env()
    yield e
    e.close()


def _needs(target: str) -> None:
    if target == "server_body":
        pytest.importorskip("fastapi", reason="the server extra is not installed (pip install 'rrag_kernels[serve]')")
        pytest.importorskip("httpx", reason="fastapi.testclient needs httpx")


def test_the_corpus_covers_every_target_and_stays_small():
    targets = {t for t, _ in FILES}
    assert targets == set(shells.TARGETS), f"targets without a corpus: {sorted(set(shells.TARGETS) - targets)}, " \
                                           f"folders without a target: {sorted(targets - set(shells.TARGETS))}"
    total = sum(os.path.getsize(p) for _, p in FILES)
    assert total < 200 * 1024, f"fuzz/corpus_shells holds {total} bytes; keep it under 200 KiB"


@pytest.mark.parametrize("target,path", FILES, ids=[f"{t}/{os.path.basename(p)}" for t, p in FILES])
def test_corpus_file(env, target, path):
    _needs(target)
    if os.path.basename(path).startswith(REPRODUCERS):
        # A bug's reproducer: in a child process (a crash or a hang there fails this test only).
        result = subprocess.run([sys.executable, os.path.join(FUZZ, "fuzz_shells.py"), "--replay", target, path],
                                capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
        return
    with open(path, "rb") as f:
        data = f.read()
    shells.check(shells.decode(target, data), env)  # raises shells.Finding, with the case, on a broken contract


@pytest.mark.parametrize("target", sorted(shells.TARGETS))
def test_the_empty_input_is_an_ordinary_valid_call(env, target):
    # Every byte past the end reads 0, the ordinary choice: the fuzzer starts from a call that
    # succeeds (one valid item, exit 0 / status 200) and walks away from it.
    _needs(target)
    outcome = shells.check(shells.decode(target, b""), env)
    assert outcome in ("exit 0, 1 records", "200"), outcome


def test_the_oracle_counts_lines_as_the_cli_does():
    # \n, \r\n and \r end a line; a line str.strip() empties is blank (not an item) but counts.
    usage, items = shells.expected_lines(b'{"a": 1}\r\n\r\n  \n{"b": 2}\r[1]\n\x0c\n{"c": 3}', False)
    assert usage is None
    assert [n for n, _ in items] == [1, 4, 5, 7]
    assert shells.expected_lines(b"\xff{}\n", False)[0] == "not UTF-8"
    assert shells.expected_lines(b"[1]\n2\n", False)[0] == "no line is a JSON object"
    # The reading rule: a key twice, nesting past MAX_JSON_DEPTH, an integer too long: no object.
    for line in (b'{"a": 1, "a": 2}', b'{"a": ' + b"[" * 80 + b"]" * 80 + b"}", b'{"a": ' + b"9" * 5000 + b"}"):
        assert shells.expected_lines(line + b"\n", False)[0] == "no line is a JSON object"
    _, items = shells.expected_lines(b'{"data": [{}, {},\n 3]}\n', True)
    assert [n for n, _ in items] == [1, 2, 3]
    _, items = shells.expected_lines(b'{"data": [{"a": 1, "a": 2}]}\n', True)  # not a document: a line
    assert [(n, r) for n, r in items] == [(1, None)]
