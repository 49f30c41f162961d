"""ReliableRAG end to end: triples -> credibility -> chains -> TBS / SBS context -> reader.

:func:`answer` runs one question and returns a :class:`RAGAnswer` (the answer, the chains,
the context, the LLM calls and tokens, the time split and every fallback taken);
:func:`answer_batch` runs many, one failure never sinking the others (count in = count out).

Contexts
    ``"tbs"`` (triple-based): :func:`.chains.tbs_context`, "head relation tail" strings.
    ``"sbs"`` (sentence/passage-based, :func:`sbs_context`): each triple of each kept chain
    votes for its passage; passages ranked by votes, ties by first appearance (chain order,
    then hop order); the top ``max_passages`` go to the reader as "title: text".
Reader (:data:`READER_SYSTEM`)
    Short-answer prompt; temperature 0, ``max_tokens`` 24, stop at the first newline; the
    answer is the reply with an "Answer:" prefix and surrounding punctuation removed.
Time split
    ``kernels`` (``triple_reliability`` + ``beam_step``), ``embedder`` (``encode`` calls),
    ``llm`` (chat calls, as the caller waited), ``other`` (the rest: Python glue, the NLI
    judge of ``"agreement"``).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from ...models import Embedder
from ...ops import check_choice, check_int
from .._items import check_item, check_passages, check_question
from .._progress import progress_iter
from .chains import Chain, ChainParams, Triple, build_chains, get_selector, tbs_context, triples_from_passages
from .sources import score_credibility
from .extraction import extract_triples

READER_SYSTEM = (
    "Answer the question using the knowledge given. Reply with only the answer, a short phrase of a few words, "
    "with no explanation."
)
CONTEXTS = ("tbs", "sbs", "passages")


class _TimedLLM:
    """Counts calls, tokens and waiting time of the chat calls made through it."""

    def __init__(self, llm: Any):
        self.llm, self.calls, self.prompt_tokens, self.completion_tokens, self.seconds = llm, 0, 0, 0, 0.0
        self.failures = 0

    def chat(self, messages: Sequence[Mapping[str, Any]], **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        self.calls += 1
        try:
            res = self.llm.chat(messages, **kwargs)
        except BaseException:
            self.failures += 1
            self.seconds += time.perf_counter() - t0
            raise
        self.seconds += time.perf_counter() - t0
        self.prompt_tokens += int(res.prompt_tokens or 0)
        self.completion_tokens += int(res.completion_tokens or 0)
        return res


class _TimedEmbedder:
    def __init__(self, embedder: Embedder):
        self.embedder, self.seconds = embedder, 0.0

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        t0 = time.perf_counter()
        try:
            emb = self.embedder.encode(texts)
        finally:
            self.seconds += time.perf_counter() - t0
        shape = tuple(getattr(emb, "shape", None) or np.shape(emb))  # arrays and tensors are passed on as they are
        if len(shape) != 2 or shape[0] != len(texts):  # else a kernel reports it under its own argument names
            raise ValueError(f"embedder: encode returned shape {shape} for {len(texts)} texts, expected ({len(texts)}, d)")
        return emb


@dataclass
class RAGAnswer:
    """One question's result.

    Attributes
    ----------
    answer : str
        "" when ``error`` is set.
    context : list of str
        What the reader saw (triple strings or "title: text" passages).
    context_kind : str
        ``"tbs"``, ``"sbs"`` or ``"passages"`` (a baseline's top-k passages).
    context_passages : list of int
        Passages behind the context (SBS, passages), or the passages of the TBS triples.
    chains : list of Chain
    triples : list of Triple
    credibility : ndarray, shape (T,)
    llm_calls, prompt_tokens, completion_tokens : int
    seconds : dict
        ``{"kernels", "embedder", "llm", "other", "total"}``.
    fallbacks : list of dict
        Every fallback taken: ``{"step", ...}`` (credibility items, extraction passages,
        selector chains, the reader).
    selector_trace : list of dict
    error : str or None
        Why the question failed (then the other fields are what was reached).
    question : str or None
        The question as read (cleaned); None when it could not be read.
    """

    answer: str = ""
    context: list[str] = field(default_factory=list)
    context_kind: str = "tbs"
    context_passages: list[int] = field(default_factory=list)
    chains: list[Chain] = field(default_factory=list)
    triples: list[Triple] = field(default_factory=list)
    credibility: np.ndarray = field(default_factory=lambda: np.zeros(0))
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: dict[str, float] = field(default_factory=dict)
    fallbacks: list[dict[str, Any]] = field(default_factory=list)
    selector_trace: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    question: str | None = None

    def to_record(self) -> dict[str, Any]:
        """The plain record every shell writes (pipelines/_items.py, the method contract):
        ``{"question", "answer", "context_kind", "context", "context_passages", "chains":
        [{"triples": [str], "score", "finished"}], "credibility", "llm_calls",
        "prompt_tokens", "completion_tokens", "seconds", "fallbacks"}``, or for a failed
        question ``{"error", "question"}``."""
        if self.error is not None:
            return {"error": self.error, "question": self.question}
        return {"question": self.question, "answer": self.answer, "context_kind": self.context_kind,
                "context": list(self.context), "context_passages": [int(p) for p in self.context_passages],
                "chains": [{"triples": [self.triples[t].text for t in ch.triples], "score": float(ch.score),
                            "finished": bool(ch.finished)} for ch in self.chains],
                "credibility": np.asarray(self.credibility, dtype=np.float64).tolist(),
                "llm_calls": self.llm_calls, "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens, "seconds": dict(self.seconds),
                "fallbacks": list(self.fallbacks)}


def sbs_context(triples: Sequence[Triple], chains: Sequence[Chain], max_passages: int = 3) -> list[int]:
    """SBS: the passages of the chains' triples by votes (one per triple occurrence in a
    chain), ties by first appearance; at most ``max_passages``.

    Returns
    -------
    list of int
        Passage indices.
    """
    check_int(max_passages, "max_passages", minimum=1)
    votes: dict[int, int] = {}
    first: dict[int, int] = {}
    n = 0
    for chain in chains:
        for t in chain.triples:
            p = triples[t].passage
            votes[p] = votes.get(p, 0) + 1
            first.setdefault(p, n)
            n += 1
    ranked = sorted(votes, key=lambda p: (-votes[p], first[p]))
    return ranked[:max_passages]


def passage_text(passage: Mapping[str, Any]) -> str:
    """``"title: text"`` (the text alone without a title)."""
    title = str(passage.get("title") or "").strip()
    text = " ".join(str(passage.get("text") or "").split())
    return f"{title}: {text}" if title else text


def reader_messages(question: str, context: Sequence[str], kind: str) -> list[dict[str, str]]:
    """The reader's prompt: the context as a list of triples or of passages, then the question."""
    if kind == "tbs":
        knowledge = "knowledge triples:\n" + ("\n".join(f"- {c}" for c in context) if context else "(none)")
    else:
        knowledge = "passages:\n" + ("\n".join(f"[{i + 1}] {c}" for i, c in enumerate(context)) if context else "(none)")
    return [{"role": "system", "content": READER_SYSTEM},
            {"role": "user", "content": f"{knowledge}\n\nquestion: {question}\nanswer:"}]


