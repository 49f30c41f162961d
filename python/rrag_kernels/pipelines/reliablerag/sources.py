"""ReliableRAG credibility from a model: an LLM evaluator (``"llm"``) and cross-passage
agreement through an NLI judge (``"agreement"``), plus the ROC-AUC of a source against the
injected labels.

Both sources are registered in :data:`.chains.CREDIBILITY_SOURCES` when this module is
imported (the package face imports it), so ``credibility(q, passages, triples,
source="llm", llm=my_llm)`` and ``source="agreement"`` work like ``"oracle"``.
:func:`llm_credibility` and :func:`agreement_credibility` return a
:class:`CredibilityScores` with the per-item record (what was asked, which items fell back).

``"llm"``
    One evaluator call per passage (default; every triple of the passage gets its score) or
    per triple (``unit="triple"``). The system prompt (:data:`CREDIBILITY_SYSTEM`) is the
    same for every call, so a server's prefix cache reuses it; the user turn holds the
    question, the passage's title and text (and the triple, per triple) and the reply must
    end in ``Credibility Score: N``. Parsed by :func:`parse_credibility` (the number after
    "Credibility Score", else the first integer 0..10 of the reply), re-asked up to 3 times
    (:func:`rrag_kernels.models.ask_parsed`); an item still unreadable, out of range or whose
    call failed gets :data:`LLM_FALLBACK` = 5, the scale's midpoint (neither trusted nor
    distrusted), recorded in ``CredibilityScores.records`` (not the reference code's sentinel
    12, which lies outside the scale and would have become R > 1).

``"agreement"`` (model-free of LLMs)
    Hypothesis = the sentence a triple was read from (``Triple.sentence`` into
    :func:`rrag_kernels.models.split_sentences` of the passage's ``text``; the triple's own
    text when the index is unknown or the passage has no text). Premises = every sentence of
    every *other* passage (their triples' texts when a passage has no text). The judge gives
    P(entailment) and P(contradiction) per pair; per other passage q, e_q / c_q = the largest
    over its sentences, counted only above a confidence ``threshold`` tau (default 0.5) and
    rescaled, ``max(e_q - tau, 0) / (1 - tau)``, so the small probabilities a judge gives
    unrelated pairs do not pile up over many passages. With S = sum_q e_q and C = sum_q c_q::

        credibility = 10 * (1 + S) / (2 + S + C)

    a Laplace-smoothed share of support among support + contradiction: 5 with no evidence
    either way, towards 10 when other passages entail it, towards 0 when they contradict it.
    The judge defaults to the package's default NLI judge (:func:`rrag_kernels.models.nli.load`
    with no name: the packaged ONNX model when onnxruntime is installed, else LexicalNLI).
    Measured on the 30 dev questions (713 triples, 204 injected), pooled ROC-AUC: packaged
    judge 0.61 (first 10 questions; ~5 s a question on a loaded 2-core machine), LexicalNLI
    0.50 (chance; 0.01 s a question). Agreement cannot beat a coordinated attack: the two
    injected passages of a question support each other and both contradict the gold one.
    One ``predict_proba`` call per question.

ROC-AUC (:func:`roc_auc`, :func:`credibility_auc`)
    The probability that a random non-injected triple gets a higher credibility than a random
    injected one, ties counting one half: the Mann-Whitney U statistic from average ranks,
    ``(sum of the positives' ranks - n_pos (n_pos + 1) / 2) / (n_pos n_neg)``. 1.0 = the
    source separates them perfectly, 0.5 = chance (a constant source scores exactly 0.5).
"""

from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from ...models import ask_parsed, checked_predict, nli, parse_int, split_sentences
from ...ops import check_choice, check_int, check_real
from .chains import CREDIBILITY_SOURCES, Triple, credibility

logger = logging.getLogger("rrag_kernels")

#: The value an ``"llm"`` item gets when no reply could be read (the scale's midpoint).
LLM_FALLBACK = 5

#: The evaluator's system prompt (identical across calls, so a prefix cache hits).
CREDIBILITY_SYSTEM = (
    "You are a fact-checking evaluator. You are given a question and one retrieved passage. "
    "Rate how credible the passage is as a source of true, accurate information: 0 means it is "
    "certainly false or misleading, 10 means it is certainly true and reliable. Use what you know "
    "about the world: a passage that states facts you know to be wrong deserves a low score, even "
    "when it looks authoritative. Think briefly, then end your reply with a line of the form\n"
    "Credibility Score: N\n"
    "where N is a whole number from 0 to 10."
)

_LABELLED = re.compile(r"credibility\s*score\s*[:=\-]?\s*\**\s*([-+]?\d+(?:\.\d+)?)", re.IGNORECASE)


