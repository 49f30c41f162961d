"""The MIRAGE pollution harness: clean / mixed / polluted regimes, gate tuning, reports.

Data format (one JSON object per line): ``{"id", "question", "passages": [...]}``, each
passage with ``text``, ``url``, ``title``, ``retrieval_score`` and the harness-only labels
``label`` ("clean" | "polluted"), ``family``, ``source_pid`` and ``false_sentences`` (the
sentences of a polluted passage that state its changed fact). The defense never sees the
labels: the harness passes it only :data:`~rrag_kernels.pipelines.mirage.PASSAGE_KEYS`.

What is measured is what reaches the LLM, claim by claim (:func:`is_false_claim`): the
falsehood rate of the delivered claims and the share of true claims delivered, beside the
undefended baseline that delivers every claim (:func:`summarise`), in-sample and
cross-validated by question (:func:`cross_validate_gate`).

Regimes (as in the paper's protocol):
- ``clean``: the clean passages;
- ``polluted``: the polluted passages;
- ``mixed``: one passage per source, the polluted variant for every second source (by
  the clean passages' order) and the clean one otherwise, so half are polluted.
"""

from __future__ import annotations

import difflib
import itertools
import json
import logging
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np

from ...models import split_sentences
from ...ops import check_int
from .._progress import progress_iter
from .defense import MirageDefense
from .types import PASSAGE_KEYS, MirageParams

logger = logging.getLogger("rrag_kernels")

REGIMES = ("clean", "mixed", "polluted")


def iter_jsonl(path: str | Path) -> Iterator[tuple[int, Any]]:
    """(line number, parsed JSON) of every non-blank line; a line that is not JSON is a
    ValueError naming it (``path: line N is not JSON``)."""
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            line = line.strip()
            if not line:
                continue
            try:
                yield n, json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"path: line {n} is not JSON ({exc})") from exc


def load_dataset(path: str | Path) -> list[dict[str, Any]]:
    """Read a JSONL file of questions with labelled passages.

    Rows in the multi-hop format of ``shared/data/multihop_dev.jsonl`` (passages labelled
    gold / distractor / injected, a ``wrong_answer``) are converted by :func:`multihop_as_mirage`,
    so the harness also runs on data its knobs were never tuned on.
    """
    rows = []
    for n, row in iter_jsonl(path):
        if not isinstance(row, dict) or "question" not in row or "passages" not in row:
            raise ValueError(f"path: line {n} lacks 'question' or 'passages'")
        if _is_multihop(row):
            try:
                row = multihop_as_mirage(row)
            except (KeyError, TypeError, ValueError) as exc:
                raise ValueError(f"path: line {n} is a malformed multi-hop row ({exc})") from exc
        rows.append(row)
    return rows


def _is_multihop(row: dict[str, Any]) -> bool:
    passages = row.get("passages")
    return (isinstance(passages, list) and "wrong_answer" in row
            and any(isinstance(p, dict) and p.get("label") == "injected" for p in passages))


def multihop_as_mirage(row: dict[str, Any]) -> dict[str, Any]:
    """A multi-hop row (``multihop_dev.jsonl``) as a harness row.

    Gold and distractor passages are ``clean``; injected ones ``polluted``, their family
    ``injected_<style>``. Their ``false_sentences`` (the claims that carry the injected fact):
    for a ``minimal_edit`` passage, its sentences that are not sentences of its source passage
    (the edit); for a ``news`` passage, its sentences naming the ``wrong_answer`` (its other
    sentences may be invented detail, but they do not carry the answer, and count as true).
    No retrieval scores are given (every passage is equally retrieved).

    Regimes (``regime_pids``, read by :func:`build_regimes`): ``clean`` = the five true
    passages; ``mixed`` = all seven as retrieved (2 injected among them); ``polluted`` = the
    injected and the distractors, with neither gold passage (the truth is not retrieved).
    """
    passages = row["passages"]
    by_pid = {p["pid"]: p for p in passages}
    wrong = normalise_claim(str(row["wrong_answer"]))
    if not wrong:
        raise ValueError("wrong_answer is empty")
    converted = []
    for p in passages:
        q = {k: p[k] for k in ("pid", "url", "title", "text") if k in p}
        if p["label"] == "injected":
            sentences = split_sentences(p["text"])
            if p.get("style") == "minimal_edit" and p.get("source_pid") in by_pid:
                source = {normalise_claim(x) for x in split_sentences(by_pid[p["source_pid"]]["text"])}
                false = [x for x in sentences if normalise_claim(x) not in source]
            else:
                false = [x for x in sentences if wrong in normalise_claim(x)]
            q.update(label="polluted", family=f"injected_{p.get('style', 'unknown')}",
                     source_pid=p.get("source_pid"), false_sentences=false)
        elif p["label"] in ("gold", "distractor"):
            q.update(label="clean", family=None, source_pid=None, false_sentences=[])
        else:
            raise ValueError(f"passage {p.get('pid')!r} has label {p['label']!r}")
        converted.append(q)
    pids = [p["pid"] for p in passages]
    labels = {p["pid"]: p["label"] for p in passages}
    return {
        "id": row.get("id"),
        "question": row["question"],
        "passages": converted,
        "regime_pids": {
            "clean": [x for x in pids if labels[x] != "injected"],
            "mixed": pids,
            "polluted": [x for x in pids if labels[x] != "gold"],
        },
    }


