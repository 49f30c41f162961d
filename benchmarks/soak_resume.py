"""Kill/resume soak of ``rrag defend``: a batch run killed again and again (SIGKILL and SIGTERM,
alternating) and resumed with ``--resume`` until it completes must end with exactly the
output of an uninterrupted run; a killed rerun must leave a previous complete output as it was.

    python benchmarks/soak_resume.py                              # 5 iterations of 200 lines
    python benchmarks/soak_resume.py --iterations 20 --lines 500 --seed 3
    python benchmarks/soak_resume.py --iterations 1 --lines 24 --model-free --no-csv  # quick

What one run does:

1. writes an input JSONL of ``--lines`` lines (seeded): questions with 1-4 short passages on
   different hosts, and about one line in eight a bad one (not JSON, not an object, no
   question, passages that are a string, a lone surrogate in the ``id``, a key given twice)
   and one in twenty blank (blank lines are not items: no record);
2. runs ``python -m rrag_kernels defend IN OUT --nli lexical --quiet --batch-size 4`` once,
   uninterrupted: the reference records (and the time one run takes);
3. per iteration: removes OUT, starts the command, kills it after a random delay (uniform in
   [0.05 s, 1.1 x the reference time]; 0.9 x for an iteration's first run) with SIGKILL or
   SIGTERM in turn, and reruns it with ``--resume`` (killed the same way) until a run exits
   0; after ``--max-attempts`` / 2 kills a run is left to finish. Checked on every kill: a
   SIGTERM run exits 130 (or -15 when the signal came before Python installed the handler or
   after ``main`` returned, or -2, a shell's 130, see ``Soak.expect_killed``), a SIGKILL run
   -9, neither prints a traceback; ``OUT`` does not exist (it is written as ``OUT.partial``
   and renamed at the end) unless the run had renamed it (then it must be complete);
   ``OUT.partial``, when there is one, holds whole records but perhaps its last line. Checked
   at the end: OUT holds exactly one record per non-blank input line, ``line`` 1..n in order,
   and equals the reference records (``stats.timings`` aside); no ``OUT.partial`` is left;
4. then reruns without ``--resume`` and kills it before it can finish (a delay uniform in
   [0.05 s, 0.8 x the reference time]): OUT must be byte for byte the complete output it was.

Prints a summary (iterations, kills by signal, resumed runs, seconds) and appends one row to
``benchmarks/results/soak_resume.csv`` (machine and version columns as the other benchmarks';
``--no-csv`` to skip). Exits 1 on any failed check.

``--model-free`` adds ``--param units=domain`` to the command: MIRAGE's source units by domain
instead of by MiniLM content, so no embedding model loads (a run starts in ~0.5 s instead of
~5 s); the test suite uses it.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import harness  # noqa: E402  (machine_info, RESULTS_DIR)

CSV_PATH = harness.RESULTS_DIR / "soak_resume.csv"
CSV_COLUMNS = ("timestamp", "machine", "cores", "package_version", "commit", "command", "iterations", "lines",
               "items", "seed", "kills", "sigkill", "sigterm", "resumed_runs", "rerun_kills", "reference_s",
               "seconds", "failures")

SENTENCES = ("Gustave Eiffel built the tower in 1889.", "The tower was built by Gustave Eiffel for the fair.",
             "Maria Lopez designed the tower in 1905.", "The museum opened in 1905 in Lyon.",
             "The museum opened in 1914 in Paris.", "The bridge is 300 metres long.",
             "The bridge is 120 metres long and was built in 1889.", "The museum closed in 1914.")
QUESTIONS = ("Who built the Eiffel Tower?", "When did the museum open?", "How long is the bridge?")
BAD_LINES = ('{"id": "broken", "question": "Who built', '[1, 2, 3]', '"a string"', '{"id": "no-question"}',
             '{"id": "p", "question": "Who built it?", "passages": "not a list"}',
             '{"id": "a\\ud800b", "question": "Who built the tower?", "passages": [{"text": "Eiffel built it."}]}',
             '{"question": "Who?", "question": "Who built it?", "passages": []}', "{}")


class Failure(AssertionError):
    pass


def make_input(path: Path, lines: int, rng: random.Random) -> int:
    """Write the input file; returns the number of items (non-blank lines)."""
    items = 0
    with open(path, "w", encoding="utf-8") as fh:
        for n in range(1, lines + 1):
            u = rng.random()
            if u < 0.05 and n > 1:
                fh.write("\n" if rng.random() < 0.5 else "   \n")
                continue
            items += 1
            if u < 0.17:
                fh.write(rng.choice(BAD_LINES) + "\n")
                continue
            passages = [{"text": " ".join(rng.sample(SENTENCES, rng.randint(1, 2))),
                         "url": f"https://site{rng.randint(0, 5)}.example.org/{n}/{k}",
                         **({"retrieval_score": round(rng.random(), 3)} if rng.random() < 0.5 else {})}
                        for k in range(rng.randint(1, 4))]
            fh.write(json.dumps({"id": f"q{n}", "question": rng.choice(QUESTIONS), "passages": passages}) + "\n")
    return items


def _records(path: Path) -> list[dict]:
    with open(path, "rb") as fh:
        data = fh.read()
    text = data.decode("utf-8")  # a UnicodeDecodeError is a failure too
    if text and not text.endswith("\n"):
        raise Failure(f"{path.name}: the last line has no newline")
    return [json.loads(line) for line in text.split("\n")[:-1]] if text else []


def _comparable(rec: dict) -> dict:
    rec = json.loads(json.dumps(rec))
    stats = rec.get("stats")
    if isinstance(stats, dict):
        stats.pop("timings", None)
    return rec


def _check_partial(path: Path) -> tuple[int, bool]:
    """A killed run's OUT.partial: whole records, but perhaps a cut last line. Returns the
    number of whole records and whether the last line was cut."""
    if not path.exists():
        return 0, False
    data = path.read_bytes()
    whole = data[: data.rfind(b"\n") + 1]
    lines = whole.decode("utf-8").split("\n")[:-1] if whole else []
    for k, line in enumerate(lines, 1):
        rec = json.loads(line)
        if not isinstance(rec, dict) or not isinstance(rec.get("line"), int):
            raise Failure(f"{path.name} line {k} is not a record: {line[:200]!r}")
    return len(lines), len(whole) != len(data)


class Soak:
    def __init__(self, args: argparse.Namespace, work: Path):
        self.args = args
        self.work = work
        self.input = work / "in.jsonl"
        self.output = work / "out.jsonl"
        self.partial = work / "out.jsonl.partial"
        self.rng = random.Random(args.seed)
        self.kills = {"SIGKILL": 0, "SIGTERM": 0}
        self.resumed = 0
        self.rerun_kills = 0
        self.exits: dict[int, int] = {}  # exit status of the killed runs -> count
        self.kept: list[int] = []  # whole records in OUT.partial after each kill
        self.cut = 0  # kills that left a cut last line
        self.after_commit = 0  # kills that came after the run renamed OUT.partial to OUT
        # The runs use the rrag_kernels this process imports (harness.import_rrag: the installed
        # package, else the source tree).
        self.rk = harness.import_rrag()
        self.env = dict(os.environ)
        home = os.path.dirname(os.path.dirname(os.path.abspath(self.rk.__file__)))
        self.env["PYTHONPATH"] = home + (os.pathsep + self.env["PYTHONPATH"] if self.env.get("PYTHONPATH") else "")

    def command(self, resume: bool) -> list[str]:
        cmd = [self.args.python, "-m", "rrag_kernels", "defend", str(self.input), str(self.output), "--nli", "lexical",
               "--quiet", "--batch-size", "4"]
        if self.args.model_free:
            cmd += ["--param", "units=domain"]
        return cmd + (["--resume"] if resume else [])

    def run(self, resume: bool, kill_after: float | None) -> tuple[int, str | None, str]:
        """Run the command; kill it after ``kill_after`` s (if still running) with the next
        signal. Returns (exit status, the signal sent or None, stderr)."""
        proc = subprocess.Popen(self.command(resume), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                env=self.env, text=True, errors="replace")
        sent = None
        if kill_after is not None:
            try:
                proc.wait(timeout=kill_after)
            except subprocess.TimeoutExpired:
                total = self.kills["SIGKILL"] + self.kills["SIGTERM"] + self.rerun_kills
                sent = "SIGKILL" if total % 2 == 0 else "SIGTERM"
                proc.send_signal(getattr(signal, sent))
        try:
            _, err = proc.communicate(timeout=self.args.run_timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise Failure(f"a run did not end within {self.args.run_timeout} s") from None
        return proc.returncode, sent, err

    def expect_killed(self, rc: int, sent: str, err: str) -> None:
        self.exits[rc] = self.exits.get(rc, 0) + 1
        # SIGTERM: 130 (rrag's handler); -15 when it came before the handler was installed or
        # after main() returned; -2 (what a shell shows as 130) when the interrupt landed inside
        # an exec() of a string (dataclasses, namedtuple build methods so while a module loads):
        # CPython then exits through SIGINT even though rrag caught it and returned 130.
        allowed = (-signal.SIGKILL,) if sent == "SIGKILL" else (130, -signal.SIGTERM, -signal.SIGINT)
        if rc not in allowed:
            raise Failure(f"a run killed with {sent} exited {rc} (expected {allowed}); stderr: {err[-1500:]}")
        if "Traceback" in err:
            raise Failure(f"a run killed with {sent} printed a traceback: {err[-1500:]}")

    def reference(self) -> tuple[list[dict], float]:
        t0 = time.perf_counter()
        rc, _, err = self.run(False, None)
        seconds = time.perf_counter() - t0
        if rc not in (0,):
            raise Failure(f"the uninterrupted run exited {rc}: {err[-1500:]}")
        records = _records(self.output)
        self.output.unlink()
        return records, seconds

    def iteration(self, ref: list[dict], ref_s: float, items: int) -> None:
        for path in (self.output, self.partial):
            if path.exists():
                path.unlink()
        attempts = 0
        while True:
            resume = attempts > 0
            kill = attempts < self.args.max_attempts // 2
            # The first run of an iteration is always killed; later ones may finish first.
            delay = self.rng.uniform(0.05, (0.9 if attempts == 0 else 1.1) * ref_s) if kill else None
            rc, sent, err = self.run(resume, delay)
            attempts += 1
            self.resumed += resume
            if rc == 0:  # finished (perhaps just before the signal)
                break
            if sent is None:
                raise Failure(f"a {'resumed ' if resume else ''}run exited {rc}: {err[-1500:]}")
            self.kills[sent] += 1
            self.expect_killed(rc, sent, err)
            if self.output.exists():
                # Killed after its rename (the commit point), on the way out: OUT must be complete.
                self.same_as_reference(ref, items, f"the output of a run killed ({sent}) after its rename")
                self.after_commit += 1
                break
            kept, cut = _check_partial(self.partial)
            self.kept.append(kept)
            self.cut += cut
            if attempts > self.args.max_attempts:
                raise Failure(f"no run finished in {attempts} attempts")
        self.same_as_reference(ref, items, "the resumed output")
        # A rerun without --resume, killed before it can finish: the complete OUT stays as it was.
        before = self.output.read_bytes()
        rc, sent, err = self.run(False, self.rng.uniform(0.05, 0.8 * ref_s))
        if rc == 0:  # it finished first: a new complete output
            self.same_as_reference(ref, items, "a rerun's output")
        elif sent is None:
            raise Failure(f"a rerun exited {rc}: {err[-1500:]}")
        else:
            self.rerun_kills += 1
            self.expect_killed(rc, sent, err)
            if self.output.read_bytes() != before:
                raise Failure(f"a rerun killed with {sent} changed the complete OUT")
        if self.partial.exists():
            self.partial.unlink()

    def same_as_reference(self, ref: list[dict], items: int, what: str) -> None:
        """OUT: one record per item, ``line`` in input order, equal to the reference's records
        (``stats.timings`` aside); no OUT.partial beside it."""
        if self.partial.exists():
            raise Failure(f"OUT.partial left behind beside {what}")
        got = _records(self.output)
        lines = [r.get("line") for r in got]
        want = [r["line"] for r in ref]
        if len(got) != items or lines != want:
            raise Failure(f"{what}: count in != count out: {items} items, {len(got)} records; lines {lines[:20]}...")
        for a, b in zip(got, ref):
            if _comparable(a) != _comparable(b):
                raise Failure(f"{what}, line {b['line']}: differs from the uninterrupted run's:\n"
                              f"  got:       {json.dumps(_comparable(a))[:600]}\n  reference: "
                              f"{json.dumps(_comparable(b))[:600]}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--iterations", type=int, default=5, help="kill/resume cycles (default 5)")
    ap.add_argument("--lines", type=int, default=200, help="input lines (default 200)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the input and of the kill delays (default 0)")
    ap.add_argument("--max-attempts", type=int, default=40,
                    help="runs per iteration; after half of them a run is left to finish (default 40)")
    ap.add_argument("--model-free", action="store_true",
                    help="--param units=domain: no embedding model loads (fast start; the test uses it)")
    ap.add_argument("--python", default=sys.executable, help="the Python that runs rrag (default: this one)")
    ap.add_argument("--run-timeout", type=float, default=600.0, help="seconds one run may take (default 600)")
    ap.add_argument("--keep", action="store_true", help="keep the scratch folder (printed)")
    ap.add_argument("--no-csv", action="store_true", help="do not append a row to benchmarks/results/soak_resume.csv")
    args = ap.parse_args(argv)
    for name in ("iterations", "lines", "max_attempts"):
        if getattr(args, name) < 1:
            ap.error(f"--{name.replace('_', '-')}: expected an integer >= 1, got {getattr(args, name)}")

    work = Path(tempfile.mkdtemp(prefix="rrag_soak_resume_"))
    soak = Soak(args, work)
    t0 = time.perf_counter()
    failures = 0
    ref_s = None
    items = make_input(soak.input, args.lines, soak.rng)
    print(f"soak_resume: {args.lines} lines ({items} items), {args.iterations} iterations, seed {args.seed}; "
          f"{' '.join(soak.command(False)[1:])}")
    try:
        ref, ref_s = soak.reference()
        print(f"  uninterrupted run: {len(ref)} records in {ref_s:.2f} s")
        if len(ref) != items:
            raise Failure(f"the uninterrupted run wrote {len(ref)} records for {items} items")
        for it in range(1, args.iterations + 1):
            before = dict(soak.kills), soak.resumed
            t_it = time.perf_counter()
            soak.iteration(ref, ref_s, items)
            k = {s: soak.kills[s] - before[0][s] for s in soak.kills}
            print(f"  iteration {it}: {k['SIGKILL']} SIGKILL + {k['SIGTERM']} SIGTERM, "
                  f"{soak.resumed - before[1]} resumed runs, {time.perf_counter() - t_it:.1f} s: ok")
    except Failure as exc:
        failures += 1
        print(f"FAILED: {exc}", file=sys.stderr, flush=True)
    seconds = time.perf_counter() - t0
    kills = soak.kills["SIGKILL"] + soak.kills["SIGTERM"]
    print(f"soak_resume: {args.iterations} iterations, {kills} kills ({soak.kills['SIGKILL']} SIGKILL, "
          f"{soak.kills['SIGTERM']} SIGTERM), {soak.resumed} resumed runs, {soak.rerun_kills} killed reruns over a "
          f"complete output, {seconds:.1f} s: {'FAILED' if failures else 'ok'}")
    if soak.kept:
        print(f"  exit statuses of killed runs {dict(sorted(soak.exits.items()))}; records in OUT.partial at a kill: "
              f"mean {sum(soak.kept) / len(soak.kept):.1f}, max {max(soak.kept)} of {items}; {soak.cut} kills cut "
              f"a line; {soak.after_commit} came after the rename", flush=True)
    if not args.no_csv:
        meta = harness.machine_info(1, soak.rk)
        row = {**meta, "timestamp": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
               "command": "defend IN OUT " + " ".join(soak.command(False)[6:]), "iterations": args.iterations,
               "lines": args.lines, "items": items, "seed": args.seed, "kills": kills,
               "sigkill": soak.kills["SIGKILL"], "sigterm": soak.kills["SIGTERM"], "resumed_runs": soak.resumed,
               "rerun_kills": soak.rerun_kills, "reference_s": "" if ref_s is None else f"{ref_s:.2f}",
               "seconds": f"{seconds:.1f}", "failures": failures}
        new = not CSV_PATH.exists() or CSV_PATH.stat().st_size == 0
        CSV_PATH.parent.mkdir(parents=True, exist_ok=True)
        with open(CSV_PATH, "a", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(CSV_COLUMNS), extrasaction="ignore")
            if new:
                writer.writeheader()
            writer.writerow(row)
        print(f"1 row appended to {CSV_PATH}")
    if args.keep:
        print(f"scratch folder kept: {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
