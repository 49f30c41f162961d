"""The MIRAGE pollution harness: clean / mixed / polluted regimes, gate tuning, reports.

Data format (one JSON object per line): ``{"id", "question", "passages": [...]}``, each
passage with ``text``, ``url``, ``title``, ``retrieval_score`` and the harness-only labels
``label`` ("clean" | "polluted"), ``family`` and ``source_pid``. The defense never sees the
labels: the harness passes it only :data:`~rrag_kernels.pipelines.mirage.PASSAGE_KEYS`.

Regimes (as in the paper's protocol):
- ``clean``: the clean passages;
- ``polluted``: the polluted passages;
- ``mixed``: one passage per source, the polluted variant for every second source (by
  the clean passages' order) and the clean one otherwise, so half are polluted.
"""

from __future__ import annotations

import itertools
import json
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from .._progress import progress_iter
from .defense import PASSAGE_KEYS, MirageDefense, MirageParams

logger = logging.getLogger("rrag_kernels")

REGIMES = ("clean", "mixed", "polluted")


def load_dataset(path: str | Path) -> list[dict[str, Any]]:
    """Read a JSONL file of questions with labelled passages."""
    rows = []
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            line = line.strip()
            if not line:
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"path: line {n} is not JSON ({exc})") from exc
            if "question" not in row or "passages" not in row:
                raise ValueError(f"path: line {n} lacks 'question' or 'passages'")
            rows.append(row)
    return rows