def parse_credibility(text: str) -> int:
    """The score in an evaluator's reply.

    The last ``Credibility Score: N`` of the reply (case-insensitive, ``:`` / ``=`` optional)
    when there is one, else the first whole number in [0, 10] (:func:`parse_int`).

    Raises
    ------
    ValueError
        The labelled number is not a whole number in [0, 10], or there is no label and no
        integer in range.
    """
    found = _LABELLED.findall(text)
    if found:
        raw = found[-1]
        if "." in raw and float(raw) != int(float(raw)):
            raise ValueError(f"the credibility score {raw} is not a whole number")
        value = int(float(raw))
        if not 0 <= value <= 10:
            raise ValueError(f"the credibility score {value} is outside [0, 10]")
        return value
    return parse_int(text, 0, 10)


@dataclass
class CredibilityScores:
    """Credibility of each triple with the record of how it was obtained.

    Attributes
    ----------
    scores : ndarray, shape (T,), float64 in [0, 10]
    source : str
    records : list of dict
        Per item asked (``"llm"``: a passage or a triple; ``"agreement"``: a triple):
        ``{"item", "value", "fallback_used", "attempts", "errors"}`` for ``"llm"``,
        ``{"item", "support", "contradiction", "value"}`` for ``"agreement"``.
    fallbacks : int
        Items that got :data:`LLM_FALLBACK`.
    calls : int
        LLM calls made (0 for ``"agreement"``).
    seconds : float
        Wall time.
    """

    scores: np.ndarray
    source: str
    records: list[dict[str, Any]] = field(default_factory=list)
    fallbacks: int = 0
    calls: int = 0
    seconds: float = 0.0


def _passage_prompt(question: str, passage: Mapping[str, Any], triple: Triple | None) -> list[dict[str, str]]:
    title = str(passage.get("title") or "").strip()
    text = str(passage.get("text") or "").strip()
    if not text:  # a passage known only by its triples
        text = "; ".join(f"{t.get('head')} {t.get('relation')} {t.get('tail')}"
                         for t in passage.get("triples") or () if isinstance(t, Mapping))
    user = f"Question: {question}\n"
    if title:
        user += f"Title: {title}\n"
    user += f"Passage: {text}\n"
    if triple is not None:
        user += f"Claim taken from the passage: {triple.text}\nRate the credibility of this claim.\n"
    user += "Reply with your reasoning in one sentence, then 'Credibility Score: N'."
    return [{"role": "system", "content": CREDIBILITY_SYSTEM}, {"role": "user", "content": user}]


def llm_credibility(question: str, passages: Sequence[Mapping[str, Any]], triples: Sequence[Triple], *,
                    llm: Any = None, unit: str = "passage", fallback: int = LLM_FALLBACK, attempts: int = 3,
                    max_tokens: int = 48, seed: int | None = 0) -> CredibilityScores:
    """The ``"llm"`` source: an evaluator prompt per passage (or per triple).

    Parameters
    ----------
    question : str
    passages : sequence of dict
        With ``text`` (and ``title`` when known).
    triples : sequence of Triple
    llm : LLM
        Required.
    unit : {"passage", "triple"}
        One call per passage that has triples (every triple of it gets the score), or one
        per triple.
    fallback : int in [0, 10]
        The score of an item with no readable reply (default 5).
    attempts : int
        Calls per item at most.
    max_tokens : int
        Per call.
    seed : int or None

    Returns
    -------
    CredibilityScores
        Never raises for what the LLM does (errors and unreadable replies are recorded).
    """
    if llm is None or not callable(getattr(llm, "chat", None)):
        raise ValueError("credibility='llm' needs llm= (an object with chat(messages, ...))")
    check_choice(unit, "unit", ("passage", "triple"))
    check_int(fallback, "fallback", minimum=0, maximum=10)
    t0 = time.perf_counter()
    scores = np.full(len(triples), float(fallback))
    records: list[dict[str, Any]] = []
    calls = 0
    if unit == "passage":
        items = [(p, None, [i for i, t in enumerate(triples) if t.passage == p])
                 for p in sorted({t.passage for t in triples})]
    else:
        items = [(t.passage, t, [i]) for i, t in enumerate(triples)]
    for p, triple, members in items:
        res = ask_parsed(llm, _passage_prompt(question, passages[p], triple), parse_credibility,
                         fallback=fallback, attempts=attempts, what="a credibility score in [0, 10]",
                         instruction="End your reply with 'Credibility Score: N', N a whole number from 0 to 10.",
                         max_tokens=max_tokens, temperature=0.0, seed=seed)
        calls += res.attempts
        scores[members] = float(res.value)
        records.append({"item": {"passage": p} if triple is None else {"passage": p, "triple": members[0]},
                        "value": int(res.value), "fallback_used": res.fallback_used, "attempts": res.attempts,
                        "errors": list(res.errors)})
    return CredibilityScores(scores, "llm", records, sum(r["fallback_used"] for r in records), calls,
                             time.perf_counter() - t0)


