"""D2F-ReAG's corpus: passages as the entries it retrieves (each embedded as
``"title: <title> content: <text>"``), and a dense retriever over them."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from ...models import DenseRetriever, Embedder

__all__ = ["build_corpus", "corpus_retriever"]


def build_corpus(passages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Corpus entries from passage dicts, embedded as ``"title: <title> content: <text>"``.

    Parameters
    ----------
    passages : sequence of dict
        Each with ``text`` (str) and optionally ``title`` and ``pid``; other keys are kept.
        Duplicate ``pid``s keep the first.

    Returns
    -------
    list of dict
        ``pid`` (the given one, else ``"p<n>"``), ``title``, ``content`` (the text as given),
        ``text`` (what is embedded), and the other keys.

    Raises
    ------
    TypeError
        A passage is not a dict or has no str ``text``.
    """
    out, seen = [], set()
    for n, p in enumerate(passages):
        if not isinstance(p, Mapping):
            raise TypeError(f"passages: item {n} must be a dict, got {type(p).__name__}")
        if not isinstance(p.get("text"), str):
            raise TypeError(f"passages: item {n} has no str 'text'")
        pid = str(p["pid"]) if p.get("pid") is not None else f"p{n}"
        if pid in seen:
            continue
        seen.add(pid)
        title = "" if p.get("title") is None else str(p["title"])
        entry = dict(p)
        entry.update(pid=pid, title=title, content=p["text"], text="title: " + title + " content: " + p["text"])
        out.append(entry)
    return out


def corpus_retriever(passages: Sequence[Mapping[str, Any]], embedder: Embedder, *,
                     use_faiss: bool | None = None) -> DenseRetriever:
    """A :class:`~rrag_kernels.models.DenseRetriever` over :func:`build_corpus` entries.

    Parameters
    ----------
    passages : sequence of dict
        See :func:`build_corpus`.
    embedder : Embedder
        E.g. :class:`~rrag_kernels.models.MiniLMEmbedder`.
    use_faiss : bool or None
        None: FAISS ``IndexFlatIP`` when importable, else the ``topk_cosine`` kernel.

    Returns
    -------
    DenseRetriever
    """
    if not hasattr(embedder, "encode"):
        raise TypeError(f"embedder must have encode(texts), got {type(embedder).__name__}")
    return DenseRetriever(build_corpus(passages), embedder, use_faiss=use_faiss)
