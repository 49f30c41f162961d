"""Conformal factuality for (multi-hop) RAG: retrieve, score claims with ``claim_relevance``,
keep the claims a calibrated :class:`~rrag_kernels.pipelines.conformal.ClaimConformal` lets through.

    from rrag_kernels.pipelines.conformal import ClaimConformal, ConformalRAG, MultiHopRetriever

    retriever = MultiHopRetriever(corpus)                     # MiniLM + FAISS, 3 hops, k=10, sim >= 0.3
    rag = ConformalRAG(ClaimConformal(alpha=0.1), retriever)
    rag.calibrate([{"question": q, "claims": cs, "labels": ls}, ...])   # labels from the caller
    result = rag.filter(question, response=answer)            # claims = split_sentences(answer)
    result.kept_claims

The claim score is Conformal-RAG's relevance R(c) = max_d sim(x_d, d) * cos(c, d), where
``x_d`` is the query of the hop that found doc ``d`` (the question at hop 0, the rewritten
query after): one fused ``claim_relevance`` call per batch, without a claims x docs matrix.
"""

from __future__ import annotations

import logging
import math
import numbers
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from ...models import DenseRetriever, Embedder, checked_embeddings, clean_text, split_sentences
from ...ops import check_int, check_real, claim_relevance
from .._items import check_question
from .._progress import progress_iter

logger = logging.getLogger("rrag_kernels")

__all__ = ["ConformalRAG", "FilterResult", "MultiHopRetriever", "ScoredClaim", "ScoredClaims", "default_rewriter",
           "load_sample", "score_sample"]

#: (question, docs found so far, hop about to run) -> the query for that hop.
Rewriter = Callable[[str, list, int], str]


def default_rewriter(question: str, docs_so_far: list[dict[str, Any]], hop: int) -> str:
    """The default next-hop query: the question followed by the first sentence of the best
    doc (highest ``query_sim``) that the previous hop (``hop - 1``) newly found.

    Falls back to the best doc found so far when the previous hop found none (it never
    happens inside :meth:`MultiHopRetriever.retrieve`, which stops early then).
    """
    new = [d for d in docs_so_far if d.get("hop") == hop - 1] or list(docs_so_far)
    if not new:
        return question
    best = max(new, key=lambda d: d["query_sim"])
    sentences = split_sentences(best["text"])
    return f"{question} {sentences[0]}" if sentences else question