def build_regimes(row: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """The three regimes of one question (labelled passage dicts, in retrieval order)."""
    clean = [p for p in row["passages"] if p.get("label") == "clean"]
    polluted = [p for p in row["passages"] if p.get("label") == "polluted"]
    by_source = {p.get("source_pid"): p for p in polluted}
    mixed = []
    for s, c in enumerate(clean):
        variant = by_source.get(c.get("pid"))
        mixed.append(variant if (s % 2 == 1 and variant is not None) else c)
    return {"clean": clean, "mixed": mixed, "polluted": polluted}


@dataclass
class RunRecord:
    """One (question, regime) run: the gate's statistics and where kept claims came from."""

    qid: str
    regime: str
    gate_passed: bool
    n_kept: int
    r_contr: float
    n_domains: int
    support_share: float
    kept_clean: int
    kept_polluted: int
    cand_clean: int
    cand_polluted: int
    kept_by_family: dict[str, int]
    cand_by_family: dict[str, int]
    nli_s: float
    kernels_s: float
    total_s: float
    error: str | None = None


def run_regimes(
    defense: MirageDefense,
    rows: Sequence[dict[str, Any]],
    regimes: Sequence[str] = REGIMES,
    *,
    progress: bool = True,
) -> list[RunRecord]:
    """Defend every (question, regime) and record what the gate saw."""
    jobs = [(row, regime) for row in rows for regime in regimes]
    iterator = progress_iter(jobs, enabled=progress, desc="mirage-eval", unit="run")
    records = []
    for row, regime in iterator:
        labelled = build_regimes(row)[regime]
        shown = [{k: p.get(k) for k in PASSAGE_KEYS} for p in labelled]
        t0 = time.perf_counter()
        try:
            result = defense.defend(row["question"], shown)
            error = None
        except Exception as exc:  # reported per run; the other runs go on
            logger.warning("mirage-eval: %s/%s failed: %s", row.get("id"), regime, exc)
            result, error = None, f"{type(exc).__name__}: {exc}"
        total = time.perf_counter() - t0
        kept = {"clean": 0, "polluted": 0}
        cand = {"clean": 0, "polluted": 0}
        kept_fam: dict[str, int] = {}
        cand_fam: dict[str, int] = {}
        stats: dict[str, Any] = {}
        if result is not None:
            stats = result.stats
            for c in result.claims:
                if c.reason == "capped":
                    continue
                label = labelled[c.source].get("label", "clean")
                fam = labelled[c.source].get("family")
                cand[label] = cand.get(label, 0) + 1
                if fam:
                    cand_fam[fam] = cand_fam.get(fam, 0) + 1
                if c.kept:
                    kept[label] = kept.get(label, 0) + 1
                    if fam:
                        kept_fam[fam] = kept_fam.get(fam, 0) + 1
        timings = stats.get("timings", {})
        records.append(
            RunRecord(
                qid=str(row.get("id")),
                regime=regime,
                gate_passed=bool(result.gate_passed) if result else False,
                n_kept=int(stats.get("n_kept", 0)),
                r_contr=float(stats.get("r_contr", 0.0)),
                n_domains=int(stats.get("n_domains", 0)),
                support_share=float(stats.get("support_share", 0.0)),
                kept_clean=kept["clean"],
                kept_polluted=kept["polluted"],
                cand_clean=cand["clean"],
                cand_polluted=cand["polluted"],
                kept_by_family=kept_fam,
                cand_by_family=cand_fam,
                nli_s=float(timings.get("nli_s", 0.0)),
                kernels_s=float(timings.get("kernels_s", 0.0)),
                total_s=total,
                error=error,
            )
        )
    return records


@dataclass(frozen=True)
class GateThresholds:
    r_max: float
    d_min: int
    min_support_share: float

    def passes(self, rec: RunRecord) -> bool:
        return (
            rec.error is None
            and rec.n_kept > 0
            and rec.r_contr <= self.r_max
            and rec.n_domains >= self.d_min
            and rec.support_share >= self.min_support_share
        )


DEFAULT_GRID = {
    "r_max": (0.02, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.98),
    "d_min": (1, 2, 3, 4, 5, 6),
    "min_support_share": (0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 0.6),
}


def _pass_rate(records: Sequence[RunRecord], regime: str, thr: GateThresholds) -> float:
    runs = [r for r in records if r.regime == regime]
    return sum(thr.passes(r) for r in runs) / len(runs) if runs else float("nan")


def tune_gate(records: Sequence[RunRecord], grid: dict[str, Sequence[float]] | None = None) -> dict[str, Any]:
    """Grid-search the gate on graph statistics (never the generator).

    Objective: maximise pass(clean) − pass(polluted); ties go to the higher pass(mixed),
    then to thresholds nearest the paper's (r_max 0.98, d_min 2, no support criterion).

    Returns
    -------
    dict with ``thresholds`` (GateThresholds) and the pass rates per regime it gives.
    """
    grid = DEFAULT_GRID if grid is None else grid
    best_key, best = None, None
    for r_max, d_min, share in itertools.product(grid["r_max"], grid["d_min"], grid["min_support_share"]):
        thr = GateThresholds(float(r_max), int(d_min), float(share))
        clean = _pass_rate(records, "clean", thr)
        polluted = _pass_rate(records, "polluted", thr)
        mixed = _pass_rate(records, "mixed", thr)
        key = (
            round(clean - polluted, 12),
            round(0.0 if np.isnan(mixed) else mixed, 12),
            -abs(r_max - 0.98),
            -abs(d_min - 2),
            -share,
        )
        if best_key is None or key > best_key:
            best_key, best = key, (thr, clean, mixed, polluted)
    thr, clean, mixed, polluted = best
    return {"thresholds": thr, "pass_clean": clean, "pass_mixed": mixed, "pass_polluted": polluted}


def cross_validate_gate(records: Sequence[RunRecord], folds: int = 4) -> dict[str, float]:
    """Tune on all but one fold of questions, measure on the held-out fold; averaged pass
    rates per regime (how the tuned gate generalises to unseen questions)."""
    qids = sorted({r.qid for r in records})
    outcome = {regime: [] for regime in REGIMES}
    for f in range(folds):
        held = set(qids[f::folds])
        train = [r for r in records if r.qid not in held]
        test = [r for r in records if r.qid in held]
        if not train or not test:
            continue
        thr = tune_gate(train)["thresholds"]
        for r in test:
            outcome[r.regime].append(thr.passes(r))
    return {regime: (float(np.mean(v)) if v else float("nan")) for regime, v in outcome.items()}


def summarise(records: Sequence[RunRecord], thr: GateThresholds | None = None) -> dict[str, dict[str, Any]]:
    """Per regime: gate pass rate, purity of the defended sets, share of clean claims kept,
    per-family share of polluted claims kept, and time per query (NLI vs kernels)."""
    out: dict[str, dict[str, Any]] = {}
    for regime in REGIMES:
        runs = [r for r in records if r.regime == regime]
        if not runs:
            continue
        passed = [(thr.passes(r) if thr else r.gate_passed) for r in runs]
        kept_clean = sum(r.kept_clean for r in runs)
        kept_poll = sum(r.kept_polluted for r in runs)
        cand_clean = sum(r.cand_clean for r in runs)
        fams = sorted({f for r in runs for f in r.cand_by_family})
        out[regime] = {
            "runs": len(runs),
            "errors": sum(r.error is not None for r in runs),
            "pass_rate": float(np.mean(passed)),
            "purity": kept_clean / (kept_clean + kept_poll) if (kept_clean + kept_poll) else float("nan"),
            "clean_kept": kept_clean / cand_clean if cand_clean else float("nan"),
            "polluted_kept_by_family": {
                f: sum(r.kept_by_family.get(f, 0) for r in runs) / max(1, sum(r.cand_by_family.get(f, 0) for r in runs))
                for f in fams
            },
            "ms_per_query": 1e3 * float(np.mean([r.total_s for r in runs])),
            "nli_ms": 1e3 * float(np.mean([r.nli_s for r in runs])),
            "kernels_ms": 1e3 * float(np.mean([r.kernels_s for r in runs])),
        }
    return out


def format_report(summary: dict[str, dict[str, Any]], title: str = "") -> str:
    lines = [title] if title else []
    lines.append(
        f"{'regime':<9} {'runs':>4} {'pass':>6} {'purity':>7} {'clean kept':>10} "
        f"{'ms/query':>9} {'NLI ms':>7} {'kernel ms':>9}  polluted claims kept by family"
    )
    for regime, s in summary.items():
        fam = ", ".join(f"{f} {v:.0%}" for f, v in s["polluted_kept_by_family"].items()) or "-"
        lines.append(
            f"{regime:<9} {s['runs']:>4} {s['pass_rate']:>6.1%} {s['purity']:>7.1%} {s['clean_kept']:>10.1%} "
            f"{s['ms_per_query']:>9.1f} {s['nli_ms']:>7.1f} {s['kernels_ms']:>9.2f}  {fam}"
        )
    return "\n".join(lines)


def evaluate(
    path: str | Path,
    *,
    nli: Any = None,
    params: MirageParams | None = None,
    tune: bool = True,
    progress: bool = True,
) -> dict[str, Any]:
    """Run the harness on a dataset: the regimes with the shipped gate, the gate tuned on
    this data (in-sample) and its cross-validated pass rates."""
    rows = load_dataset(path)
    defense = MirageDefense(nli=nli, params=params)
    records = run_regimes(defense, rows, progress=progress)
    report: dict[str, Any] = {"params": defense.params, "records": records, "shipped": summarise(records)}
    if tune:
        tuned = tune_gate(records)
        report["tuned"] = tuned
        report["tuned_summary"] = summarise(records, tuned["thresholds"])
        report["cross_validated"] = cross_validate_gate(records)
    return report
