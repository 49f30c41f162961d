"""Offline evaluation of the chain search on multi-hop questions with injected passages.

Data: JSONL in the format of ``shared/data/multihop_dev.jsonl`` (``question``, ``passages``
with supplied ``triples``, and the evaluation-only ``label``, ``style``, ``gold_chain``).

Settings: injected passages kept in {0, 1, 2} (0: both dropped; 1: the ``news``-style one
kept, the ``minimal_edit`` one dropped; 2: both kept) x alpha in :data:`ALPHAS` (alpha = 1 is
TRACE: similarity only), with ``"oracle"`` credibility, the supplied triples and the
``"reliability"`` selector. Measured per cell, averaged over questions:

* ``inj_topk``: share of injected triples among the first hop's top-K candidates;
* ``inj_tbs``: share of injected triples in the TBS context;
* ``gold_recall``: share of the ``gold_chain`` triples whose text is in the TBS context.

The pipeline sees only question, passages' triples and (for the oracle) ``label``; the
evaluation alone reads ``style`` and ``gold_chain``.

The grid runs question by question (the single-question ``triple_reliability`` form); the
segmented form could batch all questions of a hop in one call, but the selector's
probabilities come per chain anyway and the grid takes seconds, so it is not used here.

Also here: :func:`evaluate_llm` (ReliableRAG and the cheap baselines with an LLM: EM, F1,
Str-Acc, ASR, calls, tokens, time split) and, in :mod:`.sources`, the ROC-AUC of each
credibility source against the injected labels.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from ...models import Embedder
from .._multihop import load_multihop_rows
from .._progress import progress_iter
from .chains import ChainParams, build_chains, credibility, triples_from_passages

logger = logging.getLogger("rrag_kernels")

#: The alpha grid (1.0 = TRACE, similarity only).
ALPHAS = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
#: Injected passages kept: 0, 1 (the news-style one) or 2.
INJECTED = (0, 1, 2)
#: The style of the injected passage kept in the 1-injected setting.
KEPT_STYLE = "news"


#: Reads a JSONL file of multi-hop questions (shared with the D2F-ReAG evaluation).
load_multihop = load_multihop_rows


def injection_setting(passages: Sequence[Mapping[str, Any]], n_injected: int) -> list[int]:
    """Indices of the passages kept when ``n_injected`` injected passages remain (0, 1: the
    :data:`KEPT_STYLE` one, 2: all). Reads ``label`` and ``style`` (evaluation only)."""
    keep = []
    for i, p in enumerate(passages):
        if p.get("label") != "injected" or n_injected >= 2 or (n_injected == 1 and p.get("style") == KEPT_STYLE):
            keep.append(i)
    return keep


def gold_texts(row: Mapping[str, Any]) -> set[str]:
    """The ``"head relation tail"`` texts of a question's ``gold_chain`` (entries ``{"pid",
    "triple"}``, ``triple`` the index in that passage's ``triples``); evaluation only.

    Raises
    ------
    ValueError
        An entry names a passage or a triple the question does not have.
    """
    by_pid = {p.get("pid"): p for p in row["passages"]}
    out = set()
    for g in row.get("gold_chain") or ():
        passage = by_pid.get(g.get("pid"))
        triples = triples_from_passages([passage]) if passage is not None else []
        j = g.get("triple")
        if not (isinstance(j, int) and 0 <= j < len(triples)):
            raise ValueError(f"gold_chain: no triple {j!r} in passage {g.get('pid')!r}")
        out.add(triples[j].text)
    return out


class _CachedEmbedder:
    """Memoises an embedder by text (chains of different settings share many queries)."""

    def __init__(self, embedder: Embedder):
        self.embedder, self.cache = embedder, {}

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        missing = list(dict.fromkeys(t for t in texts if t not in self.cache))
        if missing:
            self.cache.update(zip(missing, self.embedder.encode(missing)))
        return np.array([self.cache[t] for t in texts], dtype=np.float32)


def evaluate(data: str | Path | Sequence[Mapping[str, Any]], embedder: Embedder, *,
             alphas: Sequence[float] = ALPHAS, injected: Sequence[int] = INJECTED,
             params: ChainParams | None = None, progress: bool = False) -> dict[tuple[int, float], dict[str, float]]:
    """Run the grid; the cells' means over questions.

    Parameters
    ----------
    data : path or sequence of question dicts
    embedder : Embedder
    alphas : sequence of float in [0, 1]
    injected : sequence of int in {0, 1, 2}
    params : ChainParams, optional
        Its ``alpha`` is replaced by each grid value.
    progress : bool
        A progress bar over questions (tqdm, when installed).

    Returns
    -------
    dict
        ``(n_injected, alpha) -> {"inj_topk", "inj_tbs", "gold_recall", "n"}``.
    """
    rows = load_multihop(data) if isinstance(data, (str, Path)) else list(data)
    base = (params or ChainParams()).validate()
    cached = _CachedEmbedder(embedder)
    sums: dict[tuple[int, float], np.ndarray] = {(n, float(a)): np.zeros(3) for n in injected for a in alphas}
    for row in progress_iter(rows, enabled=progress, desc="reliablerag-eval", unit="question"):
        gold = gold_texts(row)
        for n_inj in injected:
            passages = [row["passages"][i] for i in injection_setting(row["passages"], n_inj)]
            triples = triples_from_passages(passages)
            injected_t = np.array([passages[t.passage].get("label") == "injected" for t in triples], dtype=bool)
            cred = credibility(row["question"], passages, triples, source="oracle")
            emb = cached.encode([t.text for t in triples])
            for a in alphas:
                p = ChainParams(**{**base.__dict__, "alpha": float(a)})
                res = build_chains(row["question"], triples, cred, cached, params=p, triple_emb=emb)
                inj_topk = float(injected_t[res.first_hop].mean()) if res.first_hop else 0.0
                inj_tbs = float(injected_t[res.context_triples].mean()) if res.context_triples else 0.0
                recall = len(gold & set(res.context)) / len(gold) if gold else 0.0
                sums[(n_inj, float(a))] += (inj_topk, inj_tbs, recall)
    return {key: {"inj_topk": s[0] / len(rows), "inj_tbs": s[1] / len(rows), "gold_recall": s[2] / len(rows),
                  "n": len(rows)} for key, s in sums.items()}


def format_report(report: Mapping[tuple[int, float], Mapping[str, float]]) -> str:
    """The grid as a text table, one row per (injected passages, alpha)."""
    lines = [f"{'injected':>8} {'alpha':>5}  {'inj top-K':>9}  {'inj TBS':>7}  {'gold recall':>11}"]
    for (n_inj, a), m in sorted(report.items()):
        tag = "  (TRACE: similarity only)" if a == 1.0 else ""
        lines.append(f"{n_inj:>8} {a:>5.1f}  {m['inj_topk']:>9.3f}  {m['inj_tbs']:>7.3f}  {m['gold_recall']:>11.3f}{tag}")
    return "\n".join(lines)


# --------------------------------------------------------------------------- with an LLM

#: The methods :func:`evaluate_llm` compares, in print order.
LLM_METHODS = ("vanilla", "exclude<=3", "TRACE", "ReliableRAG")


def _passage_credibility(passages: Sequence[Mapping[str, Any]], triples: Sequence[Any], cred: np.ndarray) -> np.ndarray:
    """Per passage: the mean credibility of its triples (10 for a passage with none)."""
    out = np.full(len(passages), 10.0)
    for p in range(len(passages)):
        mine = [c for t, c in zip(triples, cred) if t.passage == p]
        if mine:
            out[p] = float(np.mean(mine))
    return out


def evaluate_llm(data: str | Path | Sequence[Mapping[str, Any]], llm: Any, embedder: Embedder, *,
                 limit: int | None = None, credibility_source: str = "oracle",
                 credibility_options: Mapping[str, Any] | None = None, context: str = "tbs",
                 params: ChainParams | None = None, selector: str = "llm", top_k: int = 3,
                 exclude_at: float = 3.0, methods: Sequence[str] = LLM_METHODS,
                 selector_options: Mapping[str, Any] | None = None,
                 progress: bool = False) -> dict[str, Any]:
    """ReliableRAG and the cheap baselines with an LLM, on the same questions (all passages
    kept: 2 injected per question).

    Methods
    -------
    ``vanilla``: the top ``top_k`` passages by cosine to the question, to the reader;
    ``exclude<=3``: the same after dropping passages whose credibility (the mean of their
    triples', from ``credibility_source``) is <= ``exclude_at``;
    ``TRACE``: the chain search with alpha = 1 (similarity only), same selector and reader;
    ``ReliableRAG``: the chain search with ``params.alpha`` and ``credibility_source``.
    The credibility is computed once per question; its LLM calls, tokens and time are
    charged to both methods that use it.

    Returns
    -------
    dict
        ``{"n": questions, "methods": {name: {"em", "f1", "str_acc", "asr", "calls", "tokens",
        "seconds": {kernels, embedder, llm, other, total}, "errors", "fallbacks"}}}`` (per
        question means; ``errors`` and ``fallbacks`` are counts), and ``"items"``: per
        question and method, the prediction and its scores.
    """
    from .._answer_metrics import answer_scores
    from .answer import _TimedLLM, answer, vanilla_answer
    from .sources import score_credibility

    rows = load_multihop(data) if isinstance(data, (str, Path)) else list(data)
    if limit is not None:
        rows = rows[:limit]
    base = (params or ChainParams()).validate()
    trace_params = ChainParams(**{**base.__dict__, "alpha": 1.0})
    keys = ("em", "f1", "str_acc", "asr", "calls", "tokens")
    sums = {m: {**{k: 0.0 for k in keys}, "seconds": {}, "errors": 0, "fallbacks": 0} for m in methods}
    items = []
    for row in progress_iter(rows, enabled=progress, desc="reliablerag-eval (LLM)", unit="question"):
        q, passages = row["question"], row["passages"]
        item: dict[str, Any] = {"id": row.get("id"), "question": q, "answer": row.get("answer")}
        cred_meter = _TimedLLM(llm)
        t0 = time.perf_counter()
        cred_err = None
        try:
            triples = triples_from_passages(passages)
            opts = dict(credibility_options or {})
            if credibility_source == "llm":
                opts.setdefault("llm", cred_meter)
            cred = score_credibility(q, passages, triples, source=credibility_source, **opts)
            scores, cred_fb = cred.scores, cred.fallbacks
        except Exception as exc:  # this question's credibility failed: recorded, the others go on
            triples, scores, cred_fb, cred_err = [], np.zeros(0), 0, f"credibility: {type(exc).__name__}: {exc}"
        cred_s = time.perf_counter() - t0
        for m in methods:
            if cred_err is not None and m in ("exclude<=3", "ReliableRAG"):
                from .answer import RAGAnswer
                res = RAGAnswer(error=cred_err)
            elif m == "vanilla":
                res = vanilla_answer(q, passages, llm=llm, embedder=embedder, k=top_k)
            elif m == "exclude<=3":
                res = vanilla_answer(q, passages, llm=llm, embedder=embedder, k=top_k,
                                     exclude=_passage_credibility(passages, triples, scores) <= exclude_at)
            else:
                p = trace_params if m == "TRACE" else base
                src = "uniform" if m == "TRACE" else (lambda *_a, _s=scores: _s)
                try:
                    res = answer(q, passages, llm=llm, embedder=embedder, credibility=src, context=context,
                                 selector=selector, params=p, extraction="supplied",
                                 selector_options=selector_options)
                except Exception as exc:
                    from .answer import RAGAnswer
                    res = RAGAnswer(error=f"{type(exc).__name__}: {exc}")
            charged = m in ("exclude<=3", "ReliableRAG")
            sc = answer_scores(res.answer, row.get("answer", ""), row.get("aliases"), row.get("wrong_answer"))
            s = sums[m]
            for k in ("em", "f1", "str_acc", "asr"):
                s[k] += sc[k]
            s["calls"] += res.llm_calls + (cred_meter.calls if charged else 0)
            s["tokens"] += res.prompt_tokens + res.completion_tokens + (
                cred_meter.prompt_tokens + cred_meter.completion_tokens if charged else 0)
            secs = dict(res.seconds)
            if charged:
                secs["llm"] = secs.get("llm", 0.0) + cred_meter.seconds
                secs["other"] = secs.get("other", 0.0) + max(cred_s - cred_meter.seconds, 0.0)
                secs["total"] = secs.get("total", 0.0) + cred_s
            for k, v in secs.items():
                s["seconds"][k] = s["seconds"].get(k, 0.0) + v
            s["errors"] += res.error is not None
            s["fallbacks"] += len(res.fallbacks) + (cred_fb if charged else 0)
            item[m] = {"prediction": res.answer, **sc, "error": res.error, "context": res.context}
        items.append(item)
    n = max(len(rows), 1)
    out = {}
    for m, s in sums.items():
        out[m] = {**{k: s[k] / n for k in keys}, "seconds": {k: v / n for k, v in s["seconds"].items()},
                  "errors": s["errors"], "fallbacks": s["fallbacks"]}
    return {"n": len(rows), "methods": out, "items": items}


def format_llm_report(report: Mapping[str, Any]) -> str:
    """The table of :func:`evaluate_llm` (means per question)."""
    lines = [f"{'method':<12} {'EM':>5} {'F1':>5} {'StrAcc':>6} {'ASR':>5} {'calls/q':>7} {'tok/q':>7} "
             f"{'kern s':>7} {'emb s':>6} {'LLM s':>7} {'other s':>7} {'err':>4} {'fallb':>5}"]
    for m, r in report["methods"].items():
        sec = r["seconds"]
        lines.append(f"{m:<12} {r['em']:>5.3f} {r['f1']:>5.3f} {r['str_acc']:>6.3f} {r['asr']:>5.3f} "
                     f"{r['calls']:>7.1f} {r['tokens']:>7.0f} {sec.get('kernels', 0):>7.3f} "
                     f"{sec.get('embedder', 0):>6.2f} {sec.get('llm', 0):>7.1f} {sec.get('other', 0):>7.2f} "
                     f"{r['errors']:>4d} {r['fallbacks']:>5d}")
    return "\n".join(lines)
