"""LangChain adapters (``pip install '.[langchain]'`` from a clone: langchain-core 1.x).

    from langchain_classic.retrievers import ContextualCompressionRetriever
    from rrag_kernels.integrations.langchain import MirageCompressor
    from rrag_kernels.pipelines.mirage import MirageDefense

    compressor = MirageCompressor(defense=MirageDefense())  # a blocked question: no documents
    retriever = ContextualCompressionRetriever(base_compressor=compressor, base_retriever=store.as_retriever())
    docs = retriever.invoke("When was the Eiffel Tower completed?")
    docs[0].metadata["rrag"]          # gate decision, kept / dropped claims, score

:class:`MirageCompressor`
    A ``BaseDocumentCompressor`` running the MIRAGE defense on the retrieved documents.
:class:`ConformalCompressor`
    A ``BaseDocumentCompressor`` keeping the sentences a calibrated
    :class:`~rrag_kernels.pipelines.conformal.ClaimConformal` lets through.
:class:`DefendedRetriever`
    A ``BaseRetriever`` wrapping any retriever with one of the compressors (the same as
    langchain-classic's ``ContextualCompressionRetriever``, without needing it).
:class:`D2FRunnable`
    D2F-ReAG as a ``Runnable``: question in, ``{"question", "answer", "rrag"}`` out, over a
    LangChain retriever (or a :class:`~rrag_kernels.models.Retriever`).
:class:`RRAGEmbeddings`
    An rrag_kernels :class:`~rrag_kernels.models.Embedder` as LangChain ``Embeddings``.

Every adapter returns new ``Document`` objects (the input ones are never changed): the
input's ``id`` and metadata, plus our scores and decisions under the one key ``"rrag"``.
With ``output="claims"`` (the default) a kept document's ``page_content`` is its kept
claims joined by spaces, so a false sentence never reaches the prompt even when the rest of
its document survives; ``output="documents"`` keeps the text as retrieved and only drops
documents without a kept claim.

A passage's ``url`` is ``metadata["url"]`` (else ``metadata["source"]``), its ``title``
``metadata["title"]``, its retrieval score ``metadata[score_key]`` (default
``"retrieval_score"``; LangChain retrievers do not attach scores, so by default all rank
equal).
"""

from __future__ import annotations

from typing import Any, Sequence

from ._common import METADATA_KEY, ConformalClaimFilter, Decision, mirage_defense, passage, require, run_mirage

require("langchain_core", "langchain", "langchain")
from langchain_core.callbacks import (  # noqa: E402
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
    Callbacks,
)
from langchain_core.documents import BaseDocumentCompressor, Document  # noqa: E402
from langchain_core.embeddings import Embeddings  # noqa: E402
from langchain_core.retrievers import BaseRetriever  # noqa: E402
from langchain_core.runnables import Runnable, RunnableConfig  # noqa: E402
from langchain_core.runnables.config import run_in_executor  # noqa: E402
from pydantic import ConfigDict, PrivateAttr  # noqa: E402

from ..pipelines.d2f import D2FParams, D2FReAG  # noqa: E402

__all__ = ["METADATA_KEY", "ConformalCompressor", "D2FRunnable", "DefendedRetriever", "MirageCompressor",
           "RRAGEmbeddings"]


def _emit(documents: Sequence[Document], decisions: list[Decision]) -> list[Document]:
    out = []
    for d in decisions:
        src = documents[d.index]
        out.append(Document(page_content=d.text, metadata={**src.metadata, METADATA_KEY: d.rrag}, id=src.id))
    return out


class MirageCompressor(BaseDocumentCompressor):
    """The MIRAGE defense as a LangChain document compressor.

    Parameters
    ----------
    defense : MirageDefense, optional
        Default ``MirageDefense()`` (the offline judge), built on first use.
    output : {"claims", "documents"}
        A kept document's text: its kept claims (default) or as retrieved.
    score_key : str or None
        The metadata key holding the retrieval score (a similarity, or a distance with
        ``MirageDefense(score_kind="distance")``).

    Notes
    -----
    On a blocked gate the documents follow the defense's ``on_block``: none for
    ``"parametric"`` / ``"refuse"`` (the default defense answers without retrieval), all of
    them unchanged with ``metadata["rrag"]["gate_passed"] == False`` for ``"passthrough"``.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    defense: Any = None
    output: str = "claims"
    score_key: str | None = "retrieval_score"
    _defense: Any = PrivateAttr(default=None)

    def _get_defense(self) -> Any:
        if self._defense is None:
            self._defense = mirage_defense(self.defense)
        return self._defense

    def compress_documents(self, documents: Sequence[Document], query: str,
                           callbacks: Callbacks | None = None) -> Sequence[Document]:
        documents = list(documents)
        passages = [passage(d.page_content, d.metadata, score_key=self.score_key) for d in documents]
        return _emit(documents, run_mirage(self._get_defense(), query, passages, self.output))

    async def acompress_documents(self, documents: Sequence[Document], query: str,
                                  callbacks: Callbacks | None = None) -> Sequence[Document]:
        return await run_in_executor(None, self.compress_documents, documents, query, callbacks)


class ConformalCompressor(BaseDocumentCompressor):
    """The conformal claim filter as a LangChain document compressor.

    Parameters
    ----------
    calibrator : ClaimConformal or str
        A calibrated filter, or the path of its saved JSON (``ClaimConformal.save``).
    embedder : Embedder, optional
        Scores the claims; default MiniLM (offline). Use the embedder the calibration
        scores came from.
    output : {"claims", "documents"}

    Notes
    -----
    Each sentence of the retrieved documents is a claim scored R(c) = max_d sim(q, d) *
    cos(c, d) (sim = the question-document cosine under ``embedder``) and kept iff
    R(c) >= q_hat; documents without a kept claim are dropped.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    calibrator: Any
    embedder: Any = None
    output: str = "claims"
    _filter: Any = PrivateAttr(default=None)

    def model_post_init(self, context: Any) -> None:
        self._filter = ConformalClaimFilter(self.calibrator, self.embedder)

    def compress_documents(self, documents: Sequence[Document], query: str,
                           callbacks: Callbacks | None = None) -> Sequence[Document]:
        documents = list(documents)
        return _emit(documents, self._filter.decide(query, [d.page_content for d in documents], self.output))

    async def acompress_documents(self, documents: Sequence[Document], query: str,
                                  callbacks: Callbacks | None = None) -> Sequence[Document]:
        return await run_in_executor(None, self.compress_documents, documents, query, callbacks)