class MultiHopRetriever:
    """Multi-hop dense retrieval with a similarity threshold.

    Hop 0 searches with the question; hop h >= 1 with ``rewriter(question, docs_so_far, h)``.
    Each hop takes the ``k`` nearest docs (exact inner product over unit embeddings: FAISS
    ``IndexFlatIP`` when faiss is importable, else the ``topk_cosine`` kernel, see
    :class:`DenseRetriever`) and keeps those with cosine >= ``sim_threshold``. Docs are
    accumulated across hops, deduplicated by corpus position; the first hop that finds a doc
    wins (its query and similarity are recorded). Retrieval stops after ``hops`` hops or as
    soon as a hop brings nothing new.

    Parameters
    ----------
    corpus_texts_or_dicts : sequence of str or dict
        Dicts need ``text`` (str), kept as cleaned by :func:`rrag_kernels.models.clean_text`
        (as are questions, claims, rewritten queries and retrieved docs' texts: what the
        embedder and retrievers read); other keys are returned untouched.
    embedder : Embedder, optional
        Default: :class:`~rrag_kernels.models.MiniLMEmbedder` (offline).
    hops : int >= 1
    k : int >= 1 -- docs searched per hop
    sim_threshold : float in [-1, 1]
    rewriter : callable (question, docs_so_far, hop) -> str, optional
        Default :func:`default_rewriter`. ``docs_so_far`` is a list of copies of the docs
        found so far (as :meth:`retrieve` returns them); ``hop`` is the hop about to run (>= 1).
    use_faiss : bool or None -- as in :class:`DenseRetriever`
    """

    def __init__(
        self,
        corpus_texts_or_dicts: Sequence[str | Mapping[str, Any]],
        embedder: Embedder | None = None,
        *,
        hops: int = 3,
        k: int = 10,
        sim_threshold: float = 0.3,
        rewriter: Rewriter | None = None,
        use_faiss: bool | None = None,
    ) -> None:
        self.hops = check_int(hops, "hops", minimum=1)
        self.k = check_int(k, "k", minimum=1)
        sim_threshold = check_real(sim_threshold, "sim_threshold")
        if not (-1.0 <= sim_threshold <= 1.0):
            raise ValueError(f"sim_threshold: must be in [-1, 1], got {sim_threshold}")
        self.sim_threshold = sim_threshold
        if rewriter is not None and not callable(rewriter):
            raise TypeError(f"rewriter: expected a callable, got {type(rewriter).__name__}")
        self.rewriter = rewriter or default_rewriter
        if isinstance(corpus_texts_or_dicts, (str, bytes)):
            raise TypeError("corpus_texts_or_dicts: expected a sequence of str or dict, got a single string")
        passages = []
        for n, item in enumerate(corpus_texts_or_dicts):
            if isinstance(item, str):
                passages.append({"text": clean_text(item)})
            elif isinstance(item, Mapping) and isinstance(item.get("text"), str):
                passages.append(dict(item, text=clean_text(item["text"])))
            else:
                raise TypeError(f"corpus_texts_or_dicts: item {n} is neither a str nor a dict with str 'text'")
        if embedder is None:
            from ...models import MiniLMEmbedder

            embedder = MiniLMEmbedder()
        self.embedder = embedder
        self._dense = DenseRetriever([dict(p, _mh_index=n) for n, p in enumerate(passages)], embedder, use_faiss=use_faiss)
        self.passages = passages

    @property
    def uses_faiss(self) -> bool:
        return self._dense._index is not None

    def doc_embeddings(self, indices: Sequence[int]) -> np.ndarray:
        """Stored (unit) embeddings of corpus docs by position, (len(indices), d) float32."""
        return self._dense._emb[np.asarray(list(indices), dtype=np.int64)]

    def retrieve(self, question: str) -> list[dict[str, Any]]:
        """Docs for ``question`` in the order found (by hop, then by similarity).

        Each is a copy of the corpus dict plus ``doc_index`` (corpus position), ``hop``
        (0-based), ``hop_query`` (the query of that hop) and ``query_sim`` (its cosine to
        that query, as the index returned it).
        """
        question = check_question(question)
        found: dict[int, dict[str, Any]] = {}
        query = question
        for hop in range(self.hops):
            if hop > 0:
                query = self.rewriter(question, [dict(d) for d in found.values()], hop)
                if not isinstance(query, str):
                    raise TypeError(f"rewriter: must return str, returned {type(query).__name__} at hop {hop}")
                query = clean_text(query)
            new = 0
            for hit in self._dense.search(query, self.k):
                sim = float(hit.pop("retrieval_score"))
                idx = int(hit.pop("_mh_index"))
                if sim < self.sim_threshold or idx in found:
                    continue
                found[idx] = dict(hit, doc_index=idx, hop=hop, hop_query=query, query_sim=sim)
                new += 1
            if new == 0:
                break
        return list(found.values())

    # The Retriever protocol, so this can stand wherever a single-hop retriever does.
    def search(self, query: str, k: int) -> list[dict[str, Any]]:
        """The first ``k`` docs of :meth:`retrieve` (with ``retrieval_score`` = ``query_sim``)."""
        return [dict(d, retrieval_score=d["query_sim"]) for d in self.retrieve(query)[: max(int(k), 0)]]


@dataclass
class ScoredClaim:
    index: int
    text: str
    score: float  # R(c), float32 from the kernel, held as a Python float
    kept: bool | None = None  # set by filter()
    reason: str | None = None  # "score >= q_hat" / "score < q_hat"


