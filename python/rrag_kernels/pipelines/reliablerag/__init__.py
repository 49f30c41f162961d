"""ReliableRAG: reliability-ranked reasoning chains, LLM-scored or agreement credibility, an
LLM selector, triple extraction, TBS / SBS context and a reader (the face of
``pipelines/reliablerag/``).

    from rrag_kernels.pipelines.reliablerag import build_chains, credibility, triples_from_passages

    triples = triples_from_passages(passages)                 # supplied triples -> Triple
    cred = credibility(question, passages, triples, source="oracle")
    result = build_chains(question, triples, cred, embedder)  # chains, TBS context

:mod:`.chains` holds the method (:class:`Triple`, the credibility registry
:data:`CREDIBILITY_SOURCES`, the selector registry :data:`SELECTORS` with the offline
:class:`ReliabilitySelector`, :class:`ChainParams`, :func:`build_chains`,
:func:`tbs_context`); :mod:`.sources` the ``"llm"`` and ``"agreement"`` sources and
the ROC-AUC against the injected labels; :mod:`.selector` the ``"llm"`` selector;
:mod:`.extraction` LLM triple extraction; :mod:`.answer` the end-to-end :func:`answer`
(and :func:`answer_batch`, :class:`ReliableRAG` with the method contract's ``run_batch``,
the baseline :func:`vanilla_answer`); :mod:`.eval` the alpha x
injected-passages grid and :func:`evaluate_llm` behind ``python -m rrag_kernels
reliablerag-eval``.

    res = answer(question, passages, llm=llm, embedder=embedder, credibility="oracle", context="tbs")
    res.answer, res.chains, res.context, res.llm_calls, res.seconds, res.fallbacks
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
from .sources import (
    CREDIBILITY_SYSTEM,
    LLM_FALLBACK,
    CredibilityScores,
    agreement_credibility,
    credibility_auc,
    format_auc,
    llm_credibility,
    parse_credibility,
    roc_auc,
    score_credibility,
)
from .eval import (
    ALPHAS,
    INJECTED,
    KEPT_STYLE,
    LLM_METHODS,
    evaluate,
    evaluate_llm,
    format_llm_report,
    format_report,
    gold_texts,
    injection_setting,
    load_multihop,
)
from .extraction import EXTRACTION_SYSTEM, extract_triples, parse_triples, resolve_head
from .selector import SELECTOR_EXEMPLARS, SELECTOR_INSTRUCTION, LLMSelector, letter_of, letter_probs, option_letters
from .answer import (
    ANSWER_OPTIONS,
    CONTEXTS,
    READER_SYSTEM,
    RAGAnswer,
    ReliableRAG,
    answer,
    answer_batch,
    check_answer_options,
    clean_answer,
    passage_text,
    question_triples,
    read_answer,
    reader_messages,
    sbs_context,
    vanilla_answer,
)

__all__ = [
    "ALPHAS",
    "ANSWER_OPTIONS",
    "CONTEXTS",
    "CREDIBILITY_SOURCES",
    "CREDIBILITY_SYSTEM",
    "EXTRACTION_SYSTEM",
    "INJECTED",
    "KEPT_STYLE",
    "LLM_FALLBACK",
    "LLM_METHODS",
    "READER_SYSTEM",
    "SELECTORS",
    "SELECTOR_EXEMPLARS",
    "SELECTOR_INSTRUCTION",
    "Chain",
    "ChainParams",
    "ChainResult",
    "ChainSelector",
    "CredibilityScores",
    "LLMSelector",
    "RAGAnswer",
    "ReliableRAG",
    "ReliabilitySelector",
    "Triple",
    "agreement_credibility",
    "answer",
    "answer_batch",
    "check_answer_options",
    "build_chains",
    "chain_query",
    "clean_answer",
    "credibility",
    "credibility_auc",
    "evaluate",
    "evaluate_llm",
    "extract_triples",
    "format_auc",
    "format_llm_report",
    "format_report",
    "get_selector",
    "gold_texts",
    "injection_setting",
    "letter_of",
    "letter_probs",
    "llm_credibility",
    "load_multihop",
    "option_letters",
    "parse_credibility",
    "parse_triples",
    "passage_text",
    "question_triples",
    "read_answer",
    "reader_messages",
    "resolve_head",
    "roc_auc",
    "sbs_context",
    "score_credibility",
    "tbs_context",
    "triples_from_passages",
    "vanilla_answer",
]
