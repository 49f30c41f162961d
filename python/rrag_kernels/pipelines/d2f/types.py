"""D2F-ReAG's data: the parameters (:class:`D2FParams`), the search tree (:class:`Node`), the
result of one question (:class:`D2FResult`) and of one that raised (:class:`D2FError`), and
their records (``to_dict``, ``to_record``: the shape every shell writes, pipelines/_items.py).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

from ...ops import check_choice, check_int, check_real

__all__ = [
    "MAX_BRANCH",
    "MAX_DEPTH",
    "ORDERS",
    "STOP_REASONS",
    "D2FError",
    "D2FParams",
    "D2FResult",
    "Node",
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