class DefendedRetriever(BaseRetriever):
    """Any retriever followed by a compressor (default: :class:`MirageCompressor`).

    Parameters
    ----------
    retriever : BaseRetriever (any Runnable from str to a list of Document)
    compressor : BaseDocumentCompressor, optional
        Default ``MirageCompressor()``.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    retriever: Any
    compressor: Any = None

    def model_post_init(self, context: Any) -> None:
        if self.compressor is None:
            self.compressor = MirageCompressor()

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        docs = self.retriever.invoke(query, config={"callbacks": run_manager.get_child()})
        return list(self.compressor.compress_documents(docs, query, callbacks=run_manager.get_child()))

    async def _aget_relevant_documents(self, query: str, *,
                                       run_manager: AsyncCallbackManagerForRetrieverRun) -> list[Document]:
        docs = await self.retriever.ainvoke(query, config={"callbacks": run_manager.get_child()})
        return list(await self.compressor.acompress_documents(docs, query, callbacks=run_manager.get_child()))


class RRAGEmbeddings(Embeddings):
    """An rrag_kernels embedder (``encode(texts) -> (n, d)``) as LangChain ``Embeddings``,
    e.g. ``RRAGEmbeddings(HashingEmbedder())`` or ``RRAGEmbeddings(MiniLMEmbedder())``."""

    def __init__(self, embedder: Any) -> None:
        if not callable(getattr(embedder, "encode", None)):
            raise TypeError(f"embedder: expected an object with encode(texts), got {type(embedder).__name__}")
        self.embedder = embedder

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [[float(x) for x in row] for row in self.embedder.encode(list(texts))]

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


class _LangChainSearch:
    """A LangChain retriever behind the ``search(query, k)`` protocol D2F-ReAG reads."""

    def __init__(self, retriever: Any) -> None:
        self.retriever = retriever

    def search(self, query: str, k: int) -> list[dict[str, Any]]:
        out = []
        for n, d in enumerate(self.retriever.invoke(query)[: max(int(k), 0)]):
            meta = d.metadata or {}
            title = meta.get("title")
            out.append({"pid": str(d.id if d.id is not None else meta.get("pid", n)),
                        "title": title if isinstance(title, str) else "", "text": d.page_content})
        return out


class D2FRunnable(Runnable):
    """D2F-ReAG as a LangChain ``Runnable``.

    Input: the question (str) or a dict with ``"question"``. Output: ``{"question",
    "answer", "rrag"}`` where ``rrag`` holds ``method`` ("d2f"), ``stop_reason``,
    ``budget_bound``, ``llm_calls``, token counts, ``nodes`` (the search tree: each node's
    id, level, parent, question, judge score, reliability, decision and children) and
    ``total_seconds``.

    Parameters
    ----------
    llm : rrag_kernels LLM (``chat(messages, ...)``), e.g. ``OpenAIChatLLM`` or ``EmbeddedLLM``
    retriever : a LangChain retriever, or an rrag_kernels Retriever (``search(query, k)``)
    params : D2FParams, optional
    judge_llm : LLM, optional
    """

    def __init__(self, llm: Any, retriever: Any, params: D2FParams | None = None, *, judge_llm: Any = None) -> None:
        search = retriever if callable(getattr(retriever, "search", None)) else _LangChainSearch(retriever)
        self.method = D2FReAG(llm, search, params, judge_llm=judge_llm)

    @staticmethod
    def _question(value: Any) -> str:
        if isinstance(value, dict):
            value = value.get("question")
        if not isinstance(value, str):
            raise TypeError(f"input: expected a question (str) or a dict with 'question', got {type(value).__name__}")
        return value

    def _run(self, value: Any) -> dict[str, Any]:
        r = self.method.answer(self._question(value))
        nodes = [{"id": n.id, "level": n.level, "parent": n.parent, "question": n.question, "score": n.score,
                  "reliability": n.reliability, "decision": n.decision, "children": list(n.children)}
                 for n in r.nodes]
        rrag = {"method": "d2f", "stop_reason": r.stop_reason, "budget_bound": r.budget_bound,
                "llm_calls": r.llm_calls, "prompt_tokens": r.prompt_tokens, "completion_tokens": r.completion_tokens,
                "nodes": nodes, "total_seconds": r.total_seconds}
        return {"question": r.question, "answer": r.answer, METADATA_KEY: rrag}

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> dict[str, Any]:
        return self._call_with_config(self._run, input, config, run_type="chain")
