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
    it receives before a tokenizer sees it), :func:`split_sentences`, :func:`url_domain`,
    :func:`domain_category`, :func:`trust_score`, :data:`DEFAULT_TRUST`.

Model libraries (torch, sentence-transformers, onnxruntime, faiss) are imported only when a
model is built, never when this package is imported.
"""

from __future__ import annotations

from . import nli
from .embed import MiniLMEmbedder
from .protocols import Embedder, NLIScorer, Retriever
from .retrieval import DenseRetriever
from .text import DEFAULT_TRUST, clean_text, domain_category, split_sentences, trust_score, url_domain

__all__ = [
    "DEFAULT_TRUST",
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
    "url_domain",
]
