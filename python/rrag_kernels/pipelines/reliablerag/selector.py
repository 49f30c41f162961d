"""The LLM selector of ReliableRAG's chain search (registered as ``SELECTORS["llm"]``).

For each unfinished chain the LLM sees the question, the chain's triples and the lettered
options ``A. no need for additional knowledge triples``, then ``B.``, ``C.``, ... one per
candidate in descending reliability R (TRACE's prompt, :data:`SELECTOR_INSTRUCTION`), and is
asked for one letter (``max_tokens`` 4, temperature 0, ``top_logprobs`` 20).

Probabilities (:func:`letter_probs`)
    At the first generated token that is an option letter (after stripping spaces and the
    marks ``. ) ( * _ ` ' " : ,``) -- or, when none is, at the first generated token, if its
    alternatives hold option letters (a small model that starts "The next possible triple"
    still ranks the letters there) -- the returned top alternatives are grouped by the letter
    they spell (``"B"``, ``" B"``, ``"B."`` and ``"(B"`` are all B; lower case is not a
    letter: "a" is a word), their probabilities summed and renormalised over the option
    letters returned. A letter not among the alternatives gets 0; letters past the
    candidate count are not options (NaN). These go to :func:`rrag_kernels.ops.beam_step`.
Greedy fallback
    Without log-probabilities (a server that returns none), or when no option letter is among
    them as above, the reply is read with :func:`rrag_kernels.models.parse_choice` and, if
    unreadable, re-asked with :func:`rrag_kernels.models.ask_choice` (3 attempts in all);
    the letter read gets probability 1. The trace says ``mode="greedy"`` and why. When
    nothing is readable: ``B`` (the most reliable candidate) for an empty chain, else ``A``
    (stop), recorded as ``fallback_used``.
Empty chains
    By default an empty chain cannot stop (``allow_empty_stop=False``): 'A' is shown (the
    format stays the same) but its mass is set to 0 and the rest renormalised, so every
    chain holds at least one triple (TRACE lets it stop, leaving the reader nothing).
Prompt length
    Never right-truncated: when the estimated length (``count_tokens``, default a
    conservative ``len(text) / 3 + 8`` per message) exceeds ``max_prompt_tokens``, exemplars
    are dropped from the end, one by one; a prompt still too long without any is sent whole
    and the trace says ``over_budget``. The system prompt is identical for every call with
    the same number of exemplars, so a server's prefix cache reuses it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ...models import ask_choice, parse_choice
from ...ops import check_int
from .chains import SELECTORS, Triple

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
STOP_OPTION = "A. no need for additional knowledge triples"

SELECTOR_INSTRUCTION = (
    "Select the next knowledge triple that extends an existing set of knowledge triples to form a coherent "
    "reasoning path capable of answering a specified question. If the current reasoning path is sufficient to "
    "answer the question, simply output A. Please only output the choice for the next knowledge triple."
)

#: Worked examples for the selector, written for this package (made-up facts about made-up places).
SELECTOR_EXEMPLARS = (
    "existing knowledge triples: \n"
    "question: Which river flows through the capital of Veloria?\n"
    "candidate knowledge triples:\n"
    "A. no need for additional knowledge triples\n"
    "B. Veloria capital Marsten\n"
    "C. Veloria currency velor\n"
    "D. Lake Orun located in Veloria\n"
    "the next possible triple is: B",
    "existing knowledge triples: Veloria capital Marsten\n"
    "question: Which river flows through the capital of Veloria?\n"
    "candidate knowledge triples:\n"
    "A. no need for additional knowledge triples\n"
    "B. Marsten founded in 1204\n"
    "C. River Alde flows through Marsten\n"
    "D. Marsten population 80,000\n"
    "the next possible triple is: C",
    "existing knowledge triples: Veloria capital Marsten, River Alde flows through Marsten\n"
    "question: Which river flows through the capital of Veloria?\n"
    "candidate knowledge triples:\n"
    "A. no need for additional knowledge triples\n"
    "B. River Alde length 140 km\n"
    "C. Veloria currency velor\n"
    "the next possible triple is: A",
)

_MARKS = " \t\r\n.)(*_`'\":,"


def option_letters(n_candidates: int) -> str:
    """``"A"`` plus one letter per candidate (at most 25 candidates)."""
    check_int(n_candidates, "n_candidates", minimum=0, maximum=len(LETTERS) - 1)
    return LETTERS[: n_candidates + 1]


def letter_of(token: str, letters: str) -> str | None:
    """The option letter a token spells (``" B"``, ``"B."``, ``"(B"`` -> ``"B"``), or None."""
    core = token.strip(_MARKS)
    return core if len(core) == 1 and core in letters else None


def letter_probs(logprobs: Sequence[Any] | None, letters: str) -> dict[str, float] | None:
    """Probabilities over ``letters`` from a reply's token log-probabilities.

    Parameters
    ----------
    logprobs : sequence of TokenLogprob or None
        ``ChatResult.logprobs``.
    letters : str
        The option letters.

    Returns
    -------
    dict or None
        ``letter -> p`` over the letters present among the top alternatives at the first
        generated token that is an option letter (else at the first generated token),
        variants merged, summing to 1; None when there are no log-probabilities or no option
        letter at that position.
    """
    if not logprobs:
        return None
    at = next((tok for tok in logprobs if letter_of(tok.token, letters) is not None), logprobs[0])
    for tok in (at,):
        mass: dict[str, float] = {}
        alternatives = list(tok.top) or [(tok.token, tok.logprob)]
        if not any(t == tok.token for t, _ in alternatives):
            alternatives.append((tok.token, tok.logprob))
        for text, lp in alternatives:
            letter = letter_of(text, letters)
            if letter is not None and math.isfinite(lp):
                mass[letter] = mass.get(letter, 0.0) + math.exp(lp)
        total = sum(mass.values())
        if total <= 0:
            return None
        return {k: v / total for k, v in mass.items()}
    return None


def _default_count(text: str) -> int:
    return len(text) // 3 + 8


@dataclass
class LLMSelector:
    """TRACE's lettered-choice selector on an LLM (see the module docstring).

    Parameters
    ----------
    llm : LLM
    exemplars : sequence of str
        Worked examples put in the system prompt (default :data:`SELECTOR_EXEMPLARS`).
    max_prompt_tokens : int
        Budget of the estimated prompt length; exemplars are dropped to meet it.
    count_tokens : callable, optional
        ``count_tokens(text) -> int``; default ``len(text) // 3 + 8``.
    top_logprobs : int or None
        Alternatives asked per token (None: never ask, always greedy).
    max_tokens : int
    allow_empty_stop : bool
        Whether an empty chain may choose 'A'.
    seed : int or None

    Attributes
    ----------
    trace : list of dict
        One entry per chain scored: ``hop``, ``chain`` (triple texts), ``n_candidates``,
        ``mode`` ("logprobs" / "greedy" / "no candidates"), ``reason`` (why greedy),
        ``probs`` (letter -> p), ``exemplars`` (how many were sent), ``prompt_tokens_est``,
        ``over_budget``, ``fallback_used``, ``calls``, ``errors``.
    """

    llm: Any = None
    exemplars: Sequence[str] = SELECTOR_EXEMPLARS
    max_prompt_tokens: int = 1536
    count_tokens: Callable[[str], int] | None = None
    top_logprobs: int | None = 20
    max_tokens: int = 4
    allow_empty_stop: bool = False
    seed: int | None = 0
    trace: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.llm is None or not callable(getattr(self.llm, "chat", None)):
            raise ValueError("selector='llm' needs llm= (an object with chat(messages, ...))")
        check_int(self.max_prompt_tokens, "max_prompt_tokens", minimum=1)
        check_int(self.max_tokens, "max_tokens", minimum=1)
        if self.top_logprobs is not None:
            check_int(self.top_logprobs, "top_logprobs", minimum=1, maximum=20)

    def messages(self, question: str, chain: Sequence[Triple], candidates: Sequence[Triple],
                 n_exemplars: int | None = None) -> list[dict[str, str]]:
        """The chat messages for one chain with the first ``n_exemplars`` exemplars (all by default)."""
        n = len(self.exemplars) if n_exemplars is None else n_exemplars
        system = SELECTOR_INSTRUCTION
        if n:
            system += ("\n\nThe following are examples of how the next knowledge triple of a coherent reasoning "
                       "path is selected:\n\n" + "\n\n".join(self.exemplars[:n]))
        options = "\n".join([STOP_OPTION] + [f"{LETTERS[i + 1]}. {t.text}" for i, t in enumerate(candidates)])
        user = (f"existing knowledge triples: {', '.join(t.text for t in chain)}\nquestion: {question}\n"
                f"candidate knowledge triples:\n{options}\nthe next possible triple is:")
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]

    def fit_prompt(self, question: str, chain: Sequence[Triple],
                   candidates: Sequence[Triple]) -> tuple[list[dict[str, str]], int, int, bool]:
        """``(messages, exemplars kept, estimated tokens, over budget)``: exemplars dropped
        from the end until the estimate fits; never a cut inside the question or options."""
        count = self.count_tokens or _default_count
        for n in range(len(self.exemplars), -1, -1):
            msgs = self.messages(question, chain, candidates, n)
            est = sum(count(m["content"]) for m in msgs)
            if est <= self.max_prompt_tokens:
                return msgs, n, est, False
        return msgs, 0, est, True

    def _one(self, question: str, chain: Sequence[Triple], candidates: Sequence[Triple]) -> dict[str, Any]:
        m = len(candidates)
        letters = option_letters(m)
        entry: dict[str, Any] = {"hop": len(chain) + 1, "chain": [t.text for t in chain], "n_candidates": m,
                                 "mode": "logprobs", "reason": None, "probs": {}, "exemplars": 0,
                                 "prompt_tokens_est": 0, "over_budget": False, "fallback_used": False,
                                 "calls": 0, "errors": []}
        if m == 0:
            entry.update(mode="no candidates", probs={"A": 1.0})
            return entry
        msgs, n_ex, est, over = self.fit_prompt(question, chain, candidates)
        entry.update(exemplars=n_ex, prompt_tokens_est=est, over_budget=over)
        probs = None
        text = None
        try:
            entry["calls"] += 1
            res = self.llm.chat(msgs, max_tokens=self.max_tokens, temperature=0.0, seed=self.seed,
                                top_logprobs=self.top_logprobs)
            text = res.text
            if self.top_logprobs is None:
                entry["reason"] = "log-probabilities not asked for (top_logprobs=None)"
            elif res.logprobs is None:
                entry["reason"] = "the server returned no log-probabilities"
            else:
                probs = letter_probs(res.logprobs, letters)
                if probs is None:
                    entry["reason"] = "no option letter among the log-probabilities"
        except Exception as exc:  # the LLM failing is recorded, never raised
            entry["errors"].append(f"{type(exc).__name__}: {exc}")
            entry["reason"] = "the call failed"
        if probs is not None and not self.allow_empty_stop and not chain:
            probs = {k: v for k, v in probs.items() if k != "A"}
            total = sum(probs.values())
            probs = {k: v / total for k, v in probs.items()} if total > 0 else None
            if probs is None:
                entry["reason"] = "only 'A' had mass and an empty chain cannot stop"
        if probs is None:
            entry["mode"] = "greedy"
            allowed = letters if (self.allow_empty_stop or chain) else letters[1:]
            letter = None
            if text is not None:
                try:
                    letter = parse_choice(text, list(allowed))
                except ValueError as exc:
                    entry["errors"].append(str(exc))
            if letter is None:
                pr = ask_choice(self.llm, msgs, list(allowed), fallback=None, attempts=2 if text is not None else 3,
                                max_tokens=self.max_tokens, temperature=0.0, seed=self.seed)
                entry["calls"] += pr.attempts
                entry["errors"] += pr.errors
                letter = pr.value
            if letter is None:
                letter = "A" if chain else "B"
                entry["fallback_used"] = True
            probs = {letter: 1.0}
        entry["probs"] = probs
        return entry

    def choice_probs(self, question: str, chains: Sequence[Sequence[Triple]],
                     candidates: Sequence[Sequence[Triple]], scores: np.ndarray) -> np.ndarray:
        """See :meth:`.chains.ChainSelector.choice_probs`; one LLM call per chain (more when
        re-asked), each recorded in :attr:`trace`."""
        k = np.asarray(scores).shape[1]
        out = np.full((len(chains), k + 1), np.nan)
        for b, (chain, cands) in enumerate(zip(chains, candidates)):
            entry = self._one(question, chain, cands)
            self.trace.append(entry)
            out[b, : len(cands) + 1] = 0.0
            for letter, p in entry["probs"].items():
                out[b, LETTERS.index(letter)] = min(max(p, 0.0), 1.0)
        return out


SELECTORS["llm"] = LLMSelector
