"""Haystack adapters (``pip install 'rrag_kernels[haystack]'``: haystack-ai 3.x).

    from haystack import Pipeline
    from rrag_kernels.integrations.haystack import MirageDocumentFilter

    pipe = Pipeline()
    pipe.add_component("retriever", InMemoryBM25Retriever(document_store=store))
    pipe.add_component("mirage", MirageDocumentFilter(params={"on_block": "passthrough"}))
    pipe.connect("retriever.documents", "mirage.documents")
    out = pipe.run({"retriever": {"query": q}, "mirage": {"query": q}})
    out["mirage"]["documents"][0].meta["rrag"]      # gate decision, kept / dropped claims

    Pipeline.loads(pipe.dumps(), allowed_modules=["rrag_kernels.*"])   # Haystack 3 allow-list

:class:`MirageDocumentFilter` runs the MIRAGE defense, :class:`ConformalDocumentFilter` the
calibrated claim filter; each ``run(query, documents) -> {"documents": [...]}`` returns new
``Document`` objects (the input ones are never changed): the input's id, score and meta,
plus our decisions under the meta key ``"rrag"``. With ``output="claims"`` (default) a kept
document's content is its kept claims (its embedding, which no longer matches, is dropped);
``"documents"`` keeps it as retrieved. The model (NLI judge, embedder, calibration file) is
loaded once, by ``warm_up()`` (idempotent; ``Pipeline.run`` calls it on every run, and
``run`` calls it when used outside a pipeline). Every init argument is plain data, so the
components round-trip through ``to_dict`` / ``from_dict`` and ``Pipeline.dumps`` / ``loads``.
A document's ``url`` is ``meta["url"]`` (else ``meta["source"]``), its ``title``
``meta["title"]``, its retrieval score ``Document.score``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ._common import METADATA_KEY, ConformalClaimFilter, Decision, passage, require, run_mirage

require("haystack", "haystack", "haystack")
from haystack import Document, component, default_from_dict, default_to_dict  # noqa: E402

from ..models import HashingEmbedder, MiniLMEmbedder  # noqa: E402
from ..pipelines.mirage import MirageDefense, MirageParams  # noqa: E402

__all__ = ["EMBEDDERS", "METADATA_KEY", "ConformalDocumentFilter", "MirageDocumentFilter"]

#: Embedders a serialisable component can name: "minilm", "hashing" (512 dims) or "hashing:<dim>".
EMBEDDERS = ("minilm", "hashing")


def _emit(documents: list[Document], decisions: list[Decision]) -> list[Document]:
    out = []
    for d in decisions:
        src = documents[d.index]
        same = d.text == src.content
        out.append(dataclasses.replace(
            src, content=d.text, meta={**src.meta, METADATA_KEY: d.rrag},
            embedding=src.embedding if same else None, sparse_embedding=src.sparse_embedding if same else None))
    return out


@component
class MirageDocumentFilter:
    """The MIRAGE defense as a Haystack component.

    Parameters
    ----------
    nli : str or None
        The NLI judge: a name or path for ``rrag_kernels.models.nli.load`` (``"lexical"``
        is model-free), or None for the offline default.
    params : dict, optional
        :class:`~rrag_kernels.pipelines.mirage.MirageParams` fields (``on_block``,
        ``mode``, ``r_max``, ...); checked at init.
    output : {"claims", "documents"}
    """

    def __init__(self, nli: str | None = None, params: dict[str, Any] | None = None, output: str = "claims") -> None:
        if nli is not None and not isinstance(nli, str):
            raise TypeError(f"nli: expected a name or path (str) or None, got {type(nli).__name__}")
        params = dict(params or {})
        unknown = set(params) - set(MirageParams.__dataclass_fields__)
        if unknown:
            raise TypeError(f"params: {sorted(unknown)[0]} is not a MirageParams field")
        MirageParams(**params).validate()
        if output not in ("claims", "documents"):
            raise ValueError(f"output: expected 'claims' or 'documents', got {output!r}")
        self.nli, self.params, self.output = nli, params, output
        self._defense: MirageDefense | None = None

    def warm_up(self) -> None:
        """Load the judge once (later calls do nothing)."""
        if self._defense is None:
            self._defense = MirageDefense(nli=self.nli, **self.params)

    @component.output_types(documents=list[Document])
    def run(self, query: str, documents: list[Document]) -> dict[str, Any]:
        """The documents the defense lets through (see the module docstring)."""
        self.warm_up()
        documents = list(documents)
        passages = [passage(d.content or "", d.meta, d.score, score_key=None) for d in documents]
        return {"documents": _emit(documents, run_mirage(self._defense, query, passages, self.output))}

    def to_dict(self) -> dict[str, Any]:
        return default_to_dict(self, nli=self.nli, params=dict(self.params), output=self.output)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "MirageDocumentFilter":
        return default_from_dict(cls, data)


def _embedder(spec: str) -> Any:
    name, _, dim = spec.partition(":")
    if name == "minilm" and not dim:
        return MiniLMEmbedder()
    if name == "hashing":
        return HashingEmbedder(int(dim)) if dim else HashingEmbedder()
    raise ValueError(f"embedder: expected 'minilm', 'hashing' or 'hashing:<dim>', got {spec!r}")


@component
class ConformalDocumentFilter:
    """The conformal claim filter as a Haystack component.

    Parameters
    ----------
    calibration : str
        The path of a saved :class:`~rrag_kernels.pipelines.conformal.ClaimConformal`
        (``ClaimConformal.save``), read by ``warm_up()``.
    embedder : str
        ``"minilm"`` (default), ``"hashing"`` or ``"hashing:<dim>"``: the embedder the
        calibration scores came from.
    output : {"claims", "documents"}
    """

    def __init__(self, calibration: str, embedder: str = "minilm", output: str = "claims") -> None:
        if not isinstance(calibration, str):
            raise TypeError(f"calibration: expected a path (str), got {type(calibration).__name__}")
        if not isinstance(embedder, str) or embedder.partition(":")[0] not in EMBEDDERS:
            raise ValueError(f"embedder: expected 'minilm', 'hashing' or 'hashing:<dim>', got {embedder!r}")
        if output not in ("claims", "documents"):
            raise ValueError(f"output: expected 'claims' or 'documents', got {output!r}")
        self.calibration, self.embedder, self.output = calibration, embedder, output
        self._filter: ConformalClaimFilter | None = None

    def warm_up(self) -> None:
        """Read the calibration and build the embedder once (later calls do nothing)."""
        if self._filter is None:
            self._filter = ConformalClaimFilter(self.calibration, _embedder(self.embedder))

    @component.output_types(documents=list[Document])
    def run(self, query: str, documents: list[Document]) -> dict[str, Any]:
        """The documents with at least one kept claim (see the module docstring)."""
        self.warm_up()
        documents = list(documents)
        texts = [d.content or "" for d in documents]
        return {"documents": _emit(documents, self._filter.decide(query, texts, self.output))}

    def to_dict(self) -> dict[str, Any]:
        return default_to_dict(self, calibration=self.calibration, embedder=self.embedder, output=self.output)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "ConformalDocumentFilter":
        return default_from_dict(cls, data)