def clean_answer(text: str) -> str:
    """The reply's first line without an "Answer:" prefix or surrounding quotes and marks."""
    line = (text or "").strip().split("\n", 1)[0]
    line = re.sub(r"^\s*(the\s+)?answer\s*(is)?\s*[:\-]?\s*", "", line, flags=re.IGNORECASE)
    return line.strip(" \t*_`'\".,;:")


def read_answer(llm: Any, question: str, context: Sequence[str], kind: str, *, max_tokens: int = 24,
                seed: int | None = 0) -> tuple[str, dict[str, Any] | None]:
    """Ask the reader; ``(answer, fallback record or None)``. An empty or failed reply is
    retried once, then the answer is "" with a fallback record."""
    msgs = reader_messages(question, context, kind)
    errors = []
    for _ in range(2):
        try:
            ans = clean_answer(llm.chat(msgs, max_tokens=max_tokens, temperature=0.0, stop=["\n"], seed=seed).text)
        except Exception as exc:
            errors.append(f"{type(exc).__name__}: {exc}")
            continue
        if ans:
            return ans, None
        errors.append("empty answer")
    return "", {"step": "reader", "errors": errors}


def question_triples(passages: Sequence[Mapping[str, Any]], llm: Any | None, extraction: str
                     ) -> tuple[list[Triple], list[dict[str, Any]]]:
    """The triples of a question's passages: supplied ones (``"supplied"``), LLM-extracted
    ones (``"llm"``), or ``"auto"``: supplied where a passage has ``triples``, extracted for
    the others (an LLM is then required). Returns ``(triples in passage order, extraction
    records)``."""
    check_choice(extraction, "extraction", ("auto", "supplied", "llm"))
    if extraction == "supplied":
        return triples_from_passages(passages), []
    missing = [i for i, p in enumerate(passages) if extraction == "llm" or not p.get("triples")]
    supplied = [t for t in triples_from_passages([{} if i in missing else p for i, p in enumerate(passages)])]
    if not missing:
        return supplied, []
    if llm is None:
        raise ValueError(f"extraction: passages {missing[:5]} have no supplied triples and no llm was given")
    extracted, records = extract_triples(passages, llm, indices=missing)
    merged = sorted(supplied + extracted, key=lambda t: t.passage)  # stable: each passage's order kept
    return merged, records


