"""Model-facing protocols and implementations: the one face of the models layer.

Everything a pipeline needs from a model or a service, behind a small protocol so that a
user can plug in their own; every default works offline.

Protocols (:mod:`.protocols`)
    :class:`Embedder` (``encode(texts) -> (n, d)``), :class:`NLIScorer` (``labels``,
    ``predict_proba(premises, hypotheses) -> (n, 3)``), :class:`Retriever`
    (``search(query, k) -> list of passage dicts``), :class:`LLM` (``chat(messages, *,
    max_tokens, temperature, stop, seed, response_format, top_logprobs) -> ChatResult``).
Implementations
    :class:`MiniLMEmbedder` (all-MiniLM-L6-v2, offline), :class:`HashingEmbedder` (model-free hashed bag of words), :class:`DenseRetriever` (exact
    inner-product search: faiss or the ``topk_cosine`` kernel), and the NLI scorers in
    :mod:`rrag_kernels.models.nli` (``nli.load(...)``, ``OnnxNLI``, ``CrossEncoderNLI``,
    ``LexicalNLI``, ``EnsembleNLI``, ``LLMJudgeNLI``).
LLMs (:mod:`.llm`)
    :class:`OpenAIChatLLM` (any OpenAI-compatible server over HTTP, standard library only),
    :class:`EmbeddedServer` / :class:`EmbeddedLLM` (SmolLM2-135M-Instruct on llama.cpp,
    offline), :class:`ScriptedLLM` (test double); :class:`ChatResult`, :class:`LLMUsage`,
    :class:`LLMError` (:class:`LLMTimeoutError`, :class:`LLMConnectionError`); defensive
    parsing of structured replies (:func:`ask_int`, :func:`ask_choice`, :func:`ask_json`
    -> :class:`ParseResult`; the readers ``parse_*``, for :func:`ask_parsed`);
    :func:`measure_rates`.
Text helpers (:mod:`.text`)
    :func:`clean_text` (the one cleaning rule: lone surrogates -> U+FFFD, control
    characters -> space; every scorer, embedder and retriever here applies it to the text
    it receives before a tokenizer sees it), :func:`split_sentences`.
Source trust (:mod:`.trust`)
    By registered domain (Public Suffix List, bundled snapshot): :func:`url_host`,
    :func:`url_domain`, :func:`domain_category`, :func:`trust_score`, :func:`trust_table`
    (defaults merged with overrides), :data:`DEFAULT_TRUST` (per category),
    :data:`DOMAIN_CATEGORIES` (per registered domain).

Model libraries (torch, sentence-transformers, onnxruntime, faiss, xllamacpp) are imported only
when a model is built, never when this package is imported.
"""

from __future__ import annotations

from . import nli
from .checks import checked_embeddings, checked_encode, checked_predict
from .embed import HashingEmbedder, MiniLMEmbedder
from .llm import (
    SMOLLM2_REQUIREMENT,
    XLLAMACPP_REQUIREMENT,
    ChatResult,
    EmbeddedLLM,
    EmbeddedServer,
    LLMConnectionError,
    LLMError,
    LLMTimeoutError,
    LLMUsage,
    OpenAIChatLLM,
    ParseResult,
    RateReport,
    ScriptedCall,
    ScriptedLLM,
    TokenLogprob,
    ask_choice,
    ask_int,
    ask_json,
    ask_parsed,
    chat_request,
    check_messages,
    measure_rates,
    parse_choice,
    parse_indices,
    parse_int,
    parse_json_list,
    parse_json_object,
    parse_questions,
    parse_short_answer,
    smollm2_gguf_path,
)
from .protocols import LLM, Embedder, NLIScorer, Retriever
from .retrieval import DenseRetriever
from .text import FUNCTION_WORDS, clean_text, clean_texts, split_sentences
from .trust import DEFAULT_TRUST, DOMAIN_CATEGORIES, domain_category, trust_score, trust_table, url_domain, url_host

__all__ = [
    "DEFAULT_TRUST",
    "FUNCTION_WORDS",
    "DOMAIN_CATEGORIES",
    "LLM",
    "SMOLLM2_REQUIREMENT",
    "XLLAMACPP_REQUIREMENT",
    "ChatResult",
    "DenseRetriever",
    "EmbeddedLLM",
    "EmbeddedServer",
    "Embedder",
    "LLMConnectionError",
    "LLMError",
    "LLMTimeoutError",
    "LLMUsage",
    "HashingEmbedder",
    "MiniLMEmbedder",
    "NLIScorer",
    "OpenAIChatLLM",
    "ParseResult",
    "RateReport",
    "Retriever",
    "ScriptedCall",
    "ScriptedLLM",
    "TokenLogprob",
    "ask_choice",
    "ask_int",
    "ask_json",
    "ask_parsed",
    "chat_request",
    "check_messages",
    "checked_embeddings",
    "checked_encode",
    "checked_predict",
    "clean_text",
    "clean_texts",
    "domain_category",
    "measure_rates",
    "nli",
    "parse_choice",
    "parse_indices",
    "parse_int",
    "parse_json_list",
    "parse_json_object",
    "parse_questions",
    "parse_short_answer",
    "smollm2_gguf_path",
    "split_sentences",
    "trust_score",
    "trust_table",
    "url_domain",
    "url_host",
]
