"""The framework adapters (rrag_kernels.integrations), each inside its real framework.

LangChain (langchain-core 1.x + langchain-classic): the compressors under
``ContextualCompressionRetriever`` over an ``InMemoryVectorStore``, sync and async, the
retriever wrapper and the D2F-ReAG ``Runnable`` with a scripted LLM. LlamaIndex
(llama-index-core 0.14): the postprocessors through ``VectorStoreIndex.as_query_engine``
with ``MockEmbedding`` / ``MockLLM``. Haystack (haystack-ai 3.x): the components in a
``Pipeline`` round-tripped through ``dumps`` / ``loads(allowed_modules=...)``. Each
framework's tests skip when it is not installed; the ImportError message is checked for
every framework in a subprocess that hides it.

The MIRAGE cases use the model-free ``nli="lexical"`` judge on four passages about the
Eiffel Tower, one of which plants "completed in 1925" next to a true sentence: the defense
drops that claim (contradicted by the better-corroborated 1889), so the planted document
comes back rewritten to its true sentence. The conformal cases use ``HashingEmbedder`` and
an off-topic sentence that scores below q_hat.
"""

from __future__ import annotations

import asyncio
import copy
import os
import subprocess
import sys

import numpy as np
import pytest

# Haystack reports usage to PostHog unless told not to: never from the test suite (offline anyway).
os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")

from rrag_kernels.models import HashingEmbedder, ScriptedLLM
from rrag_kernels.pipelines.conformal import ClaimConformal
from rrag_kernels.pipelines.mirage import MirageDefense

Q = "When was the Eiffel Tower completed?"
FALSE = "The Eiffel Tower was completed in 1925."
OFF_TOPIC = "Bananas are a good source of potassium."
PASSAGES = [
    {"text": "The Eiffel Tower was completed in 1889. It stands on the Champ de Mars in Paris.",
     "url": "https://en.wikipedia.org/wiki/Eiffel_Tower"},
    {"text": "The Eiffel Tower was completed in 1889 for the World's Fair. Gustave Eiffel's company built the tower.",
     "url": "https://www.britannica.com/topic/Eiffel-Tower"},
    {"text": f"{FALSE} Many visitors climb the stairs.", "url": "http://tower-facts.blogspot.com/post"},
    {"text": "The Eiffel Tower was completed in 1889 and opened to the public that year.",
     "url": "https://www.history.com/eiffel"},
]
#: For the conformal filter: the first passage gains an off-topic sentence, and an
#: off-topic passage is added (both below q_hat).
CONFORMAL_PASSAGES = [dict(PASSAGES[0], text=PASSAGES[0]["text"] + " " + OFF_TOPIC), *PASSAGES[1:],
                      {"text": "Monkeys like to eat ripe bananas.", "url": "https://fruit.example.org/"}]


def _defense(**kw):
    return MirageDefense(nli="lexical", **kw)


@pytest.fixture(scope="module")
def calibration(tmp_path_factory):
    """A calibrated filter with q_hat = 0.3 (each calibration response: a supported claim at
    0.9 and an unsupported one at 0.3), saved as JSON."""
    cal = ClaimConformal(alpha=0.1).calibrate(np.tile([0.9, 0.3], 20), np.tile([True, False], 20),
                                              np.arange(0, 41, 2))
    path = tmp_path_factory.mktemp("cal") / "cal.json"
    cal.save(path)
    return path


def _check_mirage(texts, metas, *, rewritten=True):
    """The defended output of PASSAGES: the planted claim is gone and marked dropped."""
    assert all(FALSE not in t for t in texts) if rewritten else any(FALSE in t for t in texts)
    assert len(texts) == 4
    rr = [m["rrag"] for m in metas]
    assert {r["method"] for r in rr} == {"mirage"} and all(r["gate_passed"] for r in rr)
    planted = next(r for r, m in zip(rr, metas) if m["url"] == PASSAGES[2]["url"])
    assert [c["text"] for c in planted["dropped"]] == [FALSE]
    assert planted["dropped"][0]["reason"].startswith("contradicted")
    assert [c["text"] for c in planted["kept"]] == ["Many visitors climb the stairs."]
    if rewritten:
        assert "Many visitors climb the stairs." in texts
    assert all(r["score"] is not None and r["rewritten"] is rewritten for r in rr)