def build_regimes(row: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """The three regimes of one question (labelled passage dicts, in retrieval order): the
    row's explicit ``regime_pids`` when it has them (see :func:`multihop_as_mirage`), else
    clean = its clean passages, mixed = every second clean one swapped for its polluted
    variant, polluted = its polluted passages."""
    explicit = row.get("regime_pids")
    if explicit is not None:
        by_pid = {p.get("pid"): p for p in row["passages"]}
        return {name: [by_pid[pid] for pid in explicit[name]] for name in REGIMES}
    clean = [p for p in row["passages"] if p.get("label") == "clean"]
    polluted = [p for p in row["passages"] if p.get("label") == "polluted"]
    by_source = {p.get("source_pid"): p for p in polluted}
    mixed = []
    for s, c in enumerate(clean):
        variant = by_source.get(c.get("pid"))
        mixed.append(variant if (s % 2 == 1 and variant is not None) else c)
    return {"clean": clean, "mixed": mixed, "polluted": polluted}


def normalise_claim(text: str) -> str:
    """Whitespace collapsed to single spaces, stripped, lower-cased: the form in which
    claims and false sentences are compared."""
    return " ".join(text.split()).lower()


def is_false_claim(claim: str, false_sentences: Sequence[str]) -> bool:
    """Whether a claim states a false fact of its passage.

    A claim is false iff, after :func:`normalise_claim`, it is a substring of one of its
    passage's false sentences or contains one (so a false sentence split into two claims
    makes both false, and a claim that merges it with a neighbour is false too).

    Parameters
    ----------
    claim : str
    false_sentences : sequence of str
        The ``false_sentences`` of the claim's own passage (``[]`` for a clean one).
    """
    c = normalise_claim(claim)
    for sentence in false_sentences:
        f = normalise_claim(sentence)
        if f and c and (c in f or f in c):
            return True
    return False


_WORD = re.compile(r"[\w'\u2019.-]+")


def changed_values(source_text: str, false_sentence: str) -> list[str]:
    """The fact a polluted passage changed, as far as words show it: the capitalised (not
    sentence-initial) or numeric words of the source sentence the false sentence was made from (the most similar sentence
    of the clean source passage) that the false sentence no longer contains.

    Parameters
    ----------
    source_text : str, the clean source passage
    false_sentence : str, one of the polluted passage's ``false_sentences``

    Returns
    -------
    list of str, empty when the change adds a fact rather than replacing one
    """
    sentences = split_sentences(source_text) or [source_text]
    best = max(sentences, key=lambda s: (difflib.SequenceMatcher(None, s, false_sentence, autojunk=False).ratio(), -len(s)))
    a, b = _WORD.findall(best), _WORD.findall(false_sentence)
    ops = difflib.SequenceMatcher(None, [w.lower() for w in a], [w.lower() for w in b], autojunk=False).get_opcodes()
    low = false_sentence.lower()
    out: list[str] = []
    for op, i1, i2, _, _ in ops:
        if op not in ("replace", "delete"):
            continue
        for k in range(i1, i2):
            w = a[k].strip(".,")
            # A capital marks a name except on a sentence's first word ("The", "After").
            named = w[:1].isupper() and k > 0
            if w and (named or any(ch.isdigit() for ch in w)) and w.lower() not in low and w not in out:
                out.append(w)
    return out


def contradiction_ceiling(rows: Sequence[dict[str, Any]], regimes: Sequence[str] = ("mixed", "polluted")
                          ) -> dict[str, dict[str, Any]]:
    """How many false sentences no other passage of the set could contradict.

    A false claim can be removed by a contradiction only if another passage of the retrieved
    set speaks about what it changed. Each false sentence of a polluted passage is put in one
    of four classes:

    * ``no_source``: its passage names no clean source in the row, so what changed is unknown;
    * ``no_value``: the change replaces no name or number (:func:`changed_values` is empty:
      a negation, a common noun, an added fact);
    * ``with_evidence``: a changed value appears, case-insensitively, in the true sentences
      of another passage shown in the regime (a generous match: any value, anywhere);
    * ``uncontradicted``: the replaced names and numbers appear in no other passage shown.

    ``falsehood_floor`` is the falsehood rate left if every false sentence of the first three
    classes were removed and nothing else, over what an undefended pipeline delivers: no
    defense that only removes contradicted claims goes below it, unless another passage states
    the replaced value in other words ("ten" for "10"), which the text match cannot see.
    ``falsehood_floor_named_only`` removes only the ``with_evidence`` class: the floor if the
    changes of no name or number could not be contradicted either (the truth lies between).
    Reads the labels: evaluation only.

    Returns
    -------
    dict
        regime -> ``false_sentences``, ``with_evidence``, ``no_value``, ``no_source``,
        ``uncontradicted``, ``by_family`` (family -> [uncontradicted, false sentences]),
        ``claims`` (every sentence of every run), ``falsehood_floor`` and
        ``falsehood_floor_named_only``.
    """
    out: dict[str, dict[str, Any]] = {}
    for regime in regimes:
        counts = {"false_sentences": 0, "with_evidence": 0, "no_value": 0, "no_source": 0, "uncontradicted": 0}
        claims = 0
        by_family: dict[str, list[int]] = {}
        for row in rows:
            by_pid = {p.get("pid"): p for p in row.get("passages", [])}
            shown = build_regimes(row)[regime]
            truths = [_passage_truth(p) or [] for p in shown]
            true_text = []
            for p, false in zip(shown, truths):
                text = p.get("text", "")
                for f in false:
                    text = text.replace(f, " ")
                true_text.append(text.lower())
            for k, (p, false) in enumerate(zip(shown, truths)):
                claims += len(split_sentences(p.get("text", "")))
                source = by_pid.get(p.get("source_pid")) if p.get("source_pid") is not None else None
                for f in false:
                    counts["false_sentences"] += 1
                    fam = by_family.setdefault(str(p.get("family", "unknown")), [0, 0])
                    fam[1] += 1
                    values = [v.lower() for v in changed_values(source.get("text", ""), f)] if source else []
                    if source is None:
                        counts["no_source"] += 1
                    elif not values:
                        counts["no_value"] += 1
                    elif any(v in t for j, t in enumerate(true_text) if j != k for v in values):
                        counts["with_evidence"] += 1
                    else:
                        counts["uncontradicted"] += 1
                        fam[0] += 1
        removable = counts["false_sentences"] - counts["uncontradicted"]
        floor = counts["uncontradicted"] / (claims - removable) if claims > removable else float("nan")
        named = counts["with_evidence"]  # removable when only the found values count
        floor_named = (counts["false_sentences"] - named) / (claims - named) if claims > named else float("nan")
        out[regime] = {**counts, "by_family": dict(sorted(by_family.items())), "claims": claims,
                       "falsehood_floor": floor, "falsehood_floor_named_only": floor_named}
    return out


def _passage_truth(passage: dict[str, Any]) -> list[str] | None:
    """A passage's false sentences; None when a polluted passage does not mark them."""
    marked = passage.get("false_sentences")
    if marked is None and passage.get("label") != "polluted":
        return []
    if not isinstance(marked, list) or not all(isinstance(f, str) for f in marked):
        return None
    return marked


@dataclass
class RunRecord:
    """One (question, regime) run: the gate's statistics and where kept claims came from.

    Claim-level truth (``truth_known`` when every polluted passage of the run marks its
    ``false_sentences``): ``kept_true`` / ``kept_false`` count the kept claims whatever the
    gate decided (a gate with other thresholds can be applied later); ``all_true`` /
    ``all_false`` count every sentence of every passage of the run, i.e. what an undefended
    pipeline delivers; the ``*_by_family`` dicts count false claims per polluted family.
    ``on_block`` is the defense's fallback (``"passthrough"`` delivers everything on BLOCK).
    """

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
    on_block: str = "parametric"
    truth_known: bool = False
    kept_true: int = 0
    kept_false: int = 0
    all_true: int = 0
    all_false: int = 0
    kept_false_by_family: dict[str, int] = field(default_factory=dict)
    all_false_by_family: dict[str, int] = field(default_factory=dict)


def _count_claims(labelled: Sequence[dict[str, Any]], result: Any) -> dict[str, Any]:
    """Claim-level truth of one run: true / false claims kept and in all (per family too)."""
    truth = [_passage_truth(p) for p in labelled]
    counts: dict[str, Any] = {
        "truth_known": all(t is not None for t in truth),
        "kept_true": 0, "kept_false": 0, "all_true": 0, "all_false": 0,
        "kept_false_by_family": {}, "all_false_by_family": {},
    }
    if not counts["truth_known"]:
        return counts

    def add(where: str, source: int, text: str) -> None:
        if is_false_claim(text, truth[source]):
            counts[f"{where}_false"] += 1
            family = str(labelled[source].get("family"))
            by_family = counts[f"{where}_false_by_family"]
            by_family[family] = by_family.get(family, 0) + 1
        else:
            counts[f"{where}_true"] += 1

    for source, passage in enumerate(labelled):
        sentences = split_sentences(passage["text"])
        for sentence in sentences:
            add("all", source, sentence)
        for marked in truth[source]:
            if not any(is_false_claim(s, [marked]) for s in sentences):
                logger.warning("mirage-eval: passage %s: false sentence %r matches none of its sentences",
                               passage.get("pid"), marked)
    if result is not None:
        for c in result.claims:
            if c.kept:
                add("kept", c.source, c.text)
    return counts


def run_regimes(
    defense: MirageDefense,
    rows: Sequence[dict[str, Any]],
    regimes: Sequence[str] = REGIMES,
    *,
    progress: bool = True,
) -> list[RunRecord]:
    """Defend every (question, regime) and record what the gate saw.

    The defense is shown only :data:`~rrag_kernels.pipelines.mirage.PASSAGE_KEYS` of each
    passage; ``label``, ``family`` and ``false_sentences`` are read here, to count.
    """
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
                on_block=defense.params.on_block,
                **_count_claims(labelled, result),
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


def fold_gates(records: Sequence[RunRecord], folds: int = 4) -> list[tuple[frozenset[str], GateThresholds]]:
    """Cross-validation by question: for each fold, its held-out question ids and the gate
    :func:`tune_gate` fits on the other folds' questions (fold f holds every ``folds``-th
    question id in sorted order, from the f-th; a fold with nothing to train on is skipped)."""
    check_int(folds, "folds", minimum=2)
    qids = sorted({r.qid for r in records})
    gates = []
    for f in range(folds):
        held = frozenset(qids[f::folds])
        train = [r for r in records if r.qid not in held]
        if held and train:
            gates.append((held, tune_gate(train)["thresholds"]))
    return gates


def _out_of_fold(records: Sequence[RunRecord], gates) -> tuple[list[RunRecord], list[bool]]:
    """The records of the held-out questions and each one's decision by its fold's gate."""
    runs, passed = [], []
    for held, thr in gates:
        for r in records:
            if r.qid in held:
                runs.append(r)
                passed.append(thr.passes(r))
    return runs, passed


def cross_validate_gate(records: Sequence[RunRecord], folds: int = 4) -> dict[str, dict[str, Any]]:
    """Out-of-fold quality of the tuned gate: every record is judged by the gate tuned on
    the other folds' questions (:func:`fold_gates`), and the rates of :func:`summarise`
    (pass rate, falsehood rate of the delivered claims, true-claim delivery, ...) are
    measured on those held-out decisions: how the tuned gate generalises to unseen questions."""
    return _summarise(*_out_of_fold(records, fold_gates(records, folds)))


def _delivered(r: RunRecord, passed: bool) -> tuple[int, int, dict[str, int]]:
    """(true, false, false per family) claims a run delivers: its kept claims when the gate
    passed; on BLOCK everything under ``passthrough``, else nothing."""
    if passed:
        return r.kept_true, r.kept_false, r.kept_false_by_family
    if r.on_block == "passthrough":
        return r.all_true, r.all_false, r.all_false_by_family
    return 0, 0, {}


def _ratio(num: float, den: float) -> float:
    return num / den if den else float("nan")


def _add_counts(total: dict[str, int], more: dict[str, int]) -> None:
    for key, value in more.items():
        total[key] = total.get(key, 0) + value


def summarise(records: Sequence[RunRecord], thr: GateThresholds | None = None) -> dict[str, dict[str, Any]]:
    """Per regime: what reaches the LLM, and the undefended baseline beside it.

    Parameters
    ----------
    records : sequence of RunRecord
    thr : GateThresholds, optional
        Judge every run by these thresholds instead of the defense's own gate.

    Returns
    -------
    dict
        regime -> ``runs``, ``errors``, ``pass_rate``; claim-level (NaN when a run lacks
        ``false_sentences``): ``falsehood_rate`` (false / all claims delivered: kept claims
        of passed gates, plus every claim of a blocked run under ``on_block="passthrough"``),
        ``true_delivery`` (true claims delivered / all true claims of the regime's items),
        ``false_by_family`` (false claims delivered per family), and the undefended
        baseline (every claim of every item delivered): ``falsehood_rate_undefended``,
        ``true_delivery_undefended`` (1 by definition), ``false_by_family_undefended``;
        counts ``n_delivered``, ``n_delivered_false``, ``n_claims``, ``n_false``;
        passage-level (over every run, whatever the gate): ``purity`` (kept claims from
        clean passages / all kept), ``clean_kept``, ``polluted_kept_by_family``; time per
        query ``ms_per_query``, ``nli_ms``, ``kernels_ms``.
    """
    return _summarise(records, [(thr.passes(r) if thr else r.gate_passed) for r in records])


def _summarise(records: Sequence[RunRecord], passed: Sequence[bool]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for regime in REGIMES:
        picked = [(r, ok) for r, ok in zip(records, passed) if r.regime == regime]
        if not picked:
            continue
        runs = [r for r, _ in picked]
        delivered_true = delivered_false = 0
        false_by_family: dict[str, int] = {}
        false_undefended: dict[str, int] = {}
        for r, ok in picked:
            t, f, fam = _delivered(r, ok)
            delivered_true += t
            delivered_false += f
            _add_counts(false_by_family, fam)
            _add_counts(false_undefended, r.all_false_by_family)
        all_true = sum(r.all_true for r in runs)
        all_false = sum(r.all_false for r in runs)
        truth = all(r.truth_known for r in runs)
        nan = float("nan")
        kept_clean = sum(r.kept_clean for r in runs)
        kept_poll = sum(r.kept_polluted for r in runs)
        cand_clean = sum(r.cand_clean for r in runs)
        fams = sorted({f for r in runs for f in r.cand_by_family})
        out[regime] = {
            "runs": len(runs),
            "errors": sum(r.error is not None for r in runs),
            "pass_rate": float(np.mean([ok for _, ok in picked])),
            "falsehood_rate": _ratio(delivered_false, delivered_true + delivered_false) if truth else nan,
            "falsehood_rate_undefended": _ratio(all_false, all_true + all_false) if truth else nan,
            "true_delivery": _ratio(delivered_true, all_true) if truth else nan,
            "true_delivery_undefended": _ratio(all_true, all_true) if truth else nan,
            "false_by_family": {f: false_by_family.get(f, 0) for f in sorted(false_undefended)} if truth else {},
            "false_by_family_undefended": dict(sorted(false_undefended.items())) if truth else {},
            "n_delivered": delivered_true + delivered_false,
            "n_delivered_false": delivered_false,
            "n_claims": all_true + all_false,
            "n_false": all_false,
            "purity": _ratio(kept_clean, kept_clean + kept_poll),
            "clean_kept": _ratio(kept_clean, cand_clean),
            "polluted_kept_by_family": {
                f: sum(r.kept_by_family.get(f, 0) for r in runs) / max(1, sum(r.cand_by_family.get(f, 0) for r in runs))
                for f in fams
            },
            "ms_per_query": 1e3 * float(np.mean([r.total_s for r in runs])),
            "nli_ms": 1e3 * float(np.mean([r.nli_s for r in runs])),
            "kernels_ms": 1e3 * float(np.mean([r.kernels_s for r in runs])),
        }
    return out


def _pct(value: float) -> str:
    return "-" if np.isnan(value) else f"{value:.1%}"


def format_ceiling(ceiling: dict[str, dict[str, Any]]) -> str:
    """:func:`contradiction_ceiling` as text lines, one per regime."""
    lines = ["false sentences no other passage of the set speaks about (their replaced names / numbers appear "
             "nowhere else), and the falsehood floor of a defense that removes every other false sentence:"]
    for regime, c in ceiling.items():
        fams = ", ".join(f"{f} {k}/{n}" for f, (k, n) in c["by_family"].items())
        lines.append(f"{regime:<9} {c['uncontradicted']}/{c['false_sentences']} uncontradicted ({fams}); "
                     f"{c['with_evidence']} with a contradicting value, {c['no_value']} changing no name or number"
                     + (f", {c['no_source']} without a source passage" if c["no_source"] else "")
                     + f"; floor {_pct(c['falsehood_floor'])} ({_pct(c['falsehood_floor_named_only'])} "
                       f"if only the contradicting values count)")
    return "\n".join(lines)


def format_report(summary: dict[str, dict[str, Any]], title: str = "") -> str:
    """The summary as a table: regime | runs | gate pass | falsehood rate (defended /
    undefended) | true-claim delivery (defended / undefended) | passage-level purity |
    times | false claims delivered per family (defended / undefended)."""
    lines = [title] if title else []
    lines.append(
        f"{'regime':<9} {'runs':>4} {'gate pass':>9} {'falsehood def / undef':>21} {'true delivered def / undef':>26} "
        f"{'purity':>7} {'ms/query':>9} {'NLI ms':>7} {'kernel ms':>9}  false claims delivered by family (def / undef)"
    )
    for regime, s in summary.items():
        undefended = s["false_by_family_undefended"]
        fam = ", ".join(f"{f} {s['false_by_family'].get(f, 0)}/{n}" for f, n in undefended.items()) or "-"
        falsehood = f"{_pct(s['falsehood_rate'])} / {_pct(s['falsehood_rate_undefended'])}"
        delivery = f"{_pct(s['true_delivery'])} / {_pct(s['true_delivery_undefended'])}"
        lines.append(
            f"{regime:<9} {s['runs']:>4} {_pct(s['pass_rate']):>9} {falsehood:>21} {delivery:>26} "
            f"{_pct(s['purity']):>7} {s['ms_per_query']:>9.1f} {s['nli_ms']:>7.1f} {s['kernels_ms']:>9.2f}  {fam}"
        )
    return "\n".join(lines)


def evaluate(
    path: str | Path,
    *,
    nli: Any = None,
    params: MirageParams | None = None,
    tune: bool = True,
    folds: int = 4,
    progress: bool = True,
    limit: int | None = None,
) -> dict[str, Any]:
    """Run the harness on a dataset.

    Parameters
    ----------
    path : str or Path
        JSONL in the format of ``shared/data/polluted_dev.jsonl``.
    nli : NLIScorer, str or None
        As for :class:`MirageDefense`.
    params : MirageParams, optional
    tune : bool
        Also tune the gate on this data and cross-validate it by question.
    folds : int
        Folds of questions for the cross-validation.
    progress : bool
    limit : int or None
        Only the file's first ``limit`` questions (a quick check of a setting; the figures
        of the documentation are over every question).

    Returns
    -------
    dict
        ``params``, ``records``, ``shipped`` (:func:`summarise` with the defense's gate);
        ``ceiling`` (:func:`contradiction_ceiling`) when every polluted passage marks its
        false sentences;
        with ``tune``: ``tuned`` (:func:`tune_gate` in-sample), ``tuned_summary``,
        ``fold_gates`` (:func:`fold_gates`) and ``cross_validated`` (the summary of the
        out-of-fold decisions, as :func:`cross_validate_gate`).
    """
    if limit is not None:
        check_int(limit, "limit", minimum=1)
    rows = load_dataset(path)[:limit]
    defense = MirageDefense(nli=nli, params=params)
    records = run_regimes(defense, rows, progress=progress)
    report: dict[str, Any] = {"params": defense.params, "records": records, "shipped": summarise(records)}
    if all(r.truth_known for r in records if r.regime != "clean"):
        report["ceiling"] = contradiction_ceiling(rows)
    if tune:
        tuned = tune_gate(records)
        report["tuned"] = tuned
        report["tuned_summary"] = summarise(records, tuned["thresholds"])
        gates = fold_gates(records, folds)
        report["fold_gates"] = gates
        report["cross_validated"] = _summarise(*_out_of_fold(records, gates))
    return report
