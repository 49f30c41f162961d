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
  (indices) likewise, with the fallbacks "no sub-questions" and "no picks" (the readers are
  the models layer's, :mod:`.parsing` says which);
* prompts are concatenated, never formatted (:mod:`.prompts`): braces in passages survive,
  and the final prompt is not spaced out character by character;
* the root's question is never rewritten (it is what the user asked, and what the final
  answer answers); a node at ``max_depth`` is not decomposed (the reference decomposed it and
  dropped the children); the reference's empty "end node" markers are not kept;
* the judge sees the passages the reasoning used (the node's own; for the updated root, the
  root's and those of the sub-answers merged into it), not the reasoning alone.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from typing import Any, Mapping, Sequence

from ...models import LLM, ChatResult, Retriever, ask_int, ask_parsed
from .._items import check_question
from .._progress import progress_iter
from . import prompts
from .parsing import parse_picks, parse_sub_questions, rewritten_question, short_answer
from .types import D2FError, D2FParams, D2FResult, Node

logger = logging.getLogger("rrag_kernels")

__all__ = ["D2FReAG"]


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
                after = rewritten_question(text) or before
                other.question = after
                other.rewrites.append({"by": node.id, "before": before, "after": after})
        return False