def answer(question: str, passages: Sequence[Mapping[str, Any]], *, llm: Any, embedder: Embedder,
           credibility: Any = "oracle", credibility_options: Mapping[str, Any] | None = None,
           context: str = "tbs", selector: Any = "llm", params: ChainParams | None = None,
           extraction: str = "auto", max_passages: int = 3, reader_max_tokens: int = 24,
           selector_options: Mapping[str, Any] | None = None) -> RAGAnswer:
    """ReliableRAG on one question.

    Parameters
    ----------
    question : str
    passages : sequence of dict
        ``text`` / ``title`` / ``triples`` (and ``label`` for the oracle).
    llm : LLM
        Reader (and selector, ``"llm"`` credibility, extraction).
    embedder : Embedder
    credibility : str or callable
        A source of :data:`.chains.CREDIBILITY_SOURCES` (``"oracle"``, ``"uniform"``,
        ``"llm"`` -- the same ``llm`` is used --, ``"agreement"``).
    credibility_options : dict, optional
        More source options (``judge=``, ``unit=``, ...).
    context : {"tbs", "sbs"}
    selector : str or ChainSelector
        ``"llm"`` (an :class:`.selector.LLMSelector` on ``llm``), ``"reliability"``, or an object.
    params : ChainParams, optional
    extraction : {"auto", "supplied", "llm"}
    max_passages : int
        SBS passages.
    reader_max_tokens : int
    selector_options : dict, optional
        :class:`.selector.LLMSelector` arguments (``max_prompt_tokens``, ``exemplars``, ...).

    Returns
    -------
    RAGAnswer

    Raises
    ------
    ValueError, TypeError
        Bad arguments (an item that breaks pipelines/_items.py's rules, unknown names, bad
        params). What the LLM does never raises.
    """
    question = check_question(question)
    passages = check_passages(passages, text_required=False)
    check_choice(context, "context", ("tbs", "sbs"))
    params = (params or ChainParams()).validate()
    t_start = time.perf_counter()
    meter, emb = _TimedLLM(llm), _TimedEmbedder(embedder)
    out = RAGAnswer(context_kind=context, question=question)
    timings: dict[str, float] = {"kernels": 0.0}
    try:
        triples, ext_records = question_triples(passages, meter, extraction)
        out.triples = triples
        out.fallbacks += [{"step": "extraction", **r} for r in ext_records if r["fallback_used"]]
        opts = dict(credibility_options or {})
        if isinstance(credibility, str) and credibility == "llm":
            opts.setdefault("llm", meter)
        cred = score_credibility(question, passages, triples, source=credibility, **opts)
        out.credibility = cred.scores
        out.fallbacks += [{"step": "credibility", **r} for r in cred.records if r.get("fallback_used")]
        if isinstance(selector, str):
            sel = get_selector(selector, llm=meter, **dict(selector_options or {})) if selector == "llm" \
                else get_selector(selector)
        else:
            sel = selector
        res = build_chains(question, triples, cred.scores, emb, params=params, selector=sel, timings=timings)
        out.chains = res.chains
        out.selector_trace = list(getattr(sel, "trace", []))
        out.fallbacks += [{"step": "selector", "hop": e["hop"], "errors": e["errors"]}
                          for e in out.selector_trace if e.get("fallback_used")]
        if context == "tbs":
            out.context = res.context
            out.context_passages = list(dict.fromkeys(triples[t].passage for t in res.context_triples))
        else:
            out.context_passages = sbs_context(triples, res.chains, max_passages)
            out.context = [passage_text(passages[p]) for p in out.context_passages]
        out.answer, fb = read_answer(meter, question, out.context, context, max_tokens=reader_max_tokens)
        if fb:
            out.fallbacks.append(fb)
    except (ValueError, TypeError):
        raise
    except Exception as exc:  # a backend or embedder failure: reported on the item
        out.error = f"{type(exc).__name__}: {exc}"
    _finish(out, meter, emb, timings, t_start)
    return out


def _finish(out: RAGAnswer, meter: _TimedLLM, emb: _TimedEmbedder, timings: Mapping[str, float],
            t_start: float) -> None:
    total = time.perf_counter() - t_start
    out.llm_calls, out.prompt_tokens, out.completion_tokens = meter.calls, meter.prompt_tokens, meter.completion_tokens
    k = timings.get("kernels", 0.0)
    out.seconds = {"kernels": k, "embedder": emb.seconds, "llm": meter.seconds,
                   "other": max(total - k - emb.seconds - meter.seconds, 0.0), "total": total}


