"""The small protocols the pipelines depend on; plug in any object that has these methods."""

from __future__ import annotations

from typing import Any, Protocol, Sequence, runtime_checkable

import numpy as np

__all__ = ["Embedder", "NLIScorer", "Retriever"]


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
