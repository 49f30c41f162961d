"""The small protocols the pipelines depend on; plug in any object that has these methods."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Protocol, Sequence, runtime_checkable

import numpy as np

if TYPE_CHECKING:  # for annotations only: importing this module never imports models.llm
    from .llm.types import ChatResult

__all__ = ["LLM", "Embedder", "NLIScorer", "Retriever"]


@runtime_checkable
class Embedder(Protocol):
    """Texts to unit-norm embeddings."""

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Embed texts.

        Parameters
        ----------
        texts : sequence of str, length n

        Returns
        -------
        ndarray, shape (n, d), float32, rows L2-normalised
        """
        ...


@runtime_checkable
class NLIScorer(Protocol):
    """Sentence pairs to 3-way NLI probabilities.

    Attributes
    ----------
    labels : tuple of 3 str
        The names of the output columns, a permutation of ``("entailment", "neutral",
        "contradiction")``; every scorer in :mod:`rrag_kernels.models.nli` returns exactly
        that order.
    """

    labels: tuple[str, str, str]

    def predict_proba(self, premises: list[str], hypotheses: list[str]) -> np.ndarray:
        """Probabilities that each premise entails / is neutral to / contradicts its hypothesis.

        Parameters
        ----------
        premises, hypotheses : list of str, same length n

        Returns
        -------
        ndarray, shape (n, 3), float32
            Columns named by ``labels``; each row sums to 1. ``n == 0`` gives shape (0, 3).
        """
        ...


@runtime_checkable
class Retriever(Protocol):
    """A query to its k best passages (dicts with at least ``text``)."""

    def search(self, query: str, k: int) -> list[dict[str, Any]]:
        """The k best passages for ``query`` (fewer when the pool is smaller), best first."""
        ...


@runtime_checkable
class LLM(Protocol):
    """A chat model: OpenAI-style messages in, a :class:`~rrag_kernels.models.ChatResult` out.

    Implementations here: :class:`~rrag_kernels.models.OpenAIChatLLM` (any OpenAI-compatible
    ``/v1/chat/completions`` server), :class:`~rrag_kernels.models.EmbeddedLLM` (SmolLM2 in
    process, offline), :class:`~rrag_kernels.models.ScriptedLLM` (a test double). Any object
    with this method works; ``isinstance(obj, LLM)`` checks that it exists. The ones here
    also have ``usage(reset=False) -> LLMUsage`` (calls, retries, failures, tokens, seconds).
    """

    def chat(self, messages: Sequence[Mapping[str, Any]], *, max_tokens: int = 256, temperature: float = 0.0,
             stop: str | Sequence[str] | None = None, seed: int | None = None,
             response_format: Mapping[str, Any] | None = None, top_logprobs: int | None = None) -> ChatResult:
        """Generate the assistant's next message.

        Parameters
        ----------
        messages : sequence of dict
            OpenAI-style ``{"role": "system" | "user" | "assistant" | ..., "content": str}``,
            at least one; validated (TypeError / ValueError naming ``messages[i]``).
        max_tokens : int
            Most tokens to generate, >= 1.
        temperature : float
            >= 0; 0 is greedy.
        stop : str or sequence of str, optional
            Generation ends before any of these strings.
        seed : int, optional
            Sampling seed (reproducible sampling where the backend supports it).
        response_format : dict, optional
            ``{"type": "json_object"}`` asks for one JSON object.
        top_logprobs : int, optional
            0..20: return each generated token's log-probability with that many alternatives
            (``ChatResult.logprobs``), where the backend provides them.

        Returns
        -------
        ChatResult
            ``text``, ``finish_reason``, ``prompt_tokens``, ``completion_tokens``,
            ``seconds``, ``logprobs`` (tuple of TokenLogprob or None), server timings.

        Raises
        ------
        TypeError, ValueError
            Invalid arguments (before anything is sent).
        LLMError
            The backend failed (:class:`~rrag_kernels.models.LLMTimeoutError` for a timeout).
        """
        ...
