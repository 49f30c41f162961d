"""Model-facing protocols and implementations: the one face of the models layer.

Everything a pipeline needs from a model or a service, behind a small protocol so that a
user can plug in their own; every default works offline.

Protocols (:mod:`.protocols`)
    :class:`Embedder` (``encode(texts) -> (n, d)``), :class:`NLIScorer` (``labels``,
    ``predict_proba(premises, hypotheses) -> (n, 3)``), :class:`Retriever`
    (``search(query, k) -> list of passage dicts``).
Implementations
    :class:`MiniLMEmbedder` (all-MiniLM-L6-v2, offline), :class:`DenseRetriever` (exact
    inner-product search: faiss or the ``topk_cosine`` kernel), and the NLI scorers in
    :mod:`rrag_kernels.models.nli` (``nli.load(...)``, ``OnnxNLI``, ``CrossEncoderNLI``,
    ``LexicalNLI``, ``EnsembleNLI``).
Text helpers (:mod:`.text`)
    :func:`clean_text` (the one cleaning rule: lone surrogates -> U+FFFD, control
    characters -> space; every scorer, embedder and retriever here applies it to the text
    it receives before a tokenizer sees it), :func:`split_sentences`.
Source trust (:mod:`.trust`)
    By registered domain (Public Suffix List, bundled snapshot): :func:`url_host`,
    :func:`url_domain`, :func:`domain_category`, :func:`trust_score`, :func:`trust_table`
    (defaults merged with overrides), :data:`DEFAULT_TRUST` (per category),
    :data:`DOMAIN_CATEGORIES` (per registered domain).

Model libraries (torch, sentence-transformers, onnxruntime, faiss) are imported only when a
model is built, never when this package is imported.
"""

from __future__ import annotations

from . import nli
from .embed import MiniLMEmbedder
from .protocols import Embedder, NLIScorer, Retriever
from .retrieval import DenseRetriever
from .text import clean_text, split_sentences
from .trust import DEFAULT_TRUST, DOMAIN_CATEGORIES, domain_category, trust_score, trust_table, url_domain, url_host

__all__ = [
    "DEFAULT_TRUST",
    "DOMAIN_CATEGORIES",
    "DenseRetriever",
    "Embedder",
    "MiniLMEmbedder",
    "NLIScorer",
    "Retriever",
    "clean_text",
    "domain_category",
    "nli",
    "split_sentences",
    "trust_score",
    "trust_table",
    "url_domain",
    "url_host",
]
