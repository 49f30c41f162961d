"""The small protocols pipelines depend on; plug in any object that has these methods."""

from __future__ import annotations

from typing import Any, Protocol, Sequence, runtime_checkable

import numpy as np

from ..nli import NLIScorer  # the NLI protocol lives with its backends

__all__ = ["Embedder", "NLIScorer", "Retriever"]


@runtime_checkable
class Embedder(Protocol):
    """Texts to unit-norm embeddings."""

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Return (len(texts), d) float32, rows L2-normalised."""
        ...


@runtime_checkable
class Retriever(Protocol):
    """A query to its k best passages (dicts with at least ``text``)."""

    def search(self, query: str, k: int) -> list[dict[str, Any]]:
        ...