def _check_conformal(texts, metas):
    assert len(texts) == 4 and all("banana" not in t.lower() for t in texts)  # the off-topic doc is dropped
    rr = [m["rrag"] for m in metas]
    assert {r["method"] for r in rr} == {"conformal"}
    first = next(r for r, m in zip(rr, metas) if m["url"] == PASSAGES[0]["url"])
    assert [c["text"] for c in first["dropped"]] == [OFF_TOPIC]
    q = first["q_hat"]
    assert all(c["score"] >= q for r in rr for c in r["kept"]) and first["dropped"][0]["score"] < q


# ============================================================================ missing framework
@pytest.mark.parametrize("module, hidden, extra", [
    ("langchain", "langchain_core", "langchain"),
    ("llamaindex", "llama_index", "llamaindex"),
    ("haystack", "haystack", "haystack"),
])
def test_a_missing_framework_names_its_extra(module, hidden, extra):
    code = (f"import sys; sys.modules[{hidden!r}] = None\n"
            "try:\n"
            f"    import rrag_kernels.integrations.{module}\n"
            "except ImportError as exc:\n"
            "    print(exc)\n"
            "else:\n"
            "    print('imported')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert f"pip install 'rrag_kernels[{extra}]'" in out.stdout, out.stdout


def test_the_face_imports_no_framework():
    code = ("import sys, rrag_kernels.integrations as i\n"
            "print(i.METADATA_KEY, sorted(m for m in ('langchain_core', 'llama_index', 'haystack') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "rrag []", out.stderr


# ============================================================================ LangChain
@pytest.fixture(scope="module")
def lc():
    pytest.importorskip("langchain_core")
    from rrag_kernels.integrations import langchain

    return langchain


def _lc_docs():
    from langchain_core.documents import Document

    return [Document(page_content=p["text"], metadata={"url": p["url"]}, id=f"d{n}") for n, p in enumerate(PASSAGES)]


def _lc_store(lc, passages):
    from langchain_core.documents import Document
    from langchain_core.vectorstores import InMemoryVectorStore

    store = InMemoryVectorStore(lc.RRAGEmbeddings(HashingEmbedder()))
    store.add_documents([Document(page_content=p["text"], metadata={"url": p["url"]}) for p in passages])
    return store.as_retriever(search_kwargs={"k": len(passages)})


def _dump(docs):
    return [(d.page_content, copy.deepcopy(d.metadata), d.id) for d in docs]


def test_langchain_compressor_drops_the_planted_claim_and_keeps_the_input(lc):
    docs = _lc_docs()
    before = _dump(docs)
    out = lc.MirageCompressor(defense=_defense()).compress_documents(docs, Q)
    assert _dump(docs) == before, "the input documents must not change"
    assert all(o is not d for o in out for d in docs)
    _check_mirage([d.page_content for d in out], [d.metadata for d in out])
    assert [d.id for d in out] == ["d0", "d1", "d2", "d3"]  # ids and order of the input
    assert asyncio.run(lc.MirageCompressor(defense=_defense()).acompress_documents(docs, Q)) == out

    whole = lc.MirageCompressor(defense=_defense(), output="documents").compress_documents(docs, Q)
    assert [d.page_content for d in whole] == [p["text"] for p in PASSAGES]
    _check_mirage([d.page_content for d in whole], [d.metadata for d in whole], rewritten=False)


def test_langchain_blocked_gate_follows_on_block(lc):
    docs = _lc_docs()
    for on_block in ("parametric", "refuse"):
        assert lc.MirageCompressor(defense=_defense(d_min=10, on_block=on_block)).compress_documents(docs, Q) == []
    out = lc.MirageCompressor(defense=_defense(d_min=10, on_block="passthrough")).compress_documents(docs, Q)
    assert [d.page_content for d in out] == [p["text"] for p in PASSAGES]
    assert all(d.metadata["rrag"]["gate_passed"] is False and d.metadata["rrag"]["fallback"] == "passthrough"
               for d in out)
    assert lc.MirageCompressor(defense=_defense()).compress_documents([], Q) == []


def test_langchain_contextual_compression_retriever_sync_and_async(lc):
    from langchain_classic.retrievers import ContextualCompressionRetriever

    base = _lc_store(lc, PASSAGES)
    retriever = ContextualCompressionRetriever(base_compressor=lc.MirageCompressor(defense=_defense()),
                                               base_retriever=base)
    docs = retriever.invoke(Q)
    _check_mirage([d.page_content for d in docs], [d.metadata for d in docs])
    assert asyncio.run(retriever.ainvoke(Q)) == docs
    # the wrapper of this package gives the same documents, sync and async
    ours = lc.DefendedRetriever(retriever=base, compressor=lc.MirageCompressor(defense=_defense()))
    assert ours.invoke(Q) == docs
    assert asyncio.run(ours.ainvoke(Q)) == docs


def test_langchain_conformal_compressor(lc, calibration):
    base = _lc_store(lc, CONFORMAL_PASSAGES)
    from langchain_classic.retrievers import ContextualCompressionRetriever

    compressor = lc.ConformalCompressor(calibrator=str(calibration), embedder=HashingEmbedder())
    retriever = ContextualCompressionRetriever(base_compressor=compressor, base_retriever=base)
    docs = retriever.invoke(Q)
    _check_conformal([d.page_content for d in docs], [d.metadata for d in docs])
    assert asyncio.run(retriever.ainvoke(Q)) == docs
    # a calibrator object works as its file does
    same = lc.ConformalCompressor(calibrator=ClaimConformal.load(calibration), embedder=HashingEmbedder())
    assert lc.DefendedRetriever(retriever=base, compressor=same).invoke(Q) == docs


def test_langchain_d2f_runnable_over_a_langchain_retriever(lc):
    from rrag_kernels.pipelines.d2f import D2FParams
    from rrag_kernels.pipelines.d2f import prompts as P

    seen = []

    def reply(messages):
        system, user = messages[0]["content"], messages[-1]["content"]
        seen.append(user)
        if system == P.JUDGE_SYSTEM:
            return "9"
        if system == P.ANSWER_SYSTEM:
            return "1889"
        return "It was completed in 1889.\nAnswer: 1889"

    runnable = lc.D2FRunnable(ScriptedLLM(reply), _lc_store(lc, PASSAGES), D2FParams(k=2))
    out = runnable.invoke(Q)
    assert out["question"] == Q and out["answer"] == "1889"
    assert out["rrag"]["method"] == "d2f" and out["rrag"]["nodes"][0]["decision"] == "solved"
    assert any("Champ de Mars" in u or "World's Fair" in u for u in seen), \
        "the LLM must see passages from the LangChain retriever"
    assert runnable.invoke({"question": Q})["answer"] == "1889"
    assert asyncio.run(runnable.ainvoke(Q))["answer"] == "1889"
    with pytest.raises(TypeError, match="input"):
        runnable.invoke(3)


# ============================================================================ LlamaIndex
@pytest.fixture(scope="module")
def li():
    pytest.importorskip("llama_index.core")
    from rrag_kernels.integrations import llamaindex

    return llamaindex


def _li_engine(li_mod, passages, postprocessor):
    from llama_index.core import VectorStoreIndex
    from llama_index.core.embeddings import MockEmbedding
    from llama_index.core.llms import MockLLM
    from llama_index.core.schema import TextNode

    nodes = [TextNode(text=p["text"], metadata={"url": p["url"]}, id_=f"n{k}") for k, p in enumerate(passages)]
    index = VectorStoreIndex(nodes, embed_model=MockEmbedding(embed_dim=8))
    return index.as_query_engine(llm=MockLLM(), similarity_top_k=len(passages), node_postprocessors=[postprocessor])


def test_llamaindex_postprocessor_in_a_query_engine(li):
    from llama_index.core.schema import MetadataMode

    engine = _li_engine(li, PASSAGES, li.MiragePostprocessor(defense=_defense()))
    response = engine.query(Q)
    nodes = response.source_nodes
    _check_mirage([n.node.get_content() for n in nodes], [n.node.metadata for n in nodes])
    # our metadata never reaches the LLM's or the embedder's text
    assert all("rrag" not in n.node.get_content(MetadataMode.LLM) for n in nodes)
    assert all("rrag" not in n.node.get_content(MetadataMode.EMBED) for n in nodes)
    again = asyncio.run(engine.aquery(Q)).source_nodes
    assert [(n.node.get_content(), n.node.metadata, n.score) for n in again] == \
        [(n.node.get_content(), n.node.metadata, n.score) for n in nodes]


def test_llamaindex_postprocessor_keeps_its_input_and_needs_the_query(li):
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

    nodes = [NodeWithScore(node=TextNode(text=p["text"], metadata={"url": p["url"]}), score=0.5) for p in PASSAGES]
    before = [n.model_dump() for n in nodes]
    pp = li.MiragePostprocessor(defense=_defense())
    out = pp.postprocess_nodes(nodes, query_str=Q)
    assert [n.model_dump() for n in nodes] == before
    assert all(o.node is not n.node for o in out for n in nodes)
    assert [o.score for o in out] == [0.5] * 4
    _check_mirage([n.node.get_content() for n in out], [n.node.metadata for n in out])
    same = asyncio.run(pp.apostprocess_nodes(nodes, QueryBundle(Q)))
    assert [n.model_dump() for n in same] == [n.model_dump() for n in out]
    with pytest.raises(ValueError, match="query_bundle"):
        pp.postprocess_nodes(nodes)


def test_llamaindex_conformal_postprocessor(li, calibration):
    pp = li.ConformalPostprocessor(calibrator=str(calibration), embedder=HashingEmbedder())
    nodes = _li_engine(li, CONFORMAL_PASSAGES, pp).query(Q).source_nodes
    _check_conformal([n.node.get_content() for n in nodes], [n.node.metadata for n in nodes])


# ============================================================================ Haystack
@pytest.fixture(scope="module")
def hs():
    pytest.importorskip("haystack")
    from rrag_kernels.integrations import haystack

    return haystack


def _hs_pipeline(component, passages):
    from haystack import Document, Pipeline
    from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
    from haystack.document_stores.in_memory import InMemoryDocumentStore

    store = InMemoryDocumentStore()
    store.write_documents([Document(content=p["text"], meta={"url": p["url"]}) for p in passages])
    pipe = Pipeline()
    pipe.add_component("retriever", InMemoryBM25Retriever(document_store=store, top_k=len(passages)))
    pipe.add_component("filter", component)
    pipe.connect("retriever.documents", "filter.documents")
    return pipe


def _hs_run(pipe):
    return pipe.run({"retriever": {"query": Q}, "filter": {"query": Q}})["filter"]["documents"]


def test_haystack_component_in_a_pipeline_round_trips(hs):
    from haystack import Pipeline

    pipe = _hs_pipeline(hs.MirageDocumentFilter(nli="lexical"), PASSAGES)
    docs = _hs_run(pipe)
    _check_mirage([d.content for d in docs], [d.meta for d in docs])
    text = pipe.dumps()
    assert "rrag_kernels.integrations.haystack.MirageDocumentFilter" in text
    loaded = Pipeline.loads(text, allowed_modules=["rrag_kernels.*"])
    again = _hs_run(loaded)
    assert [(d.content, d.meta, d.score) for d in again] == [(d.content, d.meta, d.score) for d in docs]
    assert loaded.get_component("filter").to_dict() == pipe.get_component("filter").to_dict()


def test_haystack_component_warm_up_is_idempotent_and_keeps_its_input(hs):
    from haystack import Document

    comp = hs.MirageDocumentFilter(nli="lexical", params={"on_block": "passthrough"})
    comp.warm_up()
    defense = comp._defense
    comp.warm_up()
    assert comp._defense is defense
    docs = [Document(content=p["text"], meta={"url": p["url"]}, score=1.0 - k / 10) for k, p in enumerate(PASSAGES)]
    before = copy.deepcopy(docs)
    out = comp.run(query=Q, documents=docs)["documents"]
    assert docs == before and all(o is not d for o in out for d in docs)
    assert comp._defense is defense
    _check_mirage([d.content for d in out], [d.meta for d in out])
    assert [d.id for d in out] == [d.id for d in docs] and [d.score for d in out] == [d.score for d in docs]
    assert hs.MirageDocumentFilter.from_dict(comp.to_dict()).params == {"on_block": "passthrough"}
    with pytest.raises(TypeError, match="params"):
        hs.MirageDocumentFilter(params={"no_such_field": 1})
    with pytest.raises(ValueError, match="on_block"):
        hs.MirageDocumentFilter(params={"on_block": "maybe"})


def test_haystack_conformal_component(hs, calibration):
    from haystack import Pipeline

    pipe = _hs_pipeline(hs.ConformalDocumentFilter(calibration=str(calibration), embedder="hashing"),
                        CONFORMAL_PASSAGES)
    docs = _hs_run(pipe)
    _check_conformal([d.content for d in docs], [d.meta for d in docs])
    again = _hs_run(Pipeline.loads(pipe.dumps(), allowed_modules=["rrag_kernels.*"]))
    assert [(d.content, d.meta) for d in again] == [(d.content, d.meta) for d in docs]
