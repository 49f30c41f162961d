"""Dense retrieval over a passage pool (counter-evidence probing, multi-hop retrieval)."""

from __future__ import annotations

import logging
from typing import Any, Sequence

import numpy as np

from ..ops import topk_cosine
from .checks import checked_encode
from .protocols import Embedder
from .text import clean_text

logger = logging.getLogger("rrag_kernels")


class DenseRetriever:
    """Exact inner-product search over embedded passages.

    Uses a FAISS ``IndexFlatIP`` (faiss-cpu, or faiss-gpu where installed) when faiss is
    importable, else this package's fused ``topk_cosine`` kernel; both are exact, and ties
    go to the lower passage index.

    Parameters
    ----------
    passages : sequence of dict
        Each with ``text`` (str), kept (and returned) as cleaned by
        :func:`rrag_kernels.models.clean_text`, so the embedder only ever reads clean text;
        other keys are returned untouched.
    embedder : Embedder
    use_faiss : bool or None
        None: use faiss when importable.
    """

    def __init__(self, passages: Sequence[dict[str, Any]], embedder: Embedder, *, use_faiss: bool | None = None):
        self.passages = [dict(p) for p in passages]
        for n, p in enumerate(self.passages):
            if not isinstance(p.get("text"), str):
                raise TypeError(f"passages: item {n} has no str 'text'")
            p["text"] = clean_text(p["text"])
        self.embedder = embedder
        self._emb = checked_encode(embedder, [p["text"] for p in self.passages], what="passages")
        self._index = None
        if use_faiss is None or use_faiss:
            try:
                import faiss
            except ImportError:
                if use_faiss:
                    raise
            else:
                if len(self.passages):
                    norms = np.linalg.norm(self._emb, axis=1, keepdims=True)
                    unit = np.divide(self._emb, norms, out=np.zeros_like(self._emb), where=norms > 0)
                    self._index = faiss.IndexFlatIP(unit.shape[1])
                    self._index.add(unit)

    def search(self, query: str, k: int) -> list[dict[str, Any]]:
        """The k passages most similar to ``query`` (fewer when the pool is smaller),
        each a copy of the passage dict with ``retrieval_score`` set to the cosine.
        ``query`` is cleaned by :func:`rrag_kernels.models.clean_text` before it is embedded."""
        if not self.passages or k < 1:
            return []
        k = min(int(k), len(self.passages))
        q = checked_encode(self.embedder, [clean_text(query)], what="query", dim=self._emb.shape[1])
        if self._index is not None:
            norm = np.linalg.norm(q)
            scores, idx = self._index.search(q / norm if norm > 0 else q, k)
        else:
            scores, idx = topk_cosine(q, self._emb, k)
        out = []
        for s, i in zip(scores[0], idx[0]):
            if i < 0:
                continue
            hit = dict(self.passages[int(i)])
            hit["retrieval_score"] = float(s)
            out.append(hit)
        return out