def _sentences_of(passage: Mapping[str, Any], own: Sequence[Triple]) -> list[str]:
    text = passage.get("text")
    if isinstance(text, str) and text.strip():
        return split_sentences(text)
    return [t.text for t in own]


_DEFAULT_JUDGE: list[Any] = []


def _default_judge() -> Any:
    """``nli.load()``, loaded once per process."""
    if not _DEFAULT_JUDGE:
        _DEFAULT_JUDGE.append(nli.load())
    return _DEFAULT_JUDGE[0]


def agreement_credibility(question: str, passages: Sequence[Mapping[str, Any]], triples: Sequence[Triple], *,
                          judge: Any = None, threshold: float = 0.5) -> CredibilityScores:
    """The ``"agreement"`` source: support minus contradiction by the other passages (see
    the module docstring for the formula).

    Parameters
    ----------
    question : str
        Unused (the agreement is between passages).
    passages : sequence of dict
    triples : sequence of Triple
    judge : NLIScorer, str or None
        An NLI scorer (``labels``, ``predict_proba``), a name for
        :func:`rrag_kernels.models.nli.load` (``"lexical"``: model-free), or None for the
        package's default judge (``nli.load()``).
    threshold : float in [0, 1)
        Per-passage evidence below it counts as none.

    Returns
    -------
    CredibilityScores
        ``records[i]`` for triple i: ``support`` S, ``contradiction`` C, ``value``.
    """
    t0 = time.perf_counter()
    tau = check_real(threshold, "threshold")
    if not 0.0 <= tau < 1.0:
        raise ValueError(f"threshold: must satisfy 0 <= threshold < 1, got {tau}")
    if judge is None:
        judge = _default_judge()
    elif isinstance(judge, str):
        judge = nli.load(judge)
    labels = tuple(judge.labels)
    ent, con = labels.index("entailment"), labels.index("contradiction")
    by_passage: dict[int, list[Triple]] = {}
    for t in triples:
        by_passage.setdefault(t.passage, []).append(t)
    sents = {p: _sentences_of(passages[p], by_passage.get(p, [])) for p in range(len(passages))}
    hyp_of: list[str] = []
    for t in triples:
        own = sents[t.passage] if isinstance(passages[t.passage].get("text"), str) else []
        hyp_of.append(own[t.sentence] if 0 <= t.sentence < len(own) else t.text)
    # unique (passage, hypothesis) pairs, each against every sentence of every other passage
    keys = list(dict.fromkeys((t.passage, h) for t, h in zip(triples, hyp_of)))
    premises, hypotheses, owners = [], [], []
    for k, (p, h) in enumerate(keys):
        for q in range(len(passages)):
            if q == p:
                continue
            for s in sents[q]:
                premises.append(s)
                hypotheses.append(h)
                owners.append((k, q))
    support = np.zeros(len(keys))
    contra = np.zeros(len(keys))
    if premises:
        probs = checked_predict(judge, premises, hypotheses, name="judge")
        best: dict[tuple[int, int], list[float]] = {}
        for (k, q), row in zip(owners, probs):
            cur = best.setdefault((k, q), [0.0, 0.0])
            cur[0] = max(cur[0], row[ent])
            cur[1] = max(cur[1], row[con])
        for (k, _q), (e, c) in best.items():
            support[k] += max(e - tau, 0.0) / (1.0 - tau)
            contra[k] += max(c - tau, 0.0) / (1.0 - tau)
    value = 10.0 * (1.0 + support) / (2.0 + support + contra)
    index = {key: k for k, key in enumerate(keys)}
    scores = np.array([value[index[(t.passage, h)]] for t, h in zip(triples, hyp_of)], dtype=np.float64)
    records = [{"item": {"triple": i, "passage": t.passage}, "support": float(support[index[(t.passage, h)]]),
                "contradiction": float(contra[index[(t.passage, h)]]), "value": float(scores[i])}
               for i, (t, h) in enumerate(zip(triples, hyp_of))]
    return CredibilityScores(np.clip(scores, 0.0, 10.0), "agreement", records, 0, 0, time.perf_counter() - t0)


def score_credibility(question: str, passages: Sequence[Mapping[str, Any]], triples: Sequence[Triple], *,
                      source: Any = "oracle", **options: Any) -> CredibilityScores:
    """Any registered source as a :class:`CredibilityScores` (``"llm"`` and ``"agreement"``
    with their records; the others with none). Validated by :func:`.chains.credibility`."""
    t0 = time.perf_counter()
    if isinstance(source, str) and source == "llm":
        out = llm_credibility(question, passages, triples, **options)
    elif isinstance(source, str) and source == "agreement":
        out = agreement_credibility(question, passages, triples, **options)
    else:
        name = source if isinstance(source, str) else getattr(source, "__name__", "custom")
        return CredibilityScores(credibility(question, passages, triples, source=source, **options), name,
                                 seconds=time.perf_counter() - t0)
    out.scores = credibility(question, passages, triples, source=lambda *_: out.scores)  # the same range checks
    return out


