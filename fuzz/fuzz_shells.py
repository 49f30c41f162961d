"""Coverage-guided fuzzing (atheris / libFuzzer) of the shells: the ``rrag`` batch commands'
JSONL lines and the HTTP server's request bodies.

    python fuzz/fuzz_shells.py [--target NAME|all] [--runs N] [--max-len L] [--seed S] [--timeout T]
                               [--keep-going N] [--minimize] [--no-save] [--ignore-known] [--list]
                               [CORPUS_DIR ...] [-- LIBFUZZER_ARGS ...]
    python fuzz/fuzz_shells.py --replay TARGET FILE [FILE ...]   # what a file decodes to, and its outcome

Each target (``--list``: ``cli_defend_line``, ``cli_filter_line``, ``server_body``) decodes the
fuzzer's bytes into a JSONL file or an HTTP request (``fuzz/shells.py``), runs it in process
(``rrag_kernels.__main__.main`` on temporary files; the server app through FastAPI's
TestClient) and checks the contract: no traceback, exit codes and statuses as documented,
count in = count out, ``/health`` answers after every request. A broken contract (or a hang:
``--timeout``) stops that target; its reproducer is written to
``fuzz/corpus_shells/<target>/crash-<sha1>`` (so ``tests/test_fuzz_shells_corpus.py``, which
replays the corpus, fails until it is fixed) and the run goes on to the next target. New
inputs that reach an edge the corpus does not are added to ``fuzz/corpus_shells/<target>/``
(libFuzzer ``-merge=1 -use_counters=0``), unless ``--no-save``; ``--minimize`` rewrites the
corpus as a greedy set cover instead. A run starts from the corpus's coverage files, not its
reproducers (the suite replays those; one of an unfixed bug would end every run at once).

``--ignore-known`` lets a finding that matches a reported, not yet fixed bug
(``shells.KNOWN``) pass, so that the search can go on past it; the summary counts them.

Coverage: atheris instruments the Python bytecode of the decoder and oracle and of
``rrag_kernels`` (the CLI, the server, the pipelines and the validation layer); FastAPI,
pydantic and the standard library are not instrumented.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus_shells")

sys.path.insert(0, HERE)

from fuzz_ops import driver_main, run_libfuzzer  # noqa: E402  (the one libFuzzer driver)

_KNOWN_LINE = re.compile(r"rrag-fuzz-known: (\d+) ")


def _worker(target: str, argv: list[str]) -> None:
    import atheris

    ignore_known = "--ignore-known" in argv
    argv = [a for a in argv if a != "--ignore-known"]
    # Instrument the decoder, the oracle and the package's pure-Python layers (coverage feedback).
    with atheris.instrument_imports(include=["rrag_kernels", "shells", "decode"],
                                    exclude=["rrag_kernels._config"]):
        import shells

        import rrag_kernels.cli.common  # noqa: F401
        import rrag_kernels.cli.main  # noqa: F401
        import rrag_kernels.models  # noqa: F401
        import rrag_kernels.models.nli  # noqa: F401
        import rrag_kernels.pipelines  # noqa: F401
        import rrag_kernels.pipelines.conformal  # noqa: F401
        import rrag_kernels.pipelines.mirage  # noqa: F401
        if target == "server_body":
            import rrag_kernels.serve  # noqa: F401
            import rrag_kernels.serve.app  # noqa: F401

    if target not in shells.TARGETS:
        raise SystemExit(f"unknown target {target!r}; one of {sorted(shells.TARGETS)}")
    env = shells.Env()
    if target == "server_body":
        env.client  # noqa: B018  (the app is made once, before the first input)
    seen = {"known": 0}

    def one_input(data: bytes) -> None:
        case = shells.decode(target, data)
        try:
            shells.check(case, env)
        except shells.Finding as exc:
            if not (ignore_known and shells.known(exc)):
                raise
            seen["known"] += 1
            n = seen["known"]
            if n in (1, 10, 100) or n % 1000 == 0:
                print(f"rrag-fuzz-known: {n} findings of known bugs so far ({str(exc).splitlines()[0][:100]})",
                      file=sys.stderr, flush=True)

    # libFuzzer re-runs argv[0] for -merge / -fork: make it this script under this Python.
    me = f"{shlex.quote(sys.executable)} {shlex.quote(os.path.abspath(__file__))} --worker {shlex.quote(target)}"
    if ignore_known:
        me += " --ignore-known"
    atheris.Setup([me] + argv, one_input)
    atheris.Fuzz()


def _replay(target: str, paths: list[str]) -> int:
    """Decode and run each file without atheris (faulthandler on: a crash prints the Python stack)."""
    import faulthandler

    import shells

    faulthandler.enable()
    env = shells.Env()
    failed = 0
    try:
        for path in paths:
            with open(path, "rb") as f:
                data = f.read()
            case = shells.decode(target, data)
            print(f"{path}: {case.describe()}", flush=True)
            try:
                print(f"  -> {shells.check(case, env)}", flush=True)
            except shells.Finding as exc:
                failed += 1
                print(f"  -> FINDING: {exc}", flush=True)
    finally:
        env.close()
    return 1 if failed else 0


def _targets() -> list[str]:
    import shells

    return sorted(shells.TARGETS)


def _run_target(target: str, args, extra_dirs: list[str], libfuzzer: list[str], log) -> dict:
    import shells

    # The workers' scratch files (shells.Env), removed at the end: a libFuzzer process exits
    # without Python's clean-up.
    scratch = tempfile.mkdtemp(prefix=f"rrag_fuzz_scratch_{target}_", dir=shells.scratch_base())
    me = [sys.executable, os.path.abspath(__file__), "--worker", target]
    if args.ignore_known:
        me.append("--ignore-known")
    try:
        # The run starts from the coverage files; the reproducers (crash-*, ...) are not fuzzed
        # from: the suite replays them, and one of a bug not yet fixed would end every run at once.
        row = run_libfuzzer(me, target, os.path.join(CORPUS, target), args, extra_dirs, libfuzzer, log,
                            env=dict(os.environ, **{shells.SCRATCH: scratch}), from_coverage_only=True,
                            counter=_KNOWN_LINE)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    row["known"] = row.pop("counted")
    return row


def _add_options(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--ignore-known", action="store_true",
                    help="let findings of reported, unfixed bugs (shells.KNOWN) pass and count them")


def main(argv: list[str] | None = None) -> int:
    return driver_main(argv, doc=__doc__, script="fuzz_shells.py", targets=_targets(), worker=_worker,
                       replay=_replay, run_target=_run_target, default_runs=2000, corpus_label="fuzz/corpus_shells",
                       add_options=_add_options)


if __name__ == "__main__":
    sys.exit(main())
