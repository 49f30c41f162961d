"""Claim-level conformal factuality (the face of ``pipelines/conformal/``).

    from rrag_kernels.pipelines.conformal import ClaimConformal, load_claims
    d = load_claims("nq_subclaims_with_scores.jsonl", score="frequency+gpt")
    cc = ClaimConformal(alpha=0.1).calibrate(d.scores, d.labels_ok, d.offsets)
    keep = cc.filter(new_scores, new_offsets)

:mod:`.calibrator` holds the model-free split-conformal claim filter (:class:`ClaimConformal`,
versioned and hashed JSON), :mod:`.data` the adapters of the released claim datasets,
:mod:`.plot` the trade-off plot (matplotlib, imported only when called) and :mod:`.rag` the
(multi-hop) RAG pipeline that scores claims with ``claim_relevance`` and filters them
(:class:`ConformalRAG`, :class:`MultiHopRetriever`); :mod:`.responses` turns scored responses
into the filter's records (:func:`filter_responses`, for the CLI and the server).
"""

from __future__ import annotations

from .calibrator import FIELDS, FORMAT, FORMAT_VERSION, ClaimConformal
from .data import DEFAULT_SUPPORTED, ClaimData, from_responses, hash_noise, load_claims
from .plot import plot_tradeoff
from .responses import filter_responses
from .rag import (
    ConformalRAG,
    FilterResult,
    MultiHopRetriever,
    ScoredClaim,
    ScoredClaims,
    default_rewriter,
    load_sample,
    score_sample,
)

__all__ = [
    "DEFAULT_SUPPORTED",
    "FIELDS",
    "FORMAT",
    "FORMAT_VERSION",
    "ClaimConformal",
    "ClaimData",
    "ConformalRAG",
    "FilterResult",
    "MultiHopRetriever",
    "ScoredClaim",
    "ScoredClaims",
    "default_rewriter",
    "filter_responses",
    "from_responses",
    "hash_noise",
    "load_claims",
    "load_sample",
    "plot_tradeoff",
    "score_sample",
]
