"""Evaluation of D2F-ReAG on multi-hop questions with injected passages.

Data: JSONL in the format of ``shared/data/multihop_dev.jsonl`` (``question``, ``answer``,
``aliases``, ``wrong_answer``, ``sub_questions``, ``passages``). The passages of all questions
are pooled into one corpus (:func:`pooled_corpus`; only ``pid``, ``title``, ``text`` and
``url`` go in, never ``label`` or ``style``), embedded as ``"title: ... content: ..."``.

Two evaluations:

* **control flow** (:func:`evaluate_control`), with the scripted LLM of
  :func:`scripted_llm` (a test double, no model): per setting (order x budget), the
  decomposition rate (share of questions whose root was decomposed), the histogram of the
  deepest level processed, LLM calls per question, and the share of questions where the
  budget bound. Its rules, all deterministic:

  - reasoning: ``"Reasoning about: <question>"`` and ``"Answer: scripted"``;
  - judge: ``crc32("<seed>:<question>|<reasoning>") mod 11`` (so about 4 in 11 judgings
    reach 7, the threshold; an updated root reasoning is a new draw);
  - decomposition: a dataset question gets its gold ``sub_questions``; any other question
    ``q`` the two synthetic parts ``"<q> (part 1)"`` and ``"<q> (part 2)"`` (so unsolved
    sub-questions go on down to the depth cap);
  - picks: ``{"picks": [1, 2]}`` when two or more questions are listed (the root and the first pending
    one), else ``[1]``;
  - rewrite: question b plus ``" [given: <answer to a>]"``; root update: the reasoning plus
    ``"Using: <question a>"``; final answer: ``"scripted answer"``.

* **answer quality** (:func:`evaluate_llm`) with a real LLM (the embedded SmolLM2 or any
  OpenAI-compatible server): EM, F1, Str-Acc and ASR (:mod:`.._answer_metrics`), LLM calls and
  tokens per question, the time split (retrieval with query embedding / LLM), for D2F-ReAG
  and for a cheap baseline on the same questions: vanilla RAG (top-k retrieval, one answer
  call, :func:`vanilla_rag`).
"""

from __future__ import annotations

import json
import logging
import statistics
import time
import zlib
from collections import Counter
from pathlib import Path
from typing import Any, Mapping, Sequence

from ...models import LLM, Retriever, ScriptedLLM
from ...ops import check_int
from .._answer_metrics import answer_scores
from .._multihop import load_multihop_rows
from .._progress import progress_iter
from . import prompts
from .algorithm import D2FReAG
from .parsing import short_answer
from .types import D2FParams

logger = logging.getLogger("rrag_kernels")

__all__ = [
    "CONTROL_SETTINGS",
    "evaluate_control",
    "evaluate_llm",
    "format_report",
    "load_questions",
    "pooled_corpus",
    "scripted_llm",
    "vanilla_rag",
]

#: The control-flow settings: (name, D2FParams overrides).
CONTROL_SETTINGS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("bfs, 60 calls", {"order": "bfs", "max_calls": 60}),
    ("dfs, 60 calls", {"order": "dfs", "max_calls": 60}),
    ("bfs, 12 calls", {"order": "bfs", "max_calls": 12}),
    ("dfs, 12 calls", {"order": "dfs", "max_calls": 12}),
    ("bfs, 2000 tokens", {"order": "bfs", "max_total_tokens": 2000}),
)

_CORPUS_KEYS = ("pid", "title", "text", "url")


#: Reads a JSONL file of multi-hop questions (shared with the ReliableRAG evaluation).
load_questions = load_multihop_rows


