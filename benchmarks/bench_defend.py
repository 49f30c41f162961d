"""End-to-end MIRAGE defense time and the default NLI scorer's throughput (issue 10).

What a user pays per question: ``MirageDefense().defend(question, passages)`` with the
default (offline) judge, at 10 and at 20 passages, in both modes, and ``defend_batch`` over
16 questions (whose NLI is one pass over the distinct pairs of all items); and the default
scorer's pairs/s on a query's cross-source claim pairs (as many as the defense scores). The
passages (``--data``): ``realtimeqa`` (default; ``../shared/data/realtimeqa_dev.jsonl``,
real web snippets: 10 = a question's mixed regime, 5 attacker passages and 5 results; 20 =
its 10 results, the 5 attacker passages and 5 results of the next question) or ``polluted``
(``polluted_dev.jsonl``: 10 = 8 of a question's mixed regime and 2 of its other passages,
20 = its 16 passages and 4 of the next question's), else the packaged sample repeated.
``--load N`` runs N busy-looping processes while timing (a busy machine). Medians of repeated calls, timed by ``harness.time_providers``; rows appended to
``benchmarks/results/mirage.csv`` (kernel ``defend`` / ``defend_batch`` / ``nli_pairs``).
Timing never asserts anything.

Usage::

    python benchmarks/bench_defend.py [--quick] [--nli NAME_OR_PATH]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from importlib import resources
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402

DEV = harness.REPO_ROOT.parent / "shared" / "data" / "polluted_dev.jsonl"
REALTIMEQA = harness.REPO_ROOT.parent / "shared" / "data" / "realtimeqa_dev.jsonl"


def _questions(data: str = "realtimeqa") -> tuple[list[dict], str]:
    """(items with question and 20 passages, where they came from)."""
    from rrag_kernels.pipelines.mirage import PASSAGE_KEYS

    def shown(ps):
        return [{k: p.get(k) for k in PASSAGE_KEYS} for p in ps]

    if data == "realtimeqa" and REALTIMEQA.is_file():
        rows = [json.loads(line) for line in REALTIMEQA.read_text(encoding="utf-8").splitlines() if line.strip()]
        rows = [r for r in rows if r.get("poison_urls") == "unknown"]
        out = []
        for r, nxt in zip(rows, rows[1:] + rows[:1]):
            mixed = shown(r["regimes"]["mixed"])
            twenty = shown(r["regimes"]["clean"]) + mixed[:5] + shown(nxt["regimes"]["clean"])[:5]
            out.append({"question": r["question"], "ten": mixed, "passages": twenty})
        return out, str(REALTIMEQA.name)
    if DEV.is_file():
        rows = [json.loads(line) for line in DEV.read_text(encoding="utf-8").splitlines() if line.strip()]
        items = [{"question": r["question"], "passages": shown(r["passages"])} for r in rows]
        for it, nxt in zip(items, items[1:] + items[:1]):
            it["ten"] = it["passages"][8:16] + it["passages"][:2]
            it["passages"] = (it["passages"] + nxt["passages"])[:20]
        return items, str(DEV.name)
    sample = json.loads(resources.files("rrag_kernels").joinpath("data/mirage_sample.json").read_text())
    items = sample["questions"]
    out = []
    for it in items:
        ps = shown(it["passages"])
        twenty = (ps * (20 // max(len(ps), 1) + 1))[:20]
        out.append({"question": it["question"], "ten": twenty[:10], "passages": twenty})
    return out, "packaged mirage_sample.json (passages repeated)"


def _median_s(fn, plan) -> tuple[float, float, float]:
    """(median, p20, p80) seconds of ``fn`` by the shared harness (after one warm-up call:
    the model load and caches are not what a user pays per question)."""
    fn()
    t = harness.time_providers([harness.Provider("rrag", fn, kind=harness.RRAG)], plan)["rrag"]
    return t.median / 1e3, t.p20 / 1e3, t.p80 / 1e3


def _cross_source_pairs(result, n_pairs: int) -> tuple[list[str], list[str]]:
    """Claim pairs of different passages of a defended query, as many as the defense scored,
    in both directions: the judge's workload, built from the public result."""
    claims = result.claims
    pairs = [(a.text, b.text) for k, a in enumerate(claims) for b in claims[k + 1:] if a.source != b.source]
    pairs = pairs[:n_pairs]
    return [x for x, _ in pairs] + [y for _, y in pairs], [y for _, y in pairs] + [x for x, _ in pairs]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats; rows to mirage-quick.csv")
    parser.add_argument("--nli", default=None, help="NLI scorer name or path (default: the packaged default)")
    parser.add_argument("--no-csv", action="store_true")
    parser.add_argument("--data", choices=("realtimeqa", "polluted"), default="realtimeqa",
                        help="where the passages come from (default realtimeqa: real web snippets)")
    parser.add_argument("--load", type=int, default=0, metavar="N",
                        help="busy-looping processes running while timing (default 0: a quiet machine)")
    args = parser.parse_args(argv)
    if args.load < 0:
        parser.error(f"--load: expected an integer >= 0, got {args.load}")
    rk = harness.import_rrag()
    from rrag_kernels.models import nli as nli_module

    scorer = nli_module.load(args.nli)
    items, origin = _questions(args.data)
    repeats = 3 if args.quick else 7
    # Calls take seconds: one call per block, `repeats` rounds (3 at least).
    plan = harness.TimingPlan(repeats=repeats, min_repeats=3, max_s_per_provider=600.0, block_s=0.0,
                              max_calls_per_block=1)
    meta = harness.machine_info(rk.get_num_threads(), rk)
    stamp = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    rows, mode_name = [], "quick" if args.quick else "full"
    print(f"judge: {scorer!r}; passages from {origin}; {args.load} busy processes")

    def row(kernel, provider, shape, med, p20, p80, throughput="", unit=""):
        rows.append({**meta, "timestamp": stamp, "mode": mode_name, "kernel": kernel, "provider": provider,
                     "kind": harness.RRAG, "shape": shape, "median_ms": f"{med * 1e3:.3f}",
                     "p20_ms": f"{p20 * 1e3:.3f}", "p80_ms": f"{p80 * 1e3:.3f}", "samples": str(plan.repeats),
                     "throughput": throughput, "throughput_unit": unit})
        print(f"  {kernel:<13} {provider:<24} {shape:<40} {med * 1e3:9.1f} ms  (p20 {p20 * 1e3:.1f}, p80 "
              f"{p80 * 1e3:.1f}) {throughput} {unit}")

    if args.load:
        with harness.busy_processes(args.load):
            _run(args, scorer, items, plan, row)
    else:
        _run(args, scorer, items, plan, row)
    if not args.no_csv:
        path = harness.RESULTS_DIR / ("mirage-quick.csv" if args.quick else "mirage.csv")
        harness.append_csv(path, rows)
        print(f"{len(rows)} rows appended to {path}")
    return 0


