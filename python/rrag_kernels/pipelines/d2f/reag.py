"""D2F-ReAG: retrieve, reason, judge; decompose what is not solved; feed sub-answers forward.

The method (after ljy1228/thinkrag, ``LogicRAG.answer_question_dynamic``):

1. The root node holds the question. A node is processed by retrieving the top ``k``
   passages for its question, asking the LLM for a reasoning over them, and asking a judge
   LLM for an integer 0-10: whether the reasoning answers the question grounded in the
   passages (3 or less when they lack the information). reliability = score / 10; the node
   is **solved** iff reliability >= ``threshold`` (0.7, the authors' code).
2. A solved root ends the search. An unsolved node below ``max_depth`` is decomposed into at
   most ``max_branch`` sub-questions, which join the frontier (a FIFO queue for
   ``order="bfs"``, the reference's; a LIFO stack for ``order="dfs"``, first child first).
3. After each solved sub-question, one LLM call picks which remembered questions its answer
   helps: the candidates are the unsolved root and the pending (not yet processed) nodes.
   The root's reasoning is updated with the sub-answer (an LLM call) and the root is judged
   again; the search stops as soon as the root is reliable (early stop). Every other picked
   node has its question rewritten with the sub-answer (an LLM call) before it is processed.
4. The search ends when the root is solved, the frontier is empty, or the budget binds; a
   final call turns the root's reasoning (with the solved sub-questions' findings) into a
   short answer.

What this adds to the reference, and where it deviates:

* a total budget of LLM calls (``max_calls``, the final answer included: the search keeps one
  call for it) and of tokens (``max_total_tokens``, prompt + completion; checked before each
  call, so the call that crosses it finishes, and the final answer is always made); the
  result says whether and which budget bound;
* the depth-first option;
* the judge's reply is read defensively (first integer 0-10, re-asked up to 3 times in all,
  else score 0 with the fallback recorded on the node) where the reference's ``int(reply)``
  raised; the decomposition (a JSON array, else numbered or bulleted lines) and the picks
  (indices) likewise, with the fallbacks "no sub-questions" and "no picks";
* prompts are concatenated, never formatted (:mod:`.prompts`): braces in passages survive,
  and the final prompt is not spaced out character by character;
* the root's question is never rewritten (it is what the user asked, and what the final
  answer answers); a node at ``max_depth`` is not decomposed (the reference decomposed it and
  dropped the children); the reference's empty "end node" markers are not kept;
* the judge sees the passages the reasoning used (the node's own; for the updated root, the
  root's and those of the sub-answers merged into it), not the reasoning alone.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections import deque
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Mapping, Sequence

from ...models import LLM, ChatResult, DenseRetriever, Embedder, Retriever, ask_int, ask_parsed
from ...ops import check_choice, check_int, check_real
from .._items import check_question
from .._progress import progress_iter
from . import prompts

logger = logging.getLogger("rrag_kernels")

__all__ = [
    "MAX_BRANCH",
    "MAX_DEPTH",
    "ORDERS",
    "STOP_REASONS",
    "D2FError",
    "D2FParams",
    "D2FReAG",
    "D2FResult",
    "Node",
    "build_corpus",
    "corpus_retriever",
    "parse_picks",
    "parse_sub_questions",
    "short_answer",
]

#: Most sub-questions per decomposition (the reference's MAX_BRANCH).
MAX_BRANCH = 3
#: Deepest level processed; the root is level 0 (the reference's MAX_DEPTH).
MAX_DEPTH = 3
#: Frontier orders: breadth first (the reference's queue) or depth first.
ORDERS = ("bfs", "dfs")
#: Why a search ended.
STOP_REASONS = ("root_solved", "root_solved_after_update", "frontier_empty", "budget_calls", "budget_tokens")


# --------------------------------------------------------------------------- parameters


@dataclass(frozen=True)
class D2FParams:
    """Parameters of :class:`D2FReAG`.

    Attributes
    ----------
    k : int
        Passages retrieved per node (>= 1; default 3).
    threshold : float
        A node is solved iff score / 10 >= threshold (in [0, 1]; default 0.7).
    max_depth : int
        Deepest level processed (>= 0; default :data:`MAX_DEPTH`); 0 never decomposes.
    max_branch : int
        Most sub-questions kept per decomposition (>= 1; default :data:`MAX_BRANCH`).
    order : {"bfs", "dfs"}
        Frontier order.
    max_calls : int
        LLM calls per question at most, the final answer included (>= 1; default 60). Each
        attempt of a re-asked step counts.
    max_total_tokens : int or None
        Prompt + completion tokens per question before the search stops (>= 1; None: no
        limit). The final answer is made after it, and may pass it.
    reason_tokens, judge_tokens, decompose_tokens, pick_tokens, rewrite_tokens, answer_tokens : int
        ``max_tokens`` of each step's calls (the root update uses ``reason_tokens``).
    parse_attempts : int
        Calls per structured step (judge, decomposition, picks) before the fallback (>= 1;
        default 3).
    json_mode : bool
        Send ``response_format={"type": "json_object"}`` with the decomposition and pick calls
        (llama.cpp, vLLM, Ollama and OpenAI then constrain the reply to JSON; the prompts ask
        for ``{"sub_questions": [...]}`` and ``{"picks": [...]}``). Default True; False for a
        server that refuses it (the parsers read bare arrays and numbered lines too).
    findings : bool
        Give the final answer step the solved sub-questions' short answers besides the
        root's reasoning (default True; False: the reference's root reasoning alone).
    temperature : float
        Sampling temperature of every call (>= 0; default 0, greedy).
    seed : int or None
        Sampling seed sent with every call.
    """

    k: int = 3
    threshold: float = 0.7
    max_depth: int = MAX_DEPTH
    max_branch: int = MAX_BRANCH
    order: str = "bfs"
    max_calls: int = 60
    max_total_tokens: int | None = 60_000
    reason_tokens: int = 256
    judge_tokens: int = 8
    decompose_tokens: int = 128
    pick_tokens: int = 24
    rewrite_tokens: int = 64
    answer_tokens: int = 32
    parse_attempts: int = 3
    json_mode: bool = True
    findings: bool = True
    temperature: float = 0.0
    seed: int | None = 0

    def validate(self) -> D2FParams:
        """Check every field; return self.

        Raises
        ------
        TypeError, ValueError
            Naming the field.
        """
        check_int(self.k, "k", minimum=1)
        t = check_real(self.threshold, "threshold")
        if not 0.0 <= t <= 1.0:
            raise ValueError(f"threshold: must be in [0, 1], got {t}")
        check_int(self.max_depth, "max_depth", minimum=0)
        check_int(self.max_branch, "max_branch", minimum=1)
        check_choice(self.order, "order", ORDERS)
        check_int(self.max_calls, "max_calls", minimum=1)
        if self.max_total_tokens is not None:
            check_int(self.max_total_tokens, "max_total_tokens", minimum=1)
        for name in ("reason_tokens", "judge_tokens", "decompose_tokens", "pick_tokens", "rewrite_tokens",
                     "answer_tokens", "parse_attempts"):
            check_int(getattr(self, name), name, minimum=1)
        for name in ("json_mode", "findings"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"{name}: expected a bool, got {type(getattr(self, name)).__name__}")
        temp = check_real(self.temperature, "temperature")
        if not temp >= 0.0 or temp == float("inf"):
            raise ValueError(f"temperature: must be finite and >= 0, got {temp}")
        if self.seed is not None:
            check_int(self.seed, "seed", minimum=0)
        return self

    def as_dict(self) -> dict[str, Any]:
        """The fields as a JSON-serialisable dict."""
        return asdict(self)


# --------------------------------------------------------------------------- trace


@dataclass
class Node:
    """One question of the search tree, and everything that happened to it.

    Attributes
    ----------
    id : int
        Creation order (the root is 0).
    level : int
        Depth; the root is 0.
    parent : int or None
        The id of the node it was decomposed from.
    question_original : str
        As created (the user's question, or as the decomposition wrote it).
    question : str
        After the rewrites (the one retrieved and reasoned with).
    rewrites : list of dict
        ``{"by": node id, "before", "after"}`` per rewrite, in order.
    passages : list of str
        Ids of the passages retrieved for it (``pid``, else the corpus index as a str).
    reasoning : str
        The reasoning (for the root, after its updates).
    updates : list of dict
        Root only: ``{"by": node id, "before", "after", "score"}`` per update and re-judge.
    score : int or None
        The judge's last score 0-10 (None: never judged).
    reliability : float or None
        score / 10.
    judge : list of dict
        Every judging of it: :meth:`ParseResult.as_dict <rrag_kernels.models.ParseResult.as_dict>`
        (value, fallback_used, attempts, replies, errors).
    decision : str
        ``"solved"``, ``"decomposed"``, ``"leaf"`` (unsolved and not decomposed: at
        ``max_depth`` or no sub-question came back), ``"unsolved"`` (the search stopped
        before it could be decomposed), ``"pending"`` (never processed).
    children : list of int
    decomposition : dict or None
        The decomposition step's ParseResult (with the sub-questions before the cap).
    picks : list of int
        Ids of the nodes its answer was given to (solved non-root nodes).
    pick_record : dict or None
        The pick step's ParseResult, with ``candidates`` (node ids in the order listed).
    step : int or None
        When it was processed (0 = first; None: never).
    """

    id: int
    level: int
    parent: int | None
    question_original: str
    question: str
    rewrites: list[dict[str, Any]] = field(default_factory=list)
    passages: list[str] = field(default_factory=list)
    reasoning: str = ""
    updates: list[dict[str, Any]] = field(default_factory=list)
    score: int | None = None
    reliability: float | None = None
    judge: list[dict[str, Any]] = field(default_factory=list)
    decision: str = "pending"
    children: list[int] = field(default_factory=list)
    decomposition: dict[str, Any] | None = None
    picks: list[int] = field(default_factory=list)
    pick_record: dict[str, Any] | None = None
    step: int | None = None

    @property
    def fallbacks(self) -> int:
        """Structured replies of this node that fell back (judge, decomposition, picks)."""
        recs = self.judge + [r for r in (self.decomposition, self.pick_record) if r is not None]
        return sum(bool(r.get("fallback_used")) for r in recs)

    def to_dict(self) -> dict[str, Any]:
        """The fields (and ``fallbacks``) as a JSON-serialisable dict."""
        return {**asdict(self), "fallbacks": self.fallbacks}


@dataclass
class D2FResult:
    """The answer to one question and the whole search.

    Attributes
    ----------
    question : str
    answer : str
        The final answer (cleaned: first line, an "Answer:" prefix removed).
    answer_raw : str
        The final call's text.
    nodes : list of Node
        By id; ``nodes[0]`` is the root.
    order : list of int
        Node ids in the order they were processed.
    stop_reason : str
        One of :data:`STOP_REASONS`.
    budget_bound : bool
        The call or token budget stopped the search.
    llm_calls, prompt_tokens, completion_tokens : int
        Over every call of this question (the final answer included).
    retrieval_seconds : float
        Retrieval, the query embedding included.
    llm_seconds : float
        Wall time in LLM calls.
    total_seconds : float
    params : dict
    index : int or None
        Position in a batch.
    """

    question: str
    answer: str
    answer_raw: str
    nodes: list[Node]
    order: list[int]
    stop_reason: str
    budget_bound: bool
    llm_calls: int
    prompt_tokens: int
    completion_tokens: int
    retrieval_seconds: float
    llm_seconds: float
    total_seconds: float
    params: dict[str, Any]
    index: int | None = None

    ok = True

    @property
    def root(self) -> Node:
        """The root node."""
        return self.nodes[0]

    @property
    def max_level(self) -> int:
        """The deepest level processed."""
        return max(self.nodes[i].level for i in self.order) if self.order else 0

    @property
    def decomposed(self) -> bool:
        """Whether the root was decomposed."""
        return bool(self.root.children)

    @property
    def fallbacks(self) -> int:
        """Structured replies that fell back, over all nodes."""
        return sum(n.fallbacks for n in self.nodes)

    def to_dict(self) -> dict[str, Any]:
        """Everything as a JSON-serialisable dict (nodes as :meth:`Node.to_dict`)."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "nodes"}
        out["nodes"] = [n.to_dict() for n in self.nodes]
        out.update(ok=True, max_level=self.max_level, decomposed=self.decomposed, fallbacks=self.fallbacks)
        return out

    error = None  # the method contract (pipelines/_items.py): a result that did not fail

    def to_record(self) -> dict[str, Any]:
        """The plain record every shell writes (pipelines/_items.py): ``{"question", "answer",
        "stop_reason", "budget_bound", "decomposed", "max_level", "llm_calls", "prompt_tokens",
        "completion_tokens", "fallbacks", "retrieval_seconds", "llm_seconds", "total_seconds",
        "trace"}``, ``trace`` being :meth:`to_dict` without the batch position ``index``."""
        trace = self.to_dict()
        trace.pop("index", None)  # the position in one batch call: meaningless to a reader
        return {"question": self.question, "answer": self.answer, "stop_reason": self.stop_reason,
                "budget_bound": self.budget_bound, "decomposed": self.decomposed, "max_level": self.max_level,
                "llm_calls": self.llm_calls, "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens, "fallbacks": self.fallbacks,
                "retrieval_seconds": self.retrieval_seconds, "llm_seconds": self.llm_seconds,
                "total_seconds": self.total_seconds, "trace": trace}


@dataclass
class D2FError:
    """A question of a batch that raised (an :class:`~rrag_kernels.models.LLMError`, a
    timeout, a retriever failure); the other questions' results are unaffected.

    Attributes
    ----------
    index : int
    question : str or None
    error_type : str
        The exception's class name.
    message : str
    """

    index: int
    question: str | None
    error_type: str
    message: str

    ok = False

    def to_dict(self) -> dict[str, Any]:
        """The fields as a JSON-serialisable dict (with ``ok: False``)."""
        return {**asdict(self), "ok": False}

    @property
    def error(self) -> str:
        """``"ErrorType: message"``, as every method's error results say it."""
        return f"{self.error_type}: {self.message}"

    def to_record(self) -> dict[str, Any]:
        """``{"error", "error_type", "question"}`` (pipelines/_items.py)."""
        return {"error": self.error, "error_type": self.error_type, "question": self.question}


# --------------------------------------------------------------------------- parsing

_ARRAY = re.compile(r"\[.*?\]", re.DOTALL)
_LINE_ITEM = re.compile(r"^\s*(?:\d+\s*[.):\]-]|[-*\u2022]|q\d+\s*[.):])\s*(.+?)\s*$", re.IGNORECASE)
_INTS = re.compile(r"(?<![\w.])\d+(?![\w.]\d)")
_NONE_WORDS = re.compile(r"^\W*(none|no|nothing|empty|\[\s*\])\W*$", re.IGNORECASE)
_ANSWER_LINE = re.compile(r"^\s*\**\s*(?:the\s+)?(?:final\s+)?answer(?:\s+is)?\s*\**\s*[:\-]\s*(.+?)\s*$",
                          re.IGNORECASE | re.MULTILINE)


def _clean_item(text: str) -> str:
    return text.strip().strip("\"'`").strip()


def _json_list(text: str) -> list[Any] | None:
    """The first JSON list in a reply (alone, in a code fence, the first ``[...]`` that
    decodes, or the first list value of a JSON object), else None."""
    stripped = text.strip()
    fence = re.search(r"```[a-zA-Z]*\s*(.*?)```", stripped, re.DOTALL)
    brace = stripped.find("{")
    objects = [stripped[brace:stripped.rfind("}") + 1]] if 0 <= brace < stripped.rfind("}") else []
    for cand in [stripped] + ([fence.group(1)] if fence else []) + objects + _ARRAY.findall(stripped):
        try:
            value = json.loads(cand)
        except ValueError:
            continue
        if isinstance(value, dict):
            value = next((v for v in value.values() if isinstance(v, list)), None)
        if isinstance(value, list):
            return value
    return None


def parse_sub_questions(text: str) -> list[str]:
    """Sub-questions from a decomposition reply.

    Parameters
    ----------
    text : str
        A JSON array of strings (alone, in a code fence, or the first ``[...]`` that decodes;
        a JSON object holding one such array also works), else numbered or bulleted lines
        (``1. ...``, ``2) ...``, ``- ...``), else every line that ends with ``?``.

    Returns
    -------
    list of str
        Non-empty, stripped, duplicates removed, in order (not capped); ``[]`` for an
        explicit empty JSON array.

    Raises
    ------
    ValueError
        Nothing readable.
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    candidates = _json_list(text)
    stripped = text.strip()
    if candidates == []:
        return []  # an explicit empty array: nothing to decompose
    items = [_clean_item(v) for v in candidates or () if isinstance(v, str)]
    if not items:
        lines = stripped.splitlines()
        items = [_clean_item(m.group(1)) for m in map(_LINE_ITEM.match, lines) if m]
        if not items:
            items = [_clean_item(line) for line in lines if line.strip().endswith("?")]
    out = list(dict.fromkeys(i for i in items if i))
    if not out:
        raise ValueError("no sub-questions in the reply (expected a JSON array of strings)")
    return out


def parse_picks(text: str, n: int) -> list[int]:
    """1-based indices from a pick reply, as 0-based indices into the ``n`` candidates.

    Parameters
    ----------
    text : str
        ``{"picks": [1, 3]}``, ``[1, 3]``, ``["1", "3"]``, ``1, 3``, ``Questions 1 and 3``;
        an empty JSON list or ``none`` for no pick.
    n : int
        Number of candidates listed.

    Returns
    -------
    list of int
        Sorted, unique, each in ``[0, n)``; integers outside ``1..n`` are ignored.

    Raises
    ------
    ValueError
        No integer in range and no explicit "none".
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    check_int(n, "n", minimum=0)
    if _NONE_WORDS.match(text.strip()):
        return []
    listed = _json_list(text)
    if listed == []:
        return []
    if listed:
        text = " ".join(str(v) for v in listed if isinstance(v, (int, str)) and not isinstance(v, bool))
    found = [int(m.group()) for m in _INTS.finditer(text)]
    picked = sorted({v - 1 for v in found if 1 <= v <= n})
    if not picked:
        if found:
            raise ValueError(f"the numbers in the reply ({', '.join(map(str, found[:5]))}) are not in 1..{n}")
        raise ValueError("no question number in the reply")
    return picked


def short_answer(text: str) -> str:
    """The answer in a reply: what follows the last ``Answer:`` line when there is one, else
    the first non-empty line; surrounding quotes, markdown and a final period removed."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    found = _ANSWER_LINE.findall(text)
    if found:
        line = found[-1]
    else:
        line = next((ln for ln in text.splitlines() if ln.strip()), "")
    line = line.strip().strip("*_`\"'").strip()
    return line[:-1].rstrip() if line.endswith(".") else line


def _clean_rewrite(text: str) -> str:
    line = next((ln for ln in text.splitlines() if ln.strip()), "")
    line = re.sub(r"^\s*(?:rewritten\s+)?question\s*b?\s*[:\-]\s*", "", line, flags=re.IGNORECASE)
    return _clean_item(line)


# --------------------------------------------------------------------------- corpus


def build_corpus(passages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Corpus entries from passage dicts, embedded as ``"title: <title> content: <text>"``.

    Parameters
    ----------
    passages : sequence of dict
        Each with ``text`` (str) and optionally ``title`` and ``pid``; other keys are kept.
        Duplicate ``pid``s keep the first.

    Returns
    -------
    list of dict
        ``pid`` (the given one, else ``"p<n>"``), ``title``, ``content`` (the text as given),
        ``text`` (what is embedded), and the other keys.

    Raises
    ------
    TypeError
        A passage is not a dict or has no str ``text``.
    """
    out, seen = [], set()
    for n, p in enumerate(passages):
        if not isinstance(p, Mapping):
            raise TypeError(f"passages: item {n} must be a dict, got {type(p).__name__}")
        if not isinstance(p.get("text"), str):
            raise TypeError(f"passages: item {n} has no str 'text'")
        pid = str(p["pid"]) if p.get("pid") is not None else f"p{n}"
        if pid in seen:
            continue
        seen.add(pid)
        title = "" if p.get("title") is None else str(p["title"])
        entry = dict(p)
        entry.update(pid=pid, title=title, content=p["text"], text="title: " + title + " content: " + p["text"])
        out.append(entry)
    return out


def corpus_retriever(passages: Sequence[Mapping[str, Any]], embedder: Embedder, *,
                     use_faiss: bool | None = None) -> DenseRetriever:
    """A :class:`~rrag_kernels.models.DenseRetriever` over :func:`build_corpus` entries.

    Parameters
    ----------
    passages : sequence of dict
        See :func:`build_corpus`.
    embedder : Embedder
        E.g. :class:`~rrag_kernels.models.MiniLMEmbedder`.
    use_faiss : bool or None
        None: FAISS ``IndexFlatIP`` when importable, else the ``topk_cosine`` kernel.

    Returns
    -------
    DenseRetriever
    """
    if not hasattr(embedder, "encode"):
        raise TypeError(f"embedder must have encode(texts), got {type(embedder).__name__}")
    return DenseRetriever(build_corpus(passages), embedder, use_faiss=use_faiss)


# --------------------------------------------------------------------------- one question


class _Stop(Exception):
    """Internal: the budget binds; carries the stop reason."""


class _Run:
    """The state of one question: the meter, the budget, the tree."""

    def __init__(self, method: D2FReAG, question: str):
        self.m, self.p = method, method.params
        self.calls = self.prompt_tokens = self.completion_tokens = 0
        self.llm_s = self.retrieval_s = 0.0
        self.nodes = [Node(0, 0, None, question, question)]
        self.order: list[int] = []
        self.passages: dict[int, list[dict[str, Any]]] = {}
        self.root_passages: list[dict[str, Any]] = []

    # -- metering: every chat call of this question goes through chat() --------------
    def chat(self, messages, *, llm: LLM | None = None, **kw) -> ChatResult:
        t0 = time.perf_counter()
        self.calls += 1
        try:
            res = (llm or self.m.llm).chat(messages, **kw)
        finally:
            self.llm_s += time.perf_counter() - t0
        self.prompt_tokens += int(res.prompt_tokens or 0)
        self.completion_tokens += int(res.completion_tokens or 0)
        return res

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def allow(self, n: int = 1, *, need: int = 1) -> int:
        """How many of ``n`` calls the search may make now (at least ``need``), else raise _Stop."""
        if self.p.max_total_tokens is not None and self.tokens >= self.p.max_total_tokens:
            raise _Stop("budget_tokens")
        left = self.p.max_calls - 1 - self.calls  # one call kept for the final answer
        if left < need:
            raise _Stop("budget_calls")
        return min(n, left)

    def _kw(self, max_tokens: int) -> dict[str, Any]:
        return {"max_tokens": max_tokens, "temperature": self.p.temperature, "seed": self.p.seed}

    def text(self, messages, max_tokens: int) -> str:
        self.allow(1)
        return self.chat(messages, **self._kw(max_tokens)).text.strip()

    def judge(self, node: Node, passages) -> int:
        attempts = self.allow(self.p.parse_attempts)
        res = ask_int(_Proxy(self, self.m.judge_llm), prompts.judge_messages(node.question, passages, node.reasoning),
                      low=0, high=10, fallback=0, attempts=attempts, max_tokens=self.p.judge_tokens,
                      temperature=self.p.temperature, seed=self.p.seed)
        node.judge.append(res.as_dict())
        if res.fallback_used:
            logger.debug("judge reply unreadable for node %d after %d attempts: score 0", node.id, res.attempts)
        node.score = int(res.value)
        node.reliability = node.score / 10.0
        return node.score

    def solved(self, node: Node) -> bool:
        return node.reliability is not None and node.reliability >= self.p.threshold - 1e-12

    def retrieve(self, query: str) -> list[dict[str, Any]]:
        t0 = time.perf_counter()
        try:
            hits = list(self.m.retriever.search(query, self.p.k))
        finally:
            self.retrieval_s += time.perf_counter() - t0
        return hits[: self.p.k]


class _Proxy:
    """An LLM that meters through a _Run (for the ask_* helpers)."""

    def __init__(self, run: _Run, llm: LLM | None = None):
        self.run, self.llm = run, llm

    def chat(self, messages, **kw) -> ChatResult:
        return self.run.chat(messages, llm=self.llm, **kw)


def _pid(p: Mapping[str, Any], n: int) -> str:
    return str(p["pid"]) if p.get("pid") is not None else str(n)


class D2FReAG:
    """D2F-ReAG over a corpus (see the module docstring for the method).

    Parameters
    ----------
    llm : LLM
        Reasoning, judge, decomposition, picks, rewrites and the answer (one model for all;
        pass ``judge_llm`` to judge with another).
    retriever : Retriever
        ``search(query, k) -> list of passage dicts`` (``title``/``content`` or ``text``,
        ``pid``); :func:`corpus_retriever` builds one from passages and an embedder.
    params : D2FParams, optional
    judge_llm : LLM, optional
        The judge (default ``llm``).

    Examples
    --------
    >>> method = D2FReAG(llm, corpus_retriever(passages, MiniLMEmbedder()))  # doctest: +SKIP
    >>> result = method.answer("In which country was the director of Pan's Labyrinth born?")  # doctest: +SKIP
    >>> result.answer, result.stop_reason, result.llm_calls  # doctest: +SKIP
    """

    def __init__(self, llm: LLM, retriever: Retriever, params: D2FParams | None = None, *,
                 judge_llm: LLM | None = None):
        for name, obj in (("llm", llm), ("judge_llm", judge_llm)):
            if obj is not None and not callable(getattr(obj, "chat", None)):
                raise TypeError(f"{name} must have a chat(messages, ...) method, got {type(obj).__name__}")
        if not callable(getattr(retriever, "search", None)):
            raise TypeError(f"retriever must have a search(query, k) method, got {type(retriever).__name__}")
        if params is None:
            params = D2FParams()
        if not isinstance(params, D2FParams):
            raise TypeError(f"params must be a D2FParams, got {type(params).__name__}")
        self.llm, self.retriever, self.params = llm, retriever, params.validate()
        self.judge_llm = judge_llm

    # ----------------------------------------------------------------------- public
    def answer(self, question: str) -> D2FResult:
        """Answer one question.

        Parameters
        ----------
        question : str
            Non-empty.

        Returns
        -------
        D2FResult

        Raises
        ------
        TypeError, ValueError
            ``question`` is not a non-empty str.
        LLMError
            A free-text call (reasoning, rewrite, update, answer) failed; structured calls
            (judge, decomposition, picks) record failures and fall back instead.
        """
        question = check_question(question)
        t0 = time.perf_counter()
        run = _Run(self, question)
        try:
            stop = self._search(run)
        except _Stop as s:
            stop = str(s)
        root = run.nodes[0]
        for node in run.nodes:
            if node.decision == "pending" and node.step is not None:
                node.decision = "unsolved"
        findings = []
        if self.params.findings:
            findings = [(n.question, short_answer(n.reasoning)) for n in run.nodes
                        if n.id and n.decision == "solved" and n.reasoning]
        passages: list[dict[str, Any]] = []
        if not root.reasoning:  # the budget bound before the root was reasoned: answer from passages
            passages = run.root_passages or run.retrieve(question)
        msgs = prompts.answer_messages(question, root.reasoning, passages, findings)
        raw = run.chat(msgs, max_tokens=self.params.answer_tokens, temperature=self.params.temperature,
                       seed=self.params.seed).text
        result = D2FResult(
            question=question, answer=short_answer(raw), answer_raw=raw, nodes=run.nodes, order=run.order,
            stop_reason=stop, budget_bound=stop.startswith("budget"), llm_calls=run.calls,
            prompt_tokens=run.prompt_tokens, completion_tokens=run.completion_tokens,
            retrieval_seconds=run.retrieval_s, llm_seconds=run.llm_s, total_seconds=time.perf_counter() - t0,
            params=self.params.as_dict())
        logger.debug("d2f: %r -> %r (%s, %d calls, %d nodes)", question, result.answer, stop, run.calls, len(run.order))
        return result

    def run_batch(self, questions: Sequence[str], *, progress: bool = False) -> list[D2FResult | D2FError]:
        """Answer many questions; one that raises becomes a :class:`D2FError` in its place.

        Parameters
        ----------
        questions : sequence of str or of mapping
            Questions, or items ``{"question", ...}`` (pipelines/_items.py; other keys
            are not read: D2F retrieves its own passages).
        progress : bool
            A progress bar (tqdm, when installed).

        Returns
        -------
        list of D2FResult or D2FError
            One per question, in order (``index`` set); ``item.ok`` tells them apart.

        Raises
        ------
        TypeError
            ``questions`` is a str or not a sequence.
        """
        if isinstance(questions, (str, bytes)) or not isinstance(questions, Sequence):
            raise TypeError(f"questions must be a list of str, got {type(questions).__name__}")
        out: list[D2FResult | D2FError] = []
        for i, q in enumerate(progress_iter(list(questions), enabled=progress, desc="d2f", unit="question")):
            if isinstance(q, Mapping):  # an item of the method contract (pipelines/_items.py)
                q = q.get("question")
            try:
                res = self.answer(q)
            except Exception as exc:  # per-item isolation: record it, go on
                logger.warning("d2f: question %d failed: %s: %s", i, type(exc).__name__, exc)
                out.append(D2FError(i, q if isinstance(q, str) else None, type(exc).__name__, str(exc)))
                continue
            res.index = i
            out.append(res)
        return out

    # ----------------------------------------------------------------------- search
    def _search(self, run: _Run) -> str:
        p = self.params
        nodes = run.nodes
        frontier: deque[int] = deque([0])
        while frontier:
            nid = frontier.popleft() if p.order == "bfs" else frontier.pop()
            node = nodes[nid]
            run.allow(2, need=2)  # a reasoning and its judge, or not at all
            node.step = len(run.order)
            run.order.append(nid)
            hits = run.retrieve(node.question)
            run.passages[nid] = hits
            if nid == 0:
                run.root_passages = hits
            node.passages = [_pid(h, n) for n, h in enumerate(hits)]
            node.reasoning = run.text(prompts.reason_messages(node.question, hits), p.reason_tokens)
            run.judge(node, hits)
            if run.solved(node):
                node.decision = "solved"
                if nid == 0:
                    return "root_solved"
                if self._feed_forward(run, node, frontier):
                    return "root_solved_after_update"
                continue
            if node.level >= p.max_depth:
                node.decision = "leaf"
                continue
            subs = self._decompose(run, node)
            if not subs:
                node.decision = "leaf"
                continue
            node.decision = "decomposed"
            for q in subs:
                child = Node(len(nodes), node.level + 1, nid, q, q)
                nodes.append(child)
                node.children.append(child.id)
            kids = node.children if p.order == "bfs" else node.children[::-1]
            frontier.extend(kids)
        return "frontier_empty"

    def _json_kw(self) -> dict[str, Any]:
        p = self.params
        kw: dict[str, Any] = {"temperature": p.temperature, "seed": p.seed}
        if p.json_mode:
            kw["response_format"] = {"type": "json_object"}
        return kw

    def _decompose(self, run: _Run, node: Node) -> list[str]:
        p = self.params
        attempts = run.allow(p.parse_attempts)
        res = ask_parsed(_Proxy(run), prompts.decompose_messages(node.question), parse_sub_questions, fallback=[],
                         attempts=attempts, instruction="Reply with a JSON object {\"sub_questions\": [...]} "
                         "holding at most " + str(p.max_branch) + " sub-questions (strings), and nothing else.",
                         what="sub-questions", max_tokens=p.decompose_tokens, **self._json_kw())
        node.decomposition = res.as_dict()
        same = node.question.strip().lower()
        subs = [q for q in res.value if q.strip().lower() != same]
        return subs[: p.max_branch]

    def _feed_forward(self, run: _Run, node: Node, frontier: deque[int]) -> bool:
        """Picks, root update + re-judge, rewrites; True when the root became reliable."""
        p = self.params
        root = run.nodes[0]
        candidates = [0] + [i for i in frontier if run.nodes[i].step is None]
        answer = node.reasoning
        attempts = run.allow(p.parse_attempts)
        listed = [run.nodes[i].question if i else root.question_original for i in candidates]
        res = ask_parsed(_Proxy(run), prompts.pick_messages(listed, node.question, answer),
                         lambda t: parse_picks(t, len(candidates)), fallback=[], attempts=attempts,
                         instruction="Reply with a JSON object such as {\"picks\": [1, 2]} holding the numbers "
                                     "of the open questions, or {\"picks\": []} for none, and nothing else.",
                         what="question numbers", max_tokens=p.pick_tokens, **self._json_kw())
        node.pick_record = {**res.as_dict(), "candidates": candidates}
        node.picks = [candidates[j] for j in res.value]
        for target in node.picks:  # the root is first when picked
            other = run.nodes[target]
            if target == 0:
                before = root.reasoning
                root.reasoning = run.text(prompts.update_messages(node.question, node.reasoning,
                                                                  root.question_original, before), p.reason_tokens)
                merged = list(run.root_passages)
                seen = {_pid(h, n) for n, h in enumerate(merged)}
                for n, h in enumerate(run.passages.get(node.id, ())):
                    if _pid(h, n) not in seen:
                        merged.append(h)
                        seen.add(_pid(h, n))
                run.root_passages = merged
                update = {"by": node.id, "before": before, "after": root.reasoning, "score": None}
                root.updates.append(update)
                update["score"] = run.judge(root, merged)
                if run.solved(root):
                    root.decision = "solved"
                    return True
            else:
                before = other.question
                text = run.text(prompts.rewrite_messages(node.question, short_answer(answer) or answer, before),
                                p.rewrite_tokens)
                after = _clean_rewrite(text) or before
                other.question = after
                other.rewrites.append({"by": node.id, "before": before, "after": after})
        return False