def pooled_corpus(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Every question's passages in one list (``pid``, ``title``, ``text``, ``url`` only;
    a repeated ``pid`` keeps the first).

    Raises
    ------
    ValueError
        A passage has no str ``text``.
    """
    out, seen = [], set()
    for r, row in enumerate(rows):
        for n, p in enumerate(row.get("passages") or ()):
            if not isinstance(p, Mapping) or not isinstance(p.get("text"), str):
                raise ValueError(f"data: question {r} passage {n} has no str 'text'")
            pid = p.get("pid") if p.get("pid") is not None else f"q{r}-p{n}"
            if pid in seen:
                continue
            seen.add(pid)
            out.append({k: p[k] for k in _CORPUS_KEYS if p.get(k) is not None} | {"pid": pid})
    return out


# --------------------------------------------------------------------------- scripted LLM


def _between(text: str, start: str, end: str | None) -> str:
    i = text.find(start)
    if i < 0:
        return ""
    i += len(start)
    j = text.rfind(end) if end else -1
    return text[i:j] if j >= i else text[i:]


def scripted_llm(rows: Sequence[Mapping[str, Any]], *, seed: int = 0) -> ScriptedLLM:
    """The deterministic scripted LLM of the control-flow evaluation (a test double).

    Parameters
    ----------
    rows : sequence of dict
        The questions; their ``sub_questions`` are the decompositions of their ``question``.
    seed : int
        Enters the judge's hash.

    Returns
    -------
    ScriptedLLM
        Replies by the rules of this module's docstring, keyed on the system prompt.
    """
    check_int(seed, "seed", minimum=0)
    gold = {str(r["question"]).strip(): list(r.get("sub_questions") or ()) for r in rows}

    def reply(messages: list[dict[str, Any]]) -> str:
        system = messages[0]["content"] if messages[0]["role"] == "system" else ""
        user = next(m["content"] for m in messages if m["role"] == "user")
        if system == prompts.REASON_SYSTEM:
            q = user.rsplit("\n\nQuestion: ", 1)[-1].removesuffix("\n\nReasoning:")
            return "Reasoning about: " + q + "\nAnswer: scripted"
        if system == prompts.JUDGE_SYSTEM:
            q = user[len("Question: "):user.find("\n\nPassages:\n")]
            reasoning = _between(user, "\n\nReasoning:\n", "\n\nScore (0-10):")
            return str(zlib.crc32((str(seed) + ":" + q + "|" + reasoning).encode()) % 11)
        if system == prompts.DECOMPOSE_SYSTEM:
            q = user[len("Question: "):].strip()
            subs = gold.get(q) or [q + " (part 1)", q + " (part 2)"]
            return json.dumps({"sub_questions": subs})
        if system == prompts.PICK_SYSTEM:
            listed = _between(user, "Open questions:\n", "\n\nq: ").count("\n") + 1
            return '{"picks": [1, 2]}' if listed >= 2 else '{"picks": [1]}'
        if system == prompts.REWRITE_SYSTEM:
            a = _between(user, "\nAnswer to question a: ", "\nQuestion b: ")
            b = _between(user, "\nQuestion b: ", "\nRewritten question b:")
            return b + " [given: " + a + "]"
        if system == prompts.UPDATE_SYSTEM:
            qa = _between(user, "Question a: ", "\nReasoning for question a:\n")
            rb = _between(user, "\nReasoning for question b:\n", "\n\nUpdated reasoning for question b:")
            return rb + "\nUsing: " + qa
        if system == prompts.ANSWER_SYSTEM:
            return "scripted answer"
        raise ValueError(f"scripted_llm: unknown step (system prompt {system[:40]!r})")

    return ScriptedLLM(reply)


# --------------------------------------------------------------------------- control flow


def evaluate_control(data: str | Path | Sequence[Mapping[str, Any]], retriever: Retriever, *,
                     settings: Sequence[tuple[str, Mapping[str, Any]]] = CONTROL_SETTINGS, seed: int = 0,
                     base: D2FParams | None = None, progress: bool = False) -> dict[str, dict[str, Any]]:
    """Run the search with the scripted LLM under each setting; per-setting summaries.

    Parameters
    ----------
    data : path or sequence of question dicts
    retriever : Retriever
        Over the pooled corpus (:func:`pooled_corpus` + ``corpus_retriever``).
    settings : sequence of (name, dict)
        :class:`D2FParams` overrides per setting.
    seed : int
        The scripted judge's seed.
    base : D2FParams, optional
        The parameters the overrides apply to.
    progress : bool

    Returns
    -------
    dict
        ``name -> {"n", "errors", "decomposition_rate", "depth_hist" (level -> count),
        "calls_mean", "calls_median", "calls_max", "tokens_mean", "budget_bound",
        "stop_reasons" (reason -> count), "nodes_mean", "params"}``.
    """
    rows = load_questions(data) if isinstance(data, (str, Path)) else list(data)
    base = base or D2FParams()
    out: dict[str, dict[str, Any]] = {}
    for name, over in settings:
        params = D2FParams(**{**base.as_dict(), **dict(over)}).validate()
        method = D2FReAG(scripted_llm(rows, seed=seed), retriever, params)
        results = method.run_batch([r["question"] for r in rows], progress=progress)
        ok = [r for r in results if r.ok]
        calls = [r.llm_calls for r in ok] or [0]
        out[name] = {
            "n": len(results), "errors": len(results) - len(ok),
            "decomposition_rate": sum(r.decomposed for r in ok) / max(len(ok), 1),
            "depth_hist": dict(sorted(Counter(r.max_level for r in ok).items())),
            "calls_mean": statistics.fmean(calls), "calls_median": statistics.median(calls), "calls_max": max(calls),
            "tokens_mean": statistics.fmean([r.prompt_tokens + r.completion_tokens for r in ok] or [0]),
            "nodes_mean": statistics.fmean([len(r.order) for r in ok] or [0]),
            "budget_bound": sum(r.budget_bound for r in ok) / max(len(ok), 1),
            "stop_reasons": dict(sorted(Counter(r.stop_reason for r in ok).items())),
            "params": params.as_dict(),
        }
    return out


# --------------------------------------------------------------------------- with an LLM


def vanilla_rag(question: str, llm: LLM, retriever: Retriever, *, k: int = 3, max_tokens: int = 32,
                seed: int | None = 0) -> dict[str, Any]:
    """The baseline: top-``k`` passages, one answer call (the final-answer prompt of D2F-ReAG).

    Parameters
    ----------
    question : str
    llm : LLM
    retriever : Retriever
    k : int
        Passages (>= 1).
    max_tokens : int
        Of the answer call (>= 1).
    seed : int or None

    Returns
    -------
    dict
        ``answer``, ``answer_raw``, ``passages`` (ids), ``llm_calls`` (1), ``prompt_tokens``,
        ``completion_tokens``, ``retrieval_seconds``, ``llm_seconds``.

    Raises
    ------
    LLMError
        The call failed.
    """
    if not isinstance(question, str) or not question.strip():
        raise ValueError("question must be a non-empty str")
    check_int(k, "k", minimum=1)
    check_int(max_tokens, "max_tokens", minimum=1)
    t0 = time.perf_counter()
    hits = list(retriever.search(question, k))[:k]
    t1 = time.perf_counter()
    res = llm.chat(prompts.answer_messages(question, passages=hits), max_tokens=max_tokens, temperature=0.0, seed=seed)
    t2 = time.perf_counter()
    return {"answer": short_answer(res.text), "answer_raw": res.text,
            "passages": [str(h.get("pid", n)) for n, h in enumerate(hits)], "llm_calls": 1,
            "prompt_tokens": res.prompt_tokens, "completion_tokens": res.completion_tokens,
            "retrieval_seconds": t1 - t0, "llm_seconds": t2 - t1}


def _summary(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    ok = [r for r in records if r.get("ok", True)]
    n = max(len(ok), 1)

    def mean(key):
        return sum(float(r[key]) for r in ok) / n

    return {"n": len(records), "errors": len(records) - len(ok),
            **{m: mean(m) for m in ("em", "f1", "str_acc", "asr")},
            "calls": mean("llm_calls"), "tokens": sum(r["prompt_tokens"] + r["completion_tokens"] for r in ok) / n,
            "retrieval_s": mean("retrieval_seconds"), "llm_s": mean("llm_seconds")}


def evaluate_llm(data: str | Path | Sequence[Mapping[str, Any]], llm: LLM, retriever: Retriever, *,
                 params: D2FParams | None = None, limit: int | None = None, baseline: bool = True,
                 progress: bool = False) -> dict[str, Any]:
    """D2F-ReAG (and vanilla RAG) with a real LLM: answer metrics, cost and time per question.

    Parameters
    ----------
    data : path or sequence of question dicts
        With ``answer``, ``aliases``, ``wrong_answer`` (read by the evaluation only).
    llm : LLM
    retriever : Retriever
        Over the pooled corpus.
    params : D2FParams, optional
    limit : int or None
        The first ``limit`` questions only (>= 1).
    baseline : bool
        Also run vanilla RAG on the same questions.
    progress : bool

    Returns
    -------
    dict
        ``"d2f"`` and (with ``baseline``) ``"vanilla"``: ``{"n", "errors", "em", "f1",
        "str_acc", "asr", "calls", "tokens", "retrieval_s", "llm_s"}`` (means over the
        questions that did not fail); ``"records"``: per question, both methods' answers and
        scores (D2F: stop reason, budget flag, deepest level, fallbacks, the whole ``trace``; failures as
        ``{"ok": False, "error_type", "message"}``); ``"params"``.
    """
    rows = load_questions(data) if isinstance(data, (str, Path)) else list(data)
    if limit is not None:
        rows = rows[: check_int(limit, "limit", minimum=1)]
    params = (params or D2FParams()).validate()
    method = D2FReAG(llm, retriever, params)
    records = []
    for i, row in enumerate(progress_iter(rows, enabled=progress, desc="d2f-eval", unit="question")):
        gold = (row.get("answer") or "", row.get("aliases") or (), row.get("wrong_answer"))
        rec: dict[str, Any] = {"id": row.get("id", i), "question": row["question"], "answer_gold": gold[0]}
        res = method.run_batch([row["question"]])[0]
        if res.ok:
            rec["d2f"] = {"ok": True, "answer": res.answer, **answer_scores(res.answer, *gold),
                          "llm_calls": res.llm_calls, "prompt_tokens": res.prompt_tokens,
                          "completion_tokens": res.completion_tokens, "retrieval_seconds": res.retrieval_seconds,
                          "llm_seconds": res.llm_seconds, "stop_reason": res.stop_reason,
                          "budget_bound": res.budget_bound, "max_level": res.max_level, "fallbacks": res.fallbacks,
                          "trace": res.to_dict()}
        else:
            rec["d2f"] = res.to_dict()
        if baseline:
            try:
                v = vanilla_rag(row["question"], llm, retriever, k=params.k, max_tokens=params.answer_tokens,
                                seed=params.seed)
                rec["vanilla"] = {"ok": True, **v, **answer_scores(v["answer"], *gold)}
            except Exception as exc:  # per-item isolation, as in run_batch
                rec["vanilla"] = {"ok": False, "error_type": type(exc).__name__, "message": str(exc)}
        records.append(rec)
    out: dict[str, Any] = {"d2f": _summary([r["d2f"] for r in records]), "records": records,
                           "params": params.as_dict()}
    if baseline:
        out["vanilla"] = _summary([r["vanilla"] for r in records])
    return out


# --------------------------------------------------------------------------- report


def format_report(report: Mapping[str, Any]) -> str:
    """The tables of :func:`evaluate_control` (a dict of settings) or :func:`evaluate_llm`
    (a dict with ``"d2f"``) as text."""
    if "d2f" in report:
        lines = [f"{'method':<12} {'n':>3} {'err':>3} {'EM':>6} {'F1':>6} {'Str-Acc':>7} {'ASR':>6} "
                 f"{'calls/q':>7} {'tokens/q':>8} {'retr s/q':>8} {'LLM s/q':>8}"]
        for name in ("d2f", "vanilla"):
            if name not in report:
                continue
            m = report[name]
            label = "D2F-ReAG" if name == "d2f" else "vanilla RAG"
            lines.append(f"{label:<12} {m['n']:>3} {m['errors']:>3} {m['em']:>6.3f} {m['f1']:>6.3f} "
                         f"{m['str_acc']:>7.3f} {m['asr']:>6.3f} {m['calls']:>7.1f} {m['tokens']:>8.0f} "
                         f"{m['retrieval_s']:>8.3f} {m['llm_s']:>8.2f}")
        stops = Counter(r["d2f"].get("stop_reason", "error") for r in report.get("records", ()))
        if stops:
            lines.append("D2F stop reasons: " + ", ".join(f"{k} {v}" for k, v in sorted(stops.items())))
        return "\n".join(lines)
    levels = sorted({lvl for m in report.values() for lvl in m["depth_hist"]})
    hist_head = " ".join(f"{'d' + str(lvl):>4}" for lvl in levels)
    lines = [f"{'setting':<16} {'n':>3} {'err':>3} {'decomp':>6}  {hist_head}  {'calls mean/med/max':>18} "
             f"{'nodes':>5} {'budget':>6}  stop reasons"]
    for name, m in report.items():
        hist = " ".join(f"{m['depth_hist'].get(lvl, 0):>4}" for lvl in levels)
        calls = f"{m['calls_mean']:.1f}/{m['calls_median']:g}/{m['calls_max']}"
        stops = ", ".join(f"{k} {v}" for k, v in m["stop_reasons"].items())
        lines.append(f"{name:<16} {m['n']:>3} {m['errors']:>3} {m['decomposition_rate']:>6.2f}  {hist}  {calls:>18} "
                     f"{m['nodes_mean']:>5.1f} {m['budget_bound']:>6.2f}  {stops}")
    return "\n".join(lines)
