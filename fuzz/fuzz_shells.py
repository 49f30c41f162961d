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
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus_shells")

sys.path.insert(0, HERE)

from fuzz_ops import run_libfuzzer  # noqa: E402  (the one libFuzzer driver)

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


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--worker"]:
        _worker(argv[1], argv[2:])
        return 0
    if argv[:1] == ["--replay"]:
        if len(argv) < 3:
            raise SystemExit("usage: fuzz_shells.py --replay TARGET FILE [FILE ...]")
        return _replay(argv[1], argv[2:])
    libfuzzer: list[str] = []
    if "--" in argv:
        k = argv.index("--")
        argv, libfuzzer = argv[:k], argv[k + 1:]
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", default="all", help="one target (see --list) or 'all' (default)")
    ap.add_argument("--runs", type=int, default=2000, help="executions per target (default 2000)")
    ap.add_argument("--max-len", type=int, default=2048, help="largest input in bytes (default 2048)")
    ap.add_argument("--seed", type=int, default=None, help="libFuzzer seed (default: random)")
    ap.add_argument("--timeout", type=int, default=30, help="seconds one input may take (a hang, default 30)")
    ap.add_argument("--keep-going", type=int, default=0, metavar="N",
                    help="after a finding, restart the target up to N times with the runs left (default 0)")
    ap.add_argument("--minimize", action="store_true",
                    help="rewrite each target's corpus as a minimal set cover (default: only add new coverage)")
    ap.add_argument("--no-save", dest="save", action="store_false",
                    help="leave fuzz/corpus_shells alone (reproducers stay in a temporary folder)")
    ap.add_argument("--ignore-known", action="store_true",
                    help="let findings of reported, unfixed bugs (shells.KNOWN) pass and count them")
    ap.add_argument("--log", default=None, help="libFuzzer output goes here (default: a temporary file)")
    ap.add_argument("--list", action="store_true", help="print the targets and exit")
    ap.add_argument("corpus", nargs="*", help="extra corpus folders to read (never written)")
    args = ap.parse_args(argv)
    targets = _targets()
    if args.list:
        print("\n".join(targets))
        return 0
    chosen = targets if args.target == "all" else [args.target]
    for t in chosen:
        if t not in targets:
            ap.error(f"--target: unknown target {t!r}; one of {', '.join(targets)}")
    try:
        import atheris  # noqa: F401  (the workers need it; say so once, here)
    except ImportError:
        ap.error("atheris is not installed: pip install 'rrag_kernels[fuzz]' (or atheris>=2.3)")
    log_path = args.log or tempfile.mkstemp(prefix="rrag_fuzz_shells_", suffix=".log")[1]
    rows = []
    total_start = time.monotonic()
    with open(log_path, "w") as log:
        for t in chosen:
            row = _run_target(t, args, args.corpus, libfuzzer, log)
            rows.append(row)
            status = "ok" if not row["crashes"] and row["returncode"] == 0 else "FINDING"
            corpus = "" if row["corpus"] is None else f"corpus {row['corpus'][0]} -> {row['corpus'][1]} files  "
            rate = row["executions"] / row["seconds"] if row["seconds"] else 0.0
            known = f"  {row['known']} known-bug findings let pass" if row["known"] else ""
            print(f"{t:18s} {row['executions']:9d} execs {row['seconds']:8.1f} s {rate:7.1f}/s  "
                  f"{corpus}{status}{known}", flush=True)
            if status != "ok":
                for kind, path in row["crashes"]:
                    print(f"    {kind}: {os.path.relpath(path)}")
                for text in row["findings"]:
                    print("    " + text.replace("\n", "\n    "))
    total = sum(r["executions"] for r in rows)
    n_find = sum(1 for r in rows if r["crashes"] or r["returncode"] != 0)
    print(f"{'total':18s} {total:9d} execs {time.monotonic() - total_start:8.1f} s  {n_find} target(s) with "
          f"findings; libFuzzer log: {log_path}")
    return 1 if n_find else 0


if __name__ == "__main__":
    sys.exit(main())