def _run(args, scorer, items, plan, row) -> None:
    from rrag_kernels.pipelines.mirage import MirageDefense

    load = f", load {args.load}" if args.load else ""

    first = items[0]
    cases = {10: first["ten"], 20: first["passages"]}
    for mode in ("paper", "corroboration"):
        defense = MirageDefense(nli=scorer, mode=mode)
        for n, passages in cases.items():
            med, p20, p80 = _median_s(lambda: defense.defend(first["question"], passages), plan)
            res = defense.defend(first["question"], passages)
            row("defend", f"rrag-{mode}", f"{n} passages, {res.stats['n_claims']} claims, "
                f"{res.stats['n_pairs']} pairs{load}", med, p20, p80)
        batch = [{"question": it["question"], "passages": it["ten"]} for it in items[:16]]
        med, p20, p80 = _median_s(lambda: defense.defend_batch(batch, progress=False), plan)
        row("defend_batch", f"rrag-{mode}", f"{len(batch)} questions x 10 passages{load}", med, p20, p80,
            f"{len(batch) / med:.2f}", "questions/s")
    # The default scorer on a 20-passage query's cross-source claim pairs, as many as the
    # corroboration defense scores there (both directions).
    result = MirageDefense(nli=scorer, mode="corroboration").defend(first["question"], cases[20])
    a, b = _cross_source_pairs(result, result.stats["n_pairs"])
    med, p20, p80 = _median_s(lambda: scorer.predict_proba(a, b), plan)
    row("nli_pairs", type(scorer).__name__, f"{len(a)} cross-source claim pairs of a 20-passage query{load}", med,
        p20, p80, f"{len(a) / med:.1f}", "pairs/s")


if __name__ == "__main__":
    sys.exit(main())
