"""LlamaIndex adapters (``pip install 'rrag_kernels[llamaindex]'``: llama-index-core 0.14).

    from rrag_kernels.integrations.llamaindex import MiragePostprocessor
    from rrag_kernels.pipelines.mirage import MirageDefense

    engine = index.as_query_engine(node_postprocessors=[MiragePostprocessor(defense=MirageDefense())])
    response = engine.query("When was the Eiffel Tower completed?")
    response.source_nodes[0].node.metadata["rrag"]     # gate decision, kept / dropped claims

:class:`MiragePostprocessor` runs the MIRAGE defense on the retrieved nodes,
:class:`ConformalPostprocessor` the calibrated claim filter. Both return new
``NodeWithScore`` objects (copies of the nodes; the input ones are never changed) with the
retrieval score kept and our decisions under the node metadata key ``"rrag"``, which is
excluded from the text the LLM and the embedder see. With ``output="claims"`` (default) a
kept node's text is its kept claims; ``"documents"`` keeps it as retrieved. On a blocked
MIRAGE gate the nodes follow the defense's ``on_block`` (none for "parametric" /
"refuse", all unchanged for "passthrough"). A node's ``url`` is ``metadata["url"]`` (else
``metadata["source"]``), its ``title`` ``metadata["title"]``, its retrieval score the
``NodeWithScore.score``.
"""

from __future__ import annotations

from typing import Any, List, Optional

from ._common import METADATA_KEY, ConformalClaimFilter, Decision, mirage_defense, passage, require, run_mirage

require("llama_index.core", "llamaindex", "llamaindex")
from llama_index.core.postprocessor.types import BaseNodePostprocessor  # noqa: E402
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle  # noqa: E402
from pydantic import PrivateAttr  # noqa: E402

__all__ = ["METADATA_KEY", "ConformalPostprocessor", "MiragePostprocessor"]


def _query(query_bundle: Optional[QueryBundle]) -> str:
    if query_bundle is None:
        raise ValueError("query_bundle: the defense needs the query; postprocess_nodes(nodes, query_str=...) or a "
                         "QueryBundle")
    return query_bundle.query_str


def _text(n: NodeWithScore) -> str:
    return n.node.get_content(metadata_mode=MetadataMode.NONE)


def _emit(nodes: List[NodeWithScore], decisions: list[Decision]) -> List[NodeWithScore]:
    out = []
    for d in decisions:
        src = nodes[d.index]
        node = src.node.model_copy(deep=True)
        if node.get_content(metadata_mode=MetadataMode.NONE) != d.text:
            node.set_content(d.text)
            node.embedding = None  # the retrieved one no longer matches the text
        node.metadata = {**src.node.metadata, METADATA_KEY: d.rrag}
        for keys in (node.excluded_llm_metadata_keys, node.excluded_embed_metadata_keys):
            if METADATA_KEY not in keys:
                keys.append(METADATA_KEY)
        out.append(NodeWithScore(node=node, score=src.score))
    return out


class MiragePostprocessor(BaseNodePostprocessor):
    """The MIRAGE defense as a LlamaIndex node postprocessor.

    Parameters
    ----------
    defense : MirageDefense, optional
        Default ``MirageDefense()`` (the offline judge), built on first use.
    output : {"claims", "documents"}
    """

    defense: Any = None
    output: str = "claims"
    _defense: Any = PrivateAttr(default=None)

    @classmethod
    def class_name(cls) -> str:
        return "RRAGMiragePostprocessor"

    def _postprocess_nodes(self, nodes: List[NodeWithScore],
                           query_bundle: Optional[QueryBundle] = None) -> List[NodeWithScore]:
        query = _query(query_bundle)
        if self._defense is None:
            self._defense = mirage_defense(self.defense)
        nodes = list(nodes)
        passages = [passage(_text(n), n.node.metadata, n.score, score_key=None) for n in nodes]
        return _emit(nodes, run_mirage(self._defense, query, passages, self.output))


class ConformalPostprocessor(BaseNodePostprocessor):
    """The conformal claim filter as a LlamaIndex node postprocessor.

    Parameters
    ----------
    calibrator : ClaimConformal or str (path of its saved JSON)
    embedder : rrag_kernels Embedder, optional -- default MiniLM; the one the calibration used
    output : {"claims", "documents"}
    """

    calibrator: Any
    embedder: Any = None
    output: str = "claims"
    _filter: Any = PrivateAttr(default=None)

    def model_post_init(self, context: Any) -> None:
        self._filter = ConformalClaimFilter(self.calibrator, self.embedder)

    @classmethod
    def class_name(cls) -> str:
        return "RRAGConformalPostprocessor"

    def _postprocess_nodes(self, nodes: List[NodeWithScore],
                           query_bundle: Optional[QueryBundle] = None) -> List[NodeWithScore]:
        query = _query(query_bundle)
        nodes = list(nodes)
        return _emit(nodes, self._filter.decide(query, [_text(n) for n in nodes], self.output))