@dataclass
class ScoredClaims:
    question: str
    claims: list[ScoredClaim]
    docs: list[dict[str, Any]]
    error: str | None = None

    @property
    def scores(self) -> np.ndarray:
        return np.array([c.score for c in self.claims], dtype=np.float64)

    def to_record(self) -> dict[str, Any]:
        """``{"question", "claims": [str], "scores": [float]}``, or ``{"error", "question"}``
        (pipelines/_items.py)."""
        if self.error is not None:
            return {"error": self.error, "question": self.question}
        return {"question": self.question, "claims": [c.text for c in self.claims],
                "scores": [float(c.score) for c in self.claims]}


@dataclass
class FilterResult:
    question: str
    q_hat: float
    claims: list[ScoredClaim]
    docs: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None

    @property
    def kept_claims(self) -> list[ScoredClaim]:
        return [c for c in self.claims if c.kept]

    @property
    def removed_claims(self) -> list[ScoredClaim]:
        return [c for c in self.claims if not c.kept]

    @property
    def text(self) -> str:
        """The filtered response: the kept claims joined by spaces."""
        return " ".join(c.text for c in self.kept_claims)

    def to_record(self) -> dict[str, Any]:
        """``{"question", "q_hat", "n_claims", "n_kept", "claims": [{"text", "score", "kept"}],
        "kept": [str]}``, or ``{"error", "question"}`` (pipelines/_items.py)."""
        if self.error is not None:
            return {"error": self.error, "question": self.question}
        claims = [{"text": c.text, "score": float(c.score), "kept": bool(c.kept)} for c in self.claims]
        return {"question": self.question, "q_hat": float(self.q_hat), "n_claims": len(claims),
                "n_kept": sum(c["kept"] for c in claims), "claims": claims, "kept": [c["text"] for c in claims if c["kept"]]}


