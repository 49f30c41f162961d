"""Coverage-guided fuzzing (atheris / libFuzzer) of every compiled entry point and public op.

    python fuzz/fuzz_ops.py [--target NAME|all] [--runs N] [--max-len L] [--seed S] [--timeout T]
                            [--keep-going N] [--minimize] [--no-save] [--list] [CORPUS_DIR ...]
                            [-- LIBFUZZER_ARGS ...]
    python fuzz/fuzz_ops.py --replay TARGET FILE [FILE ...]    # what a file decodes to, and its outcome

Each target (``--list``) decodes the fuzzer's bytes into the arguments of one entry point
(``fuzz/decode.py``), calls ``_core.<entry point>`` directly and the public op in
``rrag_kernels.ops``, and checks the contract (``fuzz/oracle.py``): only ValueError /
TypeError naming the argument, the same bits at any thread count, agreement with the float64
reference. A crash, abort, hang (``--timeout``) or broken contract stops that target; its
reproducer is written to ``fuzz/corpus/<target>/crash-<sha1>`` (so the suite, which replays
the corpus in ``tests/test_fuzz_corpus.py``, fails until it is fixed) and the run goes on to
the next target. New inputs that reach an edge the corpus does not are added to
``fuzz/corpus/<target>/`` (libFuzzer ``-merge=1 -use_counters=0``; existing files stay, so a
run adds a few files at most), unless ``--no-save``; ``--minimize`` rewrites the corpus as a
greedy set cover instead.

Coverage: atheris instruments Python bytecode (the decoder, the oracle and the validation layer
in ``rrag_kernels.ops``); libFuzzer's native coverage of the C++ code would need the extension
built with clang's ``-fsanitize=fuzzer-no-link``, and this project builds with gcc, so the
native code is exercised (directly and through the ops) but does not steer the search. Run
the fuzzer on the ASan + UBSan build to catch memory errors that do not crash:
``tools/sanitize.sh asan --run python fuzz/fuzz_ops.py --runs 2000``.

Each target runs in its own process (``--worker``); the memory budget is set to 64 MiB there
so that size arguments that slip through fail the budget check instead of allocating.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus")
BUDGET = 64 << 20
REPRODUCERS = ("crash-", "timeout-", "oom-", "leak-", "slow-unit-")

sys.path.insert(0, HERE)


def corpus_files(corpus: str) -> list[tuple[str, str]]:
    """(target, path) of every file of a corpus folder (one subfolder per target), sorted: what
    the suite replays (tests/test_fuzz_corpus.py, tests/test_fuzz_shells_corpus.py)."""
    out = []
    if os.path.isdir(corpus):
        for target in sorted(os.listdir(corpus)):
            folder = os.path.join(corpus, target)
            if os.path.isdir(folder):
                out += [(target, os.path.join(folder, n)) for n in sorted(os.listdir(folder)) if not n.startswith(".")]
    return out


def _worker(target: str, argv: list[str]) -> None:
    import atheris

    # Instrument the pure-Python layers (coverage feedback); the compiled _core is native.
    with atheris.instrument_imports(include=["rrag_kernels", "decode", "oracle"],
                                    exclude=["rrag_kernels._config"]):
        import decode
        import oracle

        import rrag_kernels.ops as ops
        import rrag_kernels.reference  # noqa: F401  (instrumented too)
    from rrag_kernels import _core

    if target not in decode.TARGETS:
        raise SystemExit(f"unknown target {target!r}; one of {sorted(decode.TARGETS)}")
    _core.set_memory_budget(BUDGET)

    def one_input(data: bytes) -> None:
        oracle.check(decode.decode(target, data), _core, ops)

    # libFuzzer re-runs argv[0] for -merge / -fork: make it this script under this Python.
    me = f"{shlex.quote(sys.executable)} {shlex.quote(os.path.abspath(__file__))} --worker {shlex.quote(target)}"
    atheris.Setup([me] + argv, one_input)
    atheris.Fuzz()


def _replay(target: str, paths: list[str]) -> int:
    """Decode and run each file without atheris (faulthandler on: a crash prints the Python stack)."""
    import faulthandler
    import warnings

    import decode
    import oracle

    import rrag_kernels.ops as ops
    from rrag_kernels import _core

    faulthandler.enable()
    _core.set_memory_budget(BUDGET)
    failed = 0
    for path in paths:
        with open(path, "rb") as f:
            data = f.read()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            case = decode.decode(target, data)
        print(f"{path}: {case.describe()}", flush=True)
        try:
            print(f"  -> {oracle.check(case, _core, ops)}", flush=True)
        except oracle.Finding as exc:
            failed += 1
            print(f"  -> FINDING: {exc}", flush=True)
    return 1 if failed else 0


def _targets() -> list[str]:
    import decode

    return sorted(decode.TARGETS)


_STAT = re.compile(r"stat::number_of_executed_units:\s*(\d+)")
_DONE = re.compile(r"Done (\d+) runs in (\d+) second")
_ARTIFACT = re.compile(r"(?:Test unit written to|artifact_prefix.*?; Test unit written to) (\S+)")


def _finding_text(out: str) -> str:
    """What went wrong, in a few lines: the sanitizer's report line and the first frames in
    csrc/, the oracle's Finding, or the output's tail."""
    lines = out.splitlines()
    for k, ln in enumerate(lines):
        if re.search(r"runtime error:|ERROR: AddressSanitizer|WARNING: ThreadSanitizer|ERROR: LeakSanitizer", ln):
            ours = [f for f in lines[k + 1:k + 80] if "/csrc/" in f][:4]
            return "\n".join([ln] + ours)
    m = re.search(r"(=== Uncaught Python exception: ===.*?)(?:\n\S*MS:|\nINFO: |\Z)", out, re.S)
    if m:
        return m.group(1).strip()
    return "\n".join([ln for ln in lines if ln.strip()][-25:])


def _run_target(target: str, args, extra_dirs: list[str], libfuzzer: list[str], log) -> dict:
    me = [sys.executable, os.path.abspath(__file__), "--worker", target]
    return run_libfuzzer(me, target, os.path.join(CORPUS, target), args, extra_dirs, libfuzzer, log)


def run_libfuzzer(me: list[str], target: str, corpus: str, args, extra_dirs: list[str], libfuzzer: list[str], log,
                  *, env: dict | None = None, from_coverage_only: bool = False,
                  counter: "re.Pattern[str] | None" = None) -> dict:
    """Run one target's worker (``me``) under libFuzzer for ``args.runs`` executions, keep its
    reproducers in ``corpus`` and merge its new coverage there (unless ``args.save`` is off).

    ``from_coverage_only``: start from a copy of the corpus without its reproducers (fuzz_shells:
    one of a bug not yet fixed would end every run at its start). ``counter``: a pattern whose
    first group counts something in the worker's output (summed over restarts, as ``"counted"``).
    The one driver of fuzz_ops.py and fuzz_shells.py.
    """
    os.makedirs(corpus, exist_ok=True)
    work = tempfile.mkdtemp(prefix=f"rrag_fuzz_{target}_")
    findings = tempfile.mkdtemp(prefix=f"rrag_fuzz_findings_{target}_")
    if from_coverage_only:
        for n in os.listdir(corpus):
            if not n.startswith(REPRODUCERS):
                shutil.copyfile(os.path.join(corpus, n), os.path.join(work, n))
    inputs = [work, *extra_dirs] if from_coverage_only else [work, corpus, *extra_dirs]
    n_exec, left, attempt, texts, returncode, counted = 0, args.runs, 0, [], 0, 0
    start = time.monotonic()
    # After a finding libFuzzer stops; --keep-going N restarts it (same working corpus, the
    # remaining runs) up to N times, so one run can report several bugs.
    while left > 0 and attempt <= args.keep_going:
        cmd = [*me, f"-runs={left}", f"-max_len={args.max_len}", f"-timeout={args.timeout}", "-rss_limit_mb=4096",
               "-print_final_stats=1", f"-artifact_prefix={findings}/",
               *([f"-seed={args.seed + attempt}"] if args.seed is not None else []), *libfuzzer, *inputs]
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace",
                              env=env)
        log.write(f"===== {target} (attempt {attempt}): {' '.join(shlex.quote(c) for c in cmd)}\n{proc.stdout}\n")
        log.flush()
        execs = [int(m) for m in _STAT.findall(proc.stdout)]
        done = _DONE.findall(proc.stdout)
        ran = execs[-1] if execs else (int(done[-1][0]) if done else 0)
        if counter is not None:
            counted += max((int(k) for k in counter.findall(proc.stdout)), default=0)
        n_exec += ran
        left -= max(ran, 1)
        attempt += 1
        if proc.returncode == 0:
            break
        returncode = proc.returncode
        texts.append(_finding_text(proc.stdout))
    elapsed = time.monotonic() - start
    crashes = []
    for name in sorted(os.listdir(findings)):
        path = os.path.join(findings, name)
        with open(path, "rb") as f:
            data = f.read()
        kind = name.split("-", 1)[0]  # crash | timeout | oom | leak | slow-unit
        keep = os.path.join(corpus, f"{kind}-{hashlib.sha1(data).hexdigest()[:16]}")
        if args.save and not os.path.exists(keep):
            shutil.copyfile(path, keep)
        crashes.append((kind, keep if args.save else path))
    size = None
    if args.save:
        coverage_files = [n for n in os.listdir(corpus) if not n.startswith(REPRODUCERS)]
        merged = tempfile.mkdtemp(prefix=f"rrag_fuzz_merged_{target}_")
        common = ["-use_counters=0", f"-max_len={args.max_len}", f"-timeout={args.timeout}", "-rss_limit_mb=4096",
                  f"-artifact_prefix={findings}/"]
        if args.minimize:
            # Rewrite the corpus as a greedy set cover (edges only) of the old one and this run's.
            old = tempfile.mkdtemp(prefix=f"rrag_fuzz_old_{target}_")
            for n in coverage_files:
                shutil.copyfile(os.path.join(corpus, n), os.path.join(old, n))
            merge = [*me, "-set_cover_merge=1", *common, merged, old, work]
        else:
            # Add only the inputs that reach an edge the corpus does not (existing files stay).
            for n in coverage_files:
                shutil.copyfile(os.path.join(corpus, n), os.path.join(merged, n))
            merge = [*me, "-merge=1", *common, merged, work]
        m = subprocess.run(merge, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace",
                           env=env)
        log.write(f"----- merge {target}\n{m.stdout}\n")
        if m.returncode == 0 and os.listdir(merged):
            keep = set(os.listdir(merged))
            for n in coverage_files:
                if n not in keep:
                    os.remove(os.path.join(corpus, n))
            for n in keep - set(coverage_files):
                shutil.copyfile(os.path.join(merged, n), os.path.join(corpus, n))
        size = (len(coverage_files), len([n for n in os.listdir(corpus) if not n.startswith(REPRODUCERS)]))
        shutil.rmtree(findings, ignore_errors=True)
        shutil.rmtree(merged, ignore_errors=True)
        if args.minimize:
            shutil.rmtree(old, ignore_errors=True)
    shutil.rmtree(work, ignore_errors=True)
    return {"target": target, "executions": n_exec, "seconds": elapsed, "corpus": size, "returncode": returncode,
            "crashes": crashes, "findings": texts, "counted": counted}


def driver_main(argv: list[str] | None, *, doc: str, script: str, targets: list[str], worker, replay, run_target,
                default_runs: int, corpus_label: str, add_options=None) -> int:
    """The command line of a fuzzer script (fuzz_ops.py, fuzz_shells.py): ``--worker`` (one
    target under libFuzzer), ``--replay``, or run the chosen targets with ``run_target`` and
    print a line per target; exit 1 when one had a finding. ``add_options(parser)`` adds the
    script's own options."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--worker"]:
        worker(argv[1], argv[2:])
        return 0
    if argv[:1] == ["--replay"]:
        if len(argv) < 3:
            raise SystemExit(f"usage: {script} --replay TARGET FILE [FILE ...]")
        return replay(argv[1], argv[2:])
    libfuzzer: list[str] = []
    if "--" in argv:
        k = argv.index("--")
        argv, libfuzzer = argv[:k], argv[k + 1:]
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", default="all", help="one target (see --list) or 'all' (default)")
    ap.add_argument("--runs", type=int, default=default_runs, help=f"executions per target (default {default_runs})")
    ap.add_argument("--max-len", type=int, default=2048, help="largest input in bytes (default 2048)")
    ap.add_argument("--seed", type=int, default=None, help="libFuzzer seed (default: random)")
    ap.add_argument("--timeout", type=int, default=30, help="seconds one input may take (a hang, default 30)")
    ap.add_argument("--keep-going", type=int, default=0, metavar="N",
                    help="after a finding, restart the target up to N times with the runs left (default 0)")
    ap.add_argument("--minimize", action="store_true",
                    help="rewrite each target's corpus as a minimal set cover (default: only add new coverage)")
    ap.add_argument("--no-save", dest="save", action="store_false",
                    help=f"leave {corpus_label} alone (reproducers stay in a temporary folder)")
    if add_options is not None:
        add_options(ap)
    ap.add_argument("--log", default=None, help="libFuzzer output goes here (default: a temporary file)")
    ap.add_argument("--list", action="store_true", help="print the targets and exit")
    ap.add_argument("corpus", nargs="*", help="extra corpus folders to read (never written)")
    args = ap.parse_args(argv)
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
    log_path = args.log or tempfile.mkstemp(prefix=f"rrag_{os.path.splitext(script)[0]}_", suffix=".log")[1]
    width = max(len(t) for t in targets + ["total"]) + 1
    rows = []
    total_start = time.monotonic()
    with open(log_path, "w") as log:
        for t in chosen:
            row = run_target(t, args, args.corpus, libfuzzer, log)
            rows.append(row)
            status = "ok" if not row["crashes"] and row["returncode"] == 0 else "FINDING"
            corpus = "" if row["corpus"] is None else f"corpus {row['corpus'][0]} -> {row['corpus'][1]} files  "
            rate = row["executions"] / row["seconds"] if row["seconds"] else 0.0
            known = f"  {row['known']} known-bug findings let pass" if row.get("known") else ""
            print(f"{t:{width}s} {row['executions']:9d} execs {row['seconds']:8.1f} s {rate:7.1f}/s  "
                  f"{corpus}{status}{known}", flush=True)
            if status != "ok":
                for kind, path in row["crashes"]:
                    print(f"    {kind}: {os.path.relpath(path)}")
                for text in row["findings"]:
                    print("    " + text.replace("\n", "\n    "))
    total = sum(r["executions"] for r in rows)
    n_find = sum(1 for r in rows if r["crashes"] or r["returncode"] != 0)
    print(f"{'total':{width}s} {total:9d} execs {time.monotonic() - total_start:8.1f} s  {n_find} target(s) with "
          f"findings; libFuzzer log: {log_path}")
    return 1 if n_find else 0


def main(argv: list[str] | None = None) -> int:
    return driver_main(argv, doc=__doc__, script="fuzz_ops.py", targets=_targets(), worker=_worker, replay=_replay,
                       run_target=_run_target, default_runs=5000, corpus_label="fuzz/corpus")


if __name__ == "__main__":
    sys.exit(main())