CREDIBILITY_SOURCES["llm"] = llm_credibility
CREDIBILITY_SOURCES["agreement"] = agreement_credibility


# --------------------------------------------------------------------------- ROC-AUC


def _average_ranks(x: np.ndarray) -> np.ndarray:
    """1-based ranks of ``x``, ties sharing the mean of their ranks."""
    order = np.argsort(x, kind="stable")
    sorted_x = x[order]
    ranks = np.empty(x.size, dtype=np.float64)
    starts = np.flatnonzero(np.r_[True, sorted_x[1:] != sorted_x[:-1]])
    ends = np.r_[starts[1:], x.size]
    mean_rank = (starts + ends + 1) / 2.0  # mean of starts+1 .. ends
    ranks[order] = np.repeat(mean_rank, ends - starts)
    return ranks


def roc_auc(scores: Any, positive: Any) -> float:
    """ROC-AUC of ``scores`` for telling ``positive`` items from the others.

    Parameters
    ----------
    scores : array, shape (n,), finite
    positive : bool array, shape (n,)

    Returns
    -------
    float
        P(score of a random positive > score of a random negative) + 0.5 P(equal), from
        average ranks; NaN when either class is empty.

    Raises
    ------
    ValueError
        Shapes differ or a score is not finite.
    """
    s = np.asarray(scores, dtype=np.float64).ravel()
    pos = np.asarray(positive, dtype=bool).ravel()
    if s.shape != pos.shape:
        raise ValueError(f"positive: expected shape {s.shape}, got {pos.shape}")
    if not np.isfinite(s).all():
        raise ValueError("scores: must be finite")
    n_pos = int(pos.sum())
    n_neg = s.size - n_pos
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    ranks = _average_ranks(s)
    return float((ranks[pos].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg))


def credibility_auc(rows: Sequence[Mapping[str, Any]], sources: Mapping[str, Mapping[str, Any]], *,
                    progress: bool = False) -> dict[str, dict[str, float]]:
    """ROC-AUC of each credibility source against the injected labels, triples pooled over
    questions (all passages of each question kept, supplied triples).

    Parameters
    ----------
    rows : sequence of question dicts (``question``, ``passages`` with ``triples`` and ``label``)
    sources : mapping
        ``name -> {"source": <name or callable>, **options}``, e.g.
        ``{"oracle": {"source": "oracle"}, "agreement": {"source": "agreement", "judge": j}}``.
    progress : bool

    Returns
    -------
    dict
        ``name -> {"auc", "n_triples", "n_injected", "fallbacks", "seconds", "per_question_auc"}``
        (``per_question_auc``: the mean of the per-question AUCs).
    """
    from .._progress import progress_iter
    from .chains import triples_from_passages

    out = {}
    for name, spec in sources.items():
        spec = dict(spec)
        source = spec.pop("source", name)
        all_s, all_pos, per_q, fallbacks, seconds = [], [], [], 0, 0.0
        for row in progress_iter(list(rows), enabled=progress, desc=f"credibility {name}", unit="question"):
            passages = row["passages"]
            triples = triples_from_passages(passages)
            res = score_credibility(row["question"], passages, triples, source=source, **spec)
            clean = np.array([passages[t.passage].get("label") != "injected" for t in triples], dtype=bool)
            all_s.append(res.scores)
            all_pos.append(clean)
            fallbacks += res.fallbacks
            seconds += res.seconds
            auc = roc_auc(res.scores, clean)
            if np.isfinite(auc):
                per_q.append(auc)
        s, pos = np.concatenate(all_s), np.concatenate(all_pos)
        out[name] = {"auc": roc_auc(s, pos), "n_triples": int(s.size), "n_injected": int((~pos).sum()),
                     "fallbacks": fallbacks, "seconds": seconds,
                     "per_question_auc": float(np.mean(per_q)) if per_q else float("nan")}
    return out


def format_auc(report: Mapping[str, Mapping[str, float]]) -> str:
    """The table of :func:`credibility_auc`."""
    lines = [f"{'source':<12} {'ROC-AUC':>7}  {'per-q':>6}  {'triples':>7}  {'injected':>8}  {'fallbacks':>9}  {'s':>6}"]
    for name, m in report.items():
        lines.append(f"{name:<12} {m['auc']:>7.3f}  {m['per_question_auc']:>6.3f}  {m['n_triples']:>7d}  "
                     f"{m['n_injected']:>8d}  {m['fallbacks']:>9d}  {m['seconds']:>6.1f}")
    return "\n".join(lines)