class ConformalRAG:
    """Claim scoring and calibrated filtering on top of a retriever.

    Parameters
    ----------
    calibrator : ClaimConformal or None
        Used by :meth:`filter`; calibrate it beforehand or with :meth:`calibrate`.
    retriever : MultiHopRetriever, or any object with ``retrieve(question)`` returning docs
        with ``text`` and ``query_sim``, or a :class:`~.protocols.Retriever` (``search``;
        ``retrieval_score`` is then the doc's query similarity, ``k`` below is passed)
    embedder : Embedder, optional
        Embeds claims (and docs without a stored embedding). Default: the retriever's
        ``embedder`` attribute, else MiniLM.
    k : int -- only for a ``search``-only retriever
    backend : passed to ``claim_relevance``
    """

    def __init__(self, calibrator: Any, retriever: Any, embedder: Embedder | None = None, *, k: int = 10,
                 backend: str | None = None) -> None:
        if calibrator is not None and not (hasattr(calibrator, "filter") and hasattr(calibrator, "calibrate")):
            raise TypeError(f"calibrator: expected a ClaimConformal or None, got {type(calibrator).__name__}")
        if not (hasattr(retriever, "retrieve") or hasattr(retriever, "search")):
            raise TypeError(f"retriever: needs a retrieve(question) or search(query, k) method, got {type(retriever).__name__}")
        self.calibrator = calibrator
        self.retriever = retriever
        if embedder is None:
            embedder = getattr(retriever, "embedder", None)
        if embedder is None:
            from ...models import MiniLMEmbedder

            embedder = MiniLMEmbedder()
        self.embedder = embedder
        self.k = check_int(k, "k", minimum=1)
        self.backend = backend

    # ------------------------------------------------------------------ inputs
    def _claims_of(self, claims: Any, response: Any) -> list[str]:
        if claims is not None:
            if isinstance(claims, str) or not isinstance(claims, Iterable):
                raise TypeError(f"claims: expected a list of str, got {type(claims).__name__}")
            claims = list(claims)
            for n, c in enumerate(claims):
                if not isinstance(c, str):
                    raise TypeError(f"claims: item {n} is {type(c).__name__}, expected str")
            return [clean_text(c) for c in claims]
        if response is None:
            raise ValueError("claims: give claims or a response to split into sentences")
        if not isinstance(response, str):
            raise TypeError(f"response: expected str, got {type(response).__name__}")
        return split_sentences(response)

    def retrieve(self, question: str) -> list[dict[str, Any]]:
        """Docs for ``question``, each with ``query_sim`` (its similarity to the query that found it)."""
        question = check_question(question)
        if hasattr(self.retriever, "retrieve"):
            docs = [dict(d) for d in self.retriever.retrieve(question)]
        else:
            docs = [dict(d, query_sim=float(d["retrieval_score"])) for d in self.retriever.search(question, self.k)]
        for d in docs:  # a user's retriever may return raw text; the embedder reads it
            if isinstance(d.get("text"), str):
                d["text"] = clean_text(d["text"])
        return docs

    def _check_docs(self, docs: Any) -> list[dict[str, Any]]:
        out = []
        for n, d in enumerate(docs):
            if not isinstance(d, Mapping) or not isinstance(d.get("text"), str):
                raise TypeError(f"docs: item {n} is not a dict with str 'text'")
            sim = d.get("query_sim")
            if isinstance(sim, bool) or not isinstance(sim, numbers.Real) or not math.isfinite(float(sim)):
                raise ValueError(f"docs: item {n} needs a finite float 'query_sim'")
            out.append(dict(d, text=clean_text(d["text"])))
        return out

    def _doc_embeddings(self, docs: list[dict[str, Any]]) -> np.ndarray:
        stored = hasattr(self.retriever, "doc_embeddings") and all(isinstance(d.get("doc_index"), numbers.Integral) for d in docs)
        if stored and docs:
            return np.asarray(self.retriever.doc_embeddings([d["doc_index"] for d in docs]), dtype=np.float32)
        return np.asarray(self.embedder.encode([d["text"] for d in docs]), dtype=np.float32)

    # ------------------------------------------------------------------ scoring
    def _prepare(self, item: Mapping[str, Any]) -> tuple[str, list[str], list[dict[str, Any]]]:
        if not isinstance(item, Mapping):
            raise TypeError(f"items: expected dicts, got {type(item).__name__}")
        question = check_question(item.get("question"))
        claims = self._claims_of(item.get("claims"), item.get("response"))
        docs = self._check_docs(item["docs"]) if item.get("docs") is not None else self.retrieve(question)
        return question, claims, docs

    def _score_prepared(self, prepared: list[tuple[str, list[str], list[dict[str, Any]]]]) -> list[np.ndarray]:
        """One fused claim_relevance call for all prepared items."""
        all_docs = [d for _, _, docs in prepared for d in docs]
        all_claims = [c for _, claims, _ in prepared for c in claims]
        doc_off = np.r_[0, np.cumsum([len(docs) for _, _, docs in prepared])].astype(np.int64)
        claim_off = np.r_[0, np.cumsum([len(claims) for _, claims, _ in prepared])].astype(np.int64)
        claim_emb = checked_embeddings(self.embedder.encode(all_claims), len(all_claims), what="claims") if all_claims else None
        dim = claim_emb.shape[1] if claim_emb is not None else None
        doc_emb = checked_embeddings(self._doc_embeddings(all_docs), len(all_docs), what="docs") if all_docs else None
        if dim is None:
            return [np.zeros(0, dtype=np.float64) for _ in prepared]
        if doc_emb is None:
            doc_emb = np.zeros((0, dim), dtype=np.float32)
        sim = np.array([float(d["query_sim"]) for d in all_docs], dtype=np.float32)
        # query_emb is only shape-checked when query_doc_sim is given: no need to embed the questions.
        query_emb = np.zeros((len(prepared), dim), dtype=np.float32)
        r = claim_relevance(query_emb, doc_emb, doc_off, claim_emb, claim_off, query_doc_sim=sim, backend=self.backend)
        r = np.asarray(r, dtype=np.float64)
        return [r[claim_off[i]:claim_off[i + 1]] for i in range(len(prepared))]

    def score_claims(self, question: str, claims: list[str] | None = None, response: str | None = None, *,
                     docs: Sequence[Mapping[str, Any]] | None = None) -> ScoredClaims:
        """R(c) for each claim of one answer.

        Parameters
        ----------
        question : str
        claims : list of str, optional -- default ``split_sentences(response)``
        response : str, optional
        docs : list of dict, optional -- already retrieved docs (``text``, ``query_sim``,
            optionally ``doc_index``); default: ``self.retrieve(question)``
        """
        q, cl, dc = self._prepare({"question": question, "claims": claims, "response": response, "docs": docs})
        (r,) = self._score_prepared([(q, cl, dc)])
        return ScoredClaims(q, [ScoredClaim(i, t, float(s)) for i, (t, s) in enumerate(zip(cl, r))], dc)

    def score_batch(self, items: Iterable[Mapping[str, Any]], *, progress: bool = True) -> list[ScoredClaims]:
        """Score many answers; each item has ``question`` and ``claims`` or ``response``
        (and optionally ``docs``). Retrieval runs per item (with a tqdm bar when
        ``progress`` and tqdm is installed), then one fused kernel call scores every claim.
        A failing item comes back with ``error`` set and no claims; the others are kept.
        """
        items = list(items)
        iterator = progress_iter(items, enabled=progress, desc="conformal", unit="query")
        prepared: list[Any] = []
        errors: list[str | None] = []
        for n, item in enumerate(iterator):
            try:
                prepared.append(self._prepare(item))
                errors.append(None)
            except Exception as exc:  # one bad item must not lose the batch
                logger.warning("conformal: item %d failed: %s", n, exc)
                prepared.append(None)
                errors.append(f"{type(exc).__name__}: {exc}")
        good = [i for i, p in enumerate(prepared) if p is not None]
        scores: dict[int, np.ndarray] = {}
        try:
            scores = dict(zip(good, self._score_prepared([prepared[i] for i in good])))
        except Exception:  # find the culprit: score the items one by one
            for i in good:
                try:
                    scores[i] = self._score_prepared([prepared[i]])[0]
                except Exception as exc:
                    logger.warning("conformal: item %d failed: %s", i, exc)
                    errors[i] = f"{type(exc).__name__}: {exc}"
        out = []
        for i, item in enumerate(items):
            if i in scores:
                q, cl, dc = prepared[i]
                out.append(ScoredClaims(q, [ScoredClaim(j, t, float(s)) for j, (t, s) in enumerate(zip(cl, scores[i]))], dc))
            else:
                question = item.get("question", "") if isinstance(item, Mapping) else ""
                out.append(ScoredClaims(str(question), [], [], error=errors[i]))
        return out

    # ------------------------------------------------------------------ calibration and filtering
    def _calibrator(self) -> Any:
        if self.calibrator is None:
            raise RuntimeError("calibrator: none given; pass a ClaimConformal to ConformalRAG")
        if self.calibrator.q_hat is None:
            raise RuntimeError("calibrator: not calibrated; call calibrate() first")
        return self.calibrator

    def calibrate(self, items: Iterable[Mapping[str, Any]], *, progress: bool = True) -> "ConformalRAG":
        """Score labelled answers and calibrate the calibrator on them. Each item is as for
        :meth:`score_batch` plus ``labels``: one bool (True = supported) per claim. Any
        failing item raises (a calibration set must be complete)."""
        if self.calibrator is None:
            raise RuntimeError("calibrator: none given; pass a ClaimConformal to ConformalRAG")
        items = list(items)
        scored = self.score_batch(items, progress=progress)
        labels = []
        for n, (item, s) in enumerate(zip(items, scored)):
            if s.error:
                raise ValueError(f"items: item {n} failed: {s.error}")
            lab = item.get("labels")
            if lab is None or len(lab) != len(s.claims):
                raise ValueError(f"labels: item {n} needs one label per claim ({len(s.claims)})")
            labels.extend(bool(x) for x in lab)
        scores = np.concatenate([s.scores for s in scored]) if scored else np.zeros(0)
        offsets = np.r_[0, np.cumsum([len(s.claims) for s in scored])].astype(np.int64)
        self.calibrator.calibrate(scores, np.asarray(labels, dtype=bool), offsets)
        return self

    def _apply(self, scored: ScoredClaims) -> FilterResult:
        cal = self._calibrator()
        q_hat = float(cal.q_hat)
        keep = cal.filter(scored.scores, np.array([0, len(scored.claims)], dtype=np.int64))
        claims = []
        for c, k in zip(scored.claims, keep):
            claims.append(ScoredClaim(c.index, c.text, c.score, bool(k), "score >= q_hat" if k else "score < q_hat"))
        return FilterResult(scored.question, q_hat, claims, scored.docs)

    def filter(self, question: str, claims: list[str] | None = None, response: str | None = None, *,
               docs: Sequence[Mapping[str, Any]] | None = None) -> FilterResult:
        """Score the claims (as :meth:`score_claims`) and keep those with R(c) >= q_hat."""
        cal = self._calibrator()
        if isinstance(cal.q_hat, dict):
            raise ValueError("calibrator: group-conditional calibrators are not supported here; filter the scores with it directly")
        return self._apply(self.score_claims(question, claims, response, docs=docs))

    def run_batch(self, items: Iterable[Mapping[str, Any]], *, progress: bool = True) -> list[FilterResult]:
        """:meth:`filter_batch` under the method contract's name (pipelines/_items.py)."""
        return self.filter_batch(items, progress=progress)

    def filter_batch(self, items: Iterable[Mapping[str, Any]], *, progress: bool = True) -> list[FilterResult]:
        """:meth:`filter` for many items (as :meth:`score_batch`); failures per item."""
        cal = self._calibrator()
        if isinstance(cal.q_hat, dict):
            raise ValueError("calibrator: group-conditional calibrators are not supported here; filter the scores with it directly")
        out = []
        for s in self.score_batch(items, progress=progress):
            if s.error:
                out.append(FilterResult(s.question, float(cal.q_hat), [], [], error=s.error))
            else:
                out.append(self._apply(s))
        return out