def vanilla_answer(question: str, passages: Sequence[Mapping[str, Any]], *, llm: Any, embedder: Embedder,
                   k: int = 3, exclude: np.ndarray | None = None, reader_max_tokens: int = 24) -> RAGAnswer:
    """Baseline: the top-``k`` passages by cosine(question, "title: text") to the reader.

    Parameters
    ----------
    exclude : bool array, shape (n_passages,), optional
        Passages left out first (the credibility-exclusion baseline).
    """
    check_int(k, "k", minimum=1)
    t_start = time.perf_counter()
    meter, emb = _TimedLLM(llm), _TimedEmbedder(embedder)
    out = RAGAnswer(context_kind="passages")
    try:
        keep = [i for i in range(len(passages)) if exclude is None or not exclude[i]]
        if keep:
            vecs = np.asarray(emb.encode([question] + [passage_text(passages[i]) for i in keep]), dtype=np.float64)
            vecs /= np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)
            sims = vecs[1:] @ vecs[0]
            order = np.argsort(-sims, kind="stable")[:k]
            out.context_passages = [keep[i] for i in order]
        out.context = [passage_text(passages[i]) for i in out.context_passages]
        out.answer, fb = read_answer(meter, question, out.context, "passages", max_tokens=reader_max_tokens)
        if fb:
            out.fallbacks.append(fb)
    except Exception as exc:
        out.error = f"{type(exc).__name__}: {exc}"
    _finish(out, meter, emb, {}, t_start)
    return out


def answer_batch(rows: Sequence[Mapping[str, Any]], *, progress: bool = False, **kwargs: Any) -> list[RAGAnswer]:
    """:func:`answer` for each ``{"question", "passages"}`` item (pipelines/_items.py); an
    item that raises (it breaks the input rules, a backend fails) gets a :class:`RAGAnswer`
    with ``error`` set, so the output has one result per item, in order. ``progress``: a
    tqdm bar when tqdm is installed."""
    out = []
    for row in progress_iter(list(rows), enabled=progress, desc="reliablerag", unit="question"):
        try:
            item = check_item(row, text_required=False)
            out.append(answer(item.question, item.passages, **kwargs))
        except Exception as exc:
            question = row.get("question") if isinstance(row, Mapping) else None
            out.append(RAGAnswer(error=f"{type(exc).__name__}: {exc}",
                                 question=question if isinstance(question, str) else None))
    return out


#: The keyword options of :func:`answer` besides the question, passages and backends.
ANSWER_OPTIONS = ("credibility", "credibility_options", "context", "selector", "params", "extraction",
                  "max_passages", "reader_max_tokens", "selector_options")


def check_answer_options(options: Mapping[str, Any]) -> None:
    """Refuse, before any question runs, options :func:`answer` would refuse on every one.

    Raises
    ------
    TypeError
        An unknown option (naming it); ``params`` that is not a :class:`ChainParams`.
    ValueError
        A ``context`` other than ``"tbs"`` / ``"sbs"``; ``params`` that do not validate.
    """
    unknown = sorted(set(options) - set(ANSWER_OPTIONS))
    if unknown:
        raise TypeError(f"{unknown[0]}: not an option of reliablerag answer() (options: {', '.join(ANSWER_OPTIONS)})")
    if "context" in options and options["context"] not in ("tbs", "sbs"):
        raise ValueError(f"context: expected one of ('tbs', 'sbs'), got {options['context']!r}")
    if options.get("params") is not None:
        if not isinstance(options["params"], ChainParams):
            raise TypeError(f"params: expected a ChainParams, got {type(options['params']).__name__}")
        options["params"].validate()


class ReliableRAG:
    """ReliableRAG under the method contract (pipelines/_items.py): the backends and options
    once, then :meth:`run_batch` over items, as the other three methods.

    Parameters
    ----------
    llm : LLM
    embedder : Embedder
    **options
        Any keyword argument of :func:`answer` (``credibility``, ``context``, ``selector``,
        ``params``, ...; :data:`ANSWER_OPTIONS`, checked by :func:`check_answer_options`).
    """

    def __init__(self, llm: Any, embedder: Embedder, **options: Any):
        check_answer_options(options)  # a wrong option is one error now, not one per item
        self.llm, self.embedder, self.options = llm, embedder, dict(options)

    def answer(self, question: str, passages: Sequence[Mapping[str, Any]]) -> RAGAnswer:
        """:func:`answer` on one question."""
        return answer(question, passages, llm=self.llm, embedder=self.embedder, **self.options)

    def run_batch(self, items: Sequence[Mapping[str, Any]], *, progress: bool = False) -> list[RAGAnswer]:
        """:func:`answer_batch`: one :class:`RAGAnswer` per item, in order, errors in place."""
        return answer_batch(items, progress=progress, llm=self.llm, embedder=self.embedder, **self.options)
