"""ReliableRAG, offline step: reliability-ranked reasoning chains (the face of
``pipelines/reliablerag/``).

    from rrag_kernels.pipelines.reliablerag import build_chains, credibility, triples_from_passages

    triples = triples_from_passages(passages)                 # supplied triples -> Triple
    cred = credibility(question, passages, triples, source="oracle")
    result = build_chains(question, triples, cred, embedder)  # chains, TBS context

:mod:`.chains` holds the method (:class:`Triple`, the credibility registry
:data:`CREDIBILITY_SOURCES`, the selector registry :data:`SELECTORS` with the offline
:class:`ReliabilitySelector`, :class:`ChainParams`, :func:`build_chains`,
:func:`tbs_context`); :mod:`.eval` the alpha x injected-passages grid behind
``python -m rrag_kernels reliablerag-eval``.
"""

from __future__ import annotations

from .chains import (
    CREDIBILITY_SOURCES,
    SELECTORS,
    Chain,
    ChainParams,
    ChainResult,
    ChainSelector,
    ReliabilitySelector,
    Triple,
    build_chains,
    chain_query,
    credibility,
    get_selector,
    tbs_context,
    triples_from_passages,
)
from .eval import ALPHAS, INJECTED, KEPT_STYLE, evaluate, format_report, gold_texts, injection_setting, load_multihop

__all__ = [
    "ALPHAS",
    "CREDIBILITY_SOURCES",
    "INJECTED",
    "KEPT_STYLE",
    "SELECTORS",
    "Chain",
    "ChainParams",
    "ChainResult",
    "ChainSelector",
    "ReliabilitySelector",
    "Triple",
    "build_chains",
    "chain_query",
    "credibility",
    "evaluate",
    "format_report",
    "get_selector",
    "gold_texts",
    "injection_setting",
    "load_multihop",
    "tbs_context",
    "triples_from_passages",
]
