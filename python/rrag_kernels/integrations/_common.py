"""What every framework adapter shares: the framework import, passages in, decisions out.

An adapter turns its framework's documents into the passage dicts a method reads
(``text``, ``url``, ``title``, ``retrieval_score``), runs the method once on all of them
and gets back one :class:`Decision` per document to emit, in input order: the index of the
input document, the text the new document carries, and what goes under its ``"rrag"``
metadata key. Building the new framework object is left to the adapter; nothing here
touches (or knows) a framework type.
"""

from __future__ import annotations

import importlib
import math
import os
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from ..models import Embedder, checked_encode, split_sentences
from ..ops import check_choice, cosine_matrix
from ..pipelines.conformal import ClaimConformal, ConformalRAG
from ..pipelines.mirage import Claim, MirageDefense, MirageResult

#: The one metadata key every adapter writes.
METADATA_KEY = "rrag"
#: What a kept document carries: its kept claims only ("claims") or its text unchanged.
OUTPUTS = ("claims", "documents")


def require(module: str, extra: str, what: str) -> Any:
    """Import a framework module or raise an ImportError that names the extra to install."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(
            f"rrag_kernels.integrations.{what} needs {module.split('.')[0]} ({exc}); "
            f"install it with: pip install 'rrag_kernels[{extra}]'"
        ) from exc


@dataclass
class Decision:
    """One document to emit: ``index`` of the input document, its new ``text``, and the
    ``rrag`` metadata (a fresh dict; JSON-ready: no NaN, no numpy scalars)."""

    index: int
    text: str
    rrag: dict[str, Any]


def _num(x: Any) -> float | None:
    x = float(x)
    return x if math.isfinite(x) else None


def passage(text: str, meta: Mapping[str, Any] | None, score: Any = None, *,
            score_key: str | None = "retrieval_score") -> dict[str, Any]:
    """A MIRAGE passage from a document's text, metadata and (optional) retrieval score.

    ``url`` is ``meta["url"]``, else ``meta["source"]`` (LangChain's loaders put the URL or
    file path there; a path reads as domain "unknown"); ``title`` is ``meta["title"]``; the
    score is ``score`` when given, else ``meta[score_key]``. Non-numeric scores are dropped
    (a passage without a score ranks after the scored ones, see ``top_passages``).
    """
    meta = meta or {}
    url = meta.get("url") or meta.get("source")
    title = meta.get("title")
    if score is None and score_key:
        score = meta.get(score_key)
    if isinstance(score, bool) or not isinstance(score, (int, float, np.integer, np.floating)) \
            or not math.isfinite(float(score)):
        score = None
    return {"text": text, "url": url if isinstance(url, str) else None,
            "title": title if isinstance(title, str) else None,
            "retrieval_score": None if score is None else float(score)}


# ---------------------------------------------------------------------- MIRAGE
def mirage_defense(defense: Any) -> MirageDefense:
    """The defense to run: the one given, or the library default (offline judge)."""
    if defense is None:
        return MirageDefense()
    if not callable(getattr(defense, "defend", None)):
        raise TypeError(f"defense: expected a MirageDefense, got {type(defense).__name__}")
    return defense


def _claim(c: Claim) -> dict[str, Any]:
    return {"index": c.index, "text": c.text, "score": _num(c.score), "reason": c.reason, "support": c.support,
            "contradictions": c.contradictions, "sources": c.sources, "domain": c.domain, "trust": _num(c.trust)}


def mirage_decisions(result: MirageResult, texts: Sequence[str], output: str, on_block: str) -> list[Decision]:
    """The documents to emit after the defense ran on ``texts`` (one per input document).

    Gate passed: each document with at least one kept claim, rewritten to its kept claims
    (``output="claims"``, joined by spaces) or unchanged (``"documents"``); a document with
    no kept claim (all pruned, or beyond ``top_k``) is dropped. Gate blocked: nothing for
    ``on_block`` "parametric" / "refuse" (the defense says: answer without these passages),
    every document unchanged for "passthrough" (``gate_passed`` False in its metadata).
    """
    check_choice(output, "output", OUTPUTS)
    by_source: dict[int, list[Claim]] = {}
    for c in result.claims:
        by_source.setdefault(c.source, []).append(c)
    stats = {k: v for k, v in result.stats.items() if k != "timings"}
    out = []
    for n, text in enumerate(texts):
        claims = by_source.get(n, [])
        kept = [c for c in claims if c.kept]
        if result.gate_passed and not kept:
            continue
        if not result.gate_passed and on_block != "passthrough":
            continue
        rewrite = result.gate_passed and output == "claims"
        rrag = {
            "method": "mirage",
            "gate_passed": bool(result.gate_passed),
            "fallback": result.fallback,
            "rewritten": rewrite,
            "kept": [_claim(c) for c in kept],
            "dropped": [_claim(c) for c in claims if not c.kept],
            "score": max((_num(c.score) for c in kept if _num(c.score) is not None), default=None),
            "stats": stats,
            "error": result.error,
        }
        out.append(Decision(n, " ".join(c.text for c in kept) if rewrite else text, rrag))
    return out


def run_mirage(defense: MirageDefense, question: str, passages: list[dict[str, Any]], output: str) -> list[Decision]:
    """Defend ``passages`` for ``question`` and decide what to emit (see :func:`mirage_decisions`)."""
    check_choice(output, "output", OUTPUTS)
    result = defense.defend(question, passages)
    return mirage_decisions(result, [p["text"] for p in passages], output, defense.params.on_block)


# ---------------------------------------------------------------------- conformal claim filter
class _NoRetriever:
    """The claims are scored against the documents handed over; nothing is retrieved."""

    def search(self, query: str, k: int) -> list[dict[str, Any]]:
        raise RuntimeError("the conformal adapters score the documents they are given; nothing is retrieved")


class ConformalClaimFilter:
    """The calibrated claim filter on already-retrieved documents (framework-free core).

    The claims are the sentences of the documents (``split_sentences``); each gets
    Conformal-RAG's relevance R(c) = max_d sim(q, d) * cos(c, d) over the documents handed
    over, with sim(q, d) the cosine of the question and the document under ``embedder``
    (what :class:`~rrag_kernels.pipelines.conformal.MultiHopRetriever` records at hop 0),
    and is kept iff R(c) >= q_hat (:meth:`ClaimConformal.filter`, all the documents'
    claims as one response). Calibrate with the same embedder and scores.

    Parameters
    ----------
    calibrator : ClaimConformal, or the path of a file written by ``ClaimConformal.save``
        Not group-conditional.
    embedder : Embedder, optional
        Default :class:`~rrag_kernels.models.MiniLMEmbedder` (offline).
    """

    def __init__(self, calibrator: Any, embedder: Embedder | None = None) -> None:
        if isinstance(calibrator, (str, os.PathLike)):
            calibrator = ClaimConformal.load(calibrator)
        if not isinstance(calibrator, ClaimConformal):
            raise TypeError(f"calibrator: expected a ClaimConformal or a path, got {type(calibrator).__name__}")
        if calibrator.q_hat is None:
            raise ValueError("calibrator: not calibrated; calibrate() or load() it first")
        if isinstance(calibrator.q_hat, dict):
            raise ValueError("calibrator: group-conditional calibrators are not supported by the adapters")
        self.calibrator = calibrator
        self.rag = ConformalRAG(calibrator, _NoRetriever(), embedder)
        self.embedder = self.rag.embedder

    def decide(self, question: str, texts: Sequence[str], output: str = "claims") -> list[Decision]:
        """The documents to emit: each with at least one kept claim, rewritten to its kept
        claims (``output="claims"``) or unchanged (``"documents"``), in input order."""
        check_choice(output, "output", OUTPUTS)
        texts = list(texts)
        if not texts:
            return []
        emb = checked_encode(self.embedder, [question] + texts)
        sims = np.asarray(cosine_matrix(emb[:1], emb[1:]), dtype=np.float64)[0]
        sentences = [split_sentences(t) for t in texts]
        claims = [s for per_doc in sentences for s in per_doc]
        docs = [{"text": t, "query_sim": float(s)} for t, s in zip(texts, sims)]
        result = self.rag.filter(question, claims=claims, docs=docs)
        out, k = [], 0
        for n, text in enumerate(texts):
            mine = result.claims[k:k + len(sentences[n])]
            k += len(sentences[n])
            kept = [c for c in mine if c.kept]
            if not kept:
                continue
            rrag = {
                "method": "conformal",
                "q_hat": _num(result.q_hat),
                "alpha": self.calibrator.alpha,
                "query_sim": _num(sims[n]),
                "rewritten": output == "claims",
                "kept": [{"index": c.index, "text": c.text, "score": _num(c.score), "reason": c.reason} for c in kept],
                "dropped": [{"index": c.index, "text": c.text, "score": _num(c.score), "reason": c.reason}
                            for c in mine if not c.kept],
                "score": max((_num(c.score) for c in kept if _num(c.score) is not None), default=None),
            }
            out.append(Decision(n, " ".join(c.text for c in kept) if output == "claims" else text, rrag))
        return out