# ---------------------------------------------------------------------- the packaged sample
def load_sample() -> dict[str, Any]:
    """The packaged labelled sample (``rrag_kernels/data/conformal_sample.json``): ``docs``
    and ``data`` (responses in the released ``claims[{subclaim, annotation,
    relevance-score}]`` schema, readable with :func:`rrag_kernels.pipelines.conformal.from_responses`
    and ``score="relevance"``)."""
    import json
    from importlib import resources

    return json.loads(resources.files("rrag_kernels").joinpath("data/conformal_sample.json").read_text(encoding="utf-8"))


def score_sample(sample: Mapping[str, Any], embedder: Embedder | None = None, *, progress: bool = False,
                 **retriever_kwargs: Any) -> list[list[float]]:
    """Recompute the sample's claim scores: :class:`MultiHopRetriever` over ``sample["docs"]``
    (defaults: 3 hops, k = 10, threshold 0.3) and R(c) for each response's claims."""
    retriever = MultiHopRetriever([d["text"] for d in sample["docs"]], embedder, **retriever_kwargs)
    rag = ConformalRAG(None, retriever)
    items = [{"question": r["prompt"], "claims": [c["subclaim"] for c in r["claims"]]} for r in sample["data"]]
    out = []
    for n, s in enumerate(rag.score_batch(items, progress=progress)):
        if s.error:
            raise ValueError(f"sample: response {n} failed: {s.error}")
        out.append([float(c.score) for c in s.claims])
    return out
