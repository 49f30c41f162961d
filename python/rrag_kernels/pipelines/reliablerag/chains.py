"""ReliableRAG, offline step: triples, credibility, reasoning chains and the TBS context.

The method (ReliableRAG, building on TRACE's ``construct_reasoning_chains``):

1. every passage's knowledge triples become :class:`Triple` records (here supplied with the
   input: :func:`triples_from_passages`);
2. each triple gets a credibility c(t) in [0, 10] (:func:`credibility`, a registry of
   sources: ``"oracle"`` and ``"uniform"`` now; an LLM judge or cross-passage agreement are
   new entries of :data:`CREDIBILITY_SOURCES`);
3. a beam search grows reasoning chains hop by hop: each unfinished chain is embedded as
   ``"knowledge triples: <chain so far> question: <q>"``, the kernel
   :func:`rrag_kernels.ops.triple_reliability` gives its top-K unused triples by
   R(t) = alpha * cos(q, t) + (1 - alpha) * c(t) / 10, a **selector** turns them into
   probabilities over the lettered options (A = stop, B, C, ... = the candidates in
   descending R), and :func:`rrag_kernels.ops.beam_step` keeps the best ``max_chains``
   children (:func:`build_chains`);
4. the context given to the reader is the chains' triples, "head relation tail",
   deduplicated in chain-score order (:func:`tbs_context`).

A chain never takes a triple it already holds (the kernel masks used triples; this deviates
from the reference code, which lets them come back). After ``max_hops`` hops the chains
still open are closed as they are.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Protocol, Sequence

import numpy as np

from ...models import Embedder
from ...ops import beam_step, check_choice, check_int, check_real, triple_reliability

logger = logging.getLogger("rrag_kernels")


@dataclass(frozen=True)
class Triple:
    """One knowledge triple of a passage.

    Attributes
    ----------
    head, relation, tail : str
    passage : int
        Index of its passage in the list given to :func:`triples_from_passages`.
    sentence : int
        0-based index of the sentence of the passage it was read from (-1: unknown).
    text : str
        ``"head relation tail"``: what is embedded and what the reader sees.
    """

    head: str
    relation: str
    tail: str
    passage: int
    sentence: int
    text: str


def triples_from_passages(passages: Sequence[Mapping[str, Any]]) -> list[Triple]:
    """The supplied triples of each passage, passage by passage, as :class:`Triple` records.

    Parameters
    ----------
    passages : sequence of dict
        Each with ``triples``: a list of ``{"head", "relation", "tail", "sentence"}``
        (``sentence`` optional). A passage without ``triples`` contributes none.

    Returns
    -------
    list of Triple
        Passage order, then the order of each passage's list.

    Raises
    ------
    ValueError
        A triple lacks ``head``, ``relation`` or ``tail``, or one of them is not a
        non-empty str.
    """
    out = []
    for p, passage in enumerate(passages):
        for j, raw in enumerate(passage.get("triples") or ()):
            parts = []
            for key in ("head", "relation", "tail"):
                value = raw.get(key) if isinstance(raw, Mapping) else None
                if not isinstance(value, str) or not value.strip():
                    raise ValueError(f"passages: passage {p} triple {j}: {key!r} must be a non-empty str")
                parts.append(" ".join(value.split()))
            sentence = raw.get("sentence", -1)
            sentence = int(sentence) if isinstance(sentence, int) and not isinstance(sentence, bool) else -1
            out.append(Triple(*parts, passage=p, sentence=sentence, text=" ".join(parts)))
    return out


# --------------------------------------------------------------------------- credibility

#: A credibility source: ``(question, passages, triples, **options) -> (T,) float64 in [0, 10]``
#: (or an object with such a ``scores`` attribute, e.g. :class:`.sources.CredibilityScores`).
CredibilitySource = Callable[[str, Sequence[Mapping[str, Any]], Sequence[Triple]], np.ndarray]


def _oracle_credibility(question: str, passages: Sequence[Mapping[str, Any]],
                        triples: Sequence[Triple]) -> np.ndarray:
    """The paper's Ideal setting: 1 for a triple of an ``injected`` passage, 10 otherwise.
    Reads the passages' ``label`` (by definition: the oracle is the labels)."""
    labels = []
    for n, p in enumerate(passages):
        if "label" not in p:
            raise ValueError(f"credibility='oracle': passage {n} has no 'label'")
        labels.append(p["label"])
    return np.array([1.0 if labels[t.passage] == "injected" else 10.0 for t in triples], dtype=np.float64)


def _uniform_credibility(question: str, passages: Sequence[Mapping[str, Any]],
                         triples: Sequence[Triple]) -> np.ndarray:
    """Every triple 10: TRACE without credibility (R is then alpha * cos + (1 - alpha))."""
    return np.full(len(triples), 10.0, dtype=np.float64)


#: Registered credibility sources by name (:mod:`.sources` adds ``"llm"`` and ``"agreement"``).
CREDIBILITY_SOURCES: dict[str, CredibilitySource] = {
    "oracle": _oracle_credibility,
    "uniform": _uniform_credibility,
}


def credibility(question: str, passages: Sequence[Mapping[str, Any]], triples: Sequence[Triple], *,
                source: str | CredibilitySource = "oracle", **options: Any) -> np.ndarray:
    """Credibility c(t) in [0, 10] of each triple.

    Parameters
    ----------
    question : str
    passages : sequence of dict
        The passages the triples index (``Triple.passage``).
    triples : sequence of Triple
    source : str or callable
        A name in :data:`CREDIBILITY_SOURCES` (``"oracle"``: 10 for the question's
        non-injected passages, 1 for injected ones, from ``label``; ``"uniform"``: all 10)
        or a callable of the same signature.
    **options
        Passed to the source (``llm=`` for ``"llm"``, ``judge=`` for ``"agreement"``).

    Returns
    -------
    ndarray, shape (T,), float64, finite, in [0, 10]

    Raises
    ------
    ValueError
        An unknown source name, a source's output of the wrong shape or out of range, or
        ``"oracle"`` on passages without ``label``.
    """
    if callable(source):
        fn = source
    else:
        fn = CREDIBILITY_SOURCES[check_choice(source, "source", tuple(CREDIBILITY_SOURCES))]
    out = fn(question, passages, triples, **options)
    out = np.asarray(getattr(out, "scores", out), dtype=np.float64)
    if out.shape != (len(triples),):
        raise ValueError(f"source: expected shape ({len(triples)},), got {out.shape}")
    if not (np.isfinite(out).all() and ((out >= 0) & (out <= 10)).all()):
        raise ValueError("source: credibility must be finite and in [0, 10]")
    return out


# --------------------------------------------------------------------------- selectors


class ChainSelector(Protocol):
    """Chooses how each chain continues: probabilities over its lettered options."""

    def choice_probs(self, question: str, chains: Sequence[Sequence[Triple]],
                     candidates: Sequence[Sequence[Triple]], scores: np.ndarray) -> np.ndarray:
        """Probabilities of the options of each chain.

        Parameters
        ----------
        question : str
        chains : sequence of B sequences of Triple
            The chains so far (unfinished ones only).
        candidates : sequence of B sequences of Triple
            Chain b's candidates, descending R (at most K; fewer when few are unused).
        scores : ndarray, shape (B, K), float32
            Their R, descending per row, ``-inf`` past ``len(candidates[b])``.

        Returns
        -------
        ndarray, shape (B, K + 1), float64
            Column 0 = 'A' (stop), column c >= 1 = candidate c - 1; entries in [0, 1], NaN
            for a letter that is not an option.
        """
        ...


@dataclass(frozen=True)
class ReliabilitySelector:
    """A deterministic, model-free selector: mass follows R, stopping grows with length.

    For a chain of n triples with m candidates of reliability R_1 >= ... >= R_m:

    * P(A) = 0 for n = 0 (an empty chain never stops), 1 when m = 0, else
      ``1 - (1 - stop_rate) ** n`` (0.5, 0.75, 0.875 ... for the default 0.5);
    * candidate i gets ``(1 - P(A)) * softmax(R / temperature)_i`` over the m shown;
    * letters past m are NaN.

    Equal R give equal probabilities, so :func:`rrag_kernels.ops.beam_step` breaks the tie
    by the lower letter (the kernel's order: lower triple index).

    Parameters
    ----------
    temperature : float > 0
    stop_rate : float in [0, 1]
    """

    temperature: float = 0.05
    stop_rate: float = 0.5

    def __post_init__(self) -> None:
        t = check_real(self.temperature, "temperature")
        if not (np.isfinite(t) and t > 0):
            raise ValueError(f"temperature: must be finite and > 0, got {t}")
        s = check_real(self.stop_rate, "stop_rate")
        if not 0.0 <= s <= 1.0:
            raise ValueError(f"stop_rate: must satisfy 0 <= stop_rate <= 1, got {s}")

    def choice_probs(self, question: str, chains: Sequence[Sequence[Triple]],
                     candidates: Sequence[Sequence[Triple]], scores: np.ndarray) -> np.ndarray:
        """See :meth:`ChainSelector.choice_probs`."""
        scores = np.asarray(scores, dtype=np.float64)
        out = np.full((scores.shape[0], scores.shape[1] + 1), np.nan)
        for b, (chain, cands) in enumerate(zip(chains, candidates)):
            m, n = len(cands), len(chain)
            p_stop = 1.0 if m == 0 else (0.0 if n == 0 else 1.0 - (1.0 - self.stop_rate) ** n)
            out[b, 0] = p_stop
            if m:
                z = scores[b, :m] / self.temperature
                w = np.exp(z - z.max())
                out[b, 1:m + 1] = np.clip((1.0 - p_stop) * w / w.sum(), 0.0, 1.0)
        return out


#: Registered selectors by name (:mod:`.selector` adds ``"llm"``).
SELECTORS: dict[str, Callable[..., ChainSelector]] = {"reliability": ReliabilitySelector}


def get_selector(selector: str | ChainSelector, **options: Any) -> ChainSelector:
    """A selector instance: a name in :data:`SELECTORS` (built with ``options``, e.g.
    ``llm=`` for ``"llm"``) or an object with ``choice_probs`` (returned as is)."""
    if isinstance(selector, str):
        return SELECTORS[check_choice(selector, "selector", tuple(SELECTORS))](**options)
    if not callable(getattr(selector, "choice_probs", None)):
        raise TypeError(f"selector: expected a name in {tuple(SELECTORS)} or an object with choice_probs, "
                        f"got {type(selector).__name__}")
    return selector


# --------------------------------------------------------------------------- chains


@dataclass(frozen=True)
class ChainParams:
    """Constants of the chain search (the paper's / TRACE's defaults).

    Attributes
    ----------
    alpha : float in [0, 1]
        Weight of similarity in R (1 = TRACE: similarity only).
    k : int >= 1
        Candidates shown per chain and hop.
    beams : int >= 1
        Letters taken per chain and hop.
    max_chains : int >= 1
        F, chains kept per hop.
    max_hops : int >= 1
        L, the most triples in a chain.
    min_prob : float in [0, 1]
        A letter of lower probability makes no child.
    max_context : int >= 1
        The most triples in the TBS context.
    """

    alpha: float = 0.4
    k: int = 20
    beams: int = 5
    max_chains: int = 20
    max_hops: int = 4
    min_prob: float = 1e-4
    max_context: int = 10

    def validate(self) -> "ChainParams":
        """Check every field; returns self. ValueError / TypeError naming the field."""
        for name in ("k", "beams", "max_chains", "max_hops", "max_context"):
            check_int(getattr(self, name), name, minimum=1)
        for name in ("alpha", "min_prob"):
            value = check_real(getattr(self, name), name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name}: must satisfy 0 <= {name} <= 1, got {value}")
        return self


@dataclass(frozen=True)
class Chain:
    """A reasoning chain: indices into the question's triples, in hop order.

    Attributes
    ----------
    triples : tuple of int
    score : float
        Product of the selector's probabilities along the chain.
    finished : bool
        It chose 'A' (False: it was closed at ``max_hops`` or no candidate was left).
    """

    triples: tuple[int, ...]
    score: float
    finished: bool


@dataclass
class ChainResult:
    """What :func:`build_chains` found for one question.

    Attributes
    ----------
    chains : list of Chain
        Best score first (at most ``max_chains``).
    context : list of str
        The TBS context (:func:`tbs_context`).
    context_triples : list of int
        The triple behind each context string.
    first_hop : list of int
        The top-K candidates of the first hop (the empty chain), descending R.
    hops : int
        Hops run.
    """

    chains: list[Chain]
    context: list[str]
    context_triples: list[int]
    first_hop: list[int]
    hops: int


def chain_query(question: str, chain: Sequence[Triple]) -> str:
    """The text embedded for a chain: ``"knowledge triples: t1; t2 question: <q>"``."""
    return f"knowledge triples: {'; '.join(t.text for t in chain)} question: {question}"


def tbs_context(triples: Sequence[Triple], chains: Sequence[Chain], max_context: int) -> list[int]:
    """The TBS context: the chains' triples in chain order (best first), each chain's in hop
    order, the first of each distinct ``text`` kept, at most ``max_context``.

    Returns
    -------
    list of int
        Indices into ``triples``.
    """
    seen, out = set(), []
    for chain in chains:
        for t in chain.triples:
            if len(out) >= max_context:
                return out
            if triples[t].text not in seen:
                seen.add(triples[t].text)
                out.append(t)
    return out


def build_chains(question: str, triples: Sequence[Triple], credibility: Any, embedder: Embedder, *,
                 params: ChainParams | None = None, selector: str | ChainSelector = "reliability",
                 triple_emb: np.ndarray | None = None, timings: dict[str, float] | None = None) -> ChainResult:
    """ReliableRAG's beam search over reasoning chains for one question.

    Hop by hop, every unfinished chain is embedded (:func:`chain_query`), scored against
    the triples it has not used with :func:`rrag_kernels.ops.triple_reliability` (top
    ``k``), given option probabilities by ``selector`` and grown by
    :func:`rrag_kernels.ops.beam_step` (``beams``, ``min_prob``, ``max_chains``). Deterministic
    for a deterministic embedder and selector.

    Parameters
    ----------
    question : str
    triples : sequence of Triple, length T
    credibility : array, shape (T,), in [0, 10]
    embedder : Embedder
    params : ChainParams, optional
    selector : str or ChainSelector
    triple_emb : ndarray, shape (T, d), optional
        Precomputed ``embedder.encode([t.text for t in triples])``.
    timings : dict, optional
        When given, ``timings["kernels"]`` is increased by the seconds spent in the two
        kernels (``triple_reliability`` and ``beam_step``).

    Returns
    -------
    ChainResult
    """
    params = (params or ChainParams()).validate()
    chooser = get_selector(selector)
    cred = np.asarray(credibility, dtype=np.float64)
    if cred.shape != (len(triples),):
        raise ValueError(f"credibility: expected shape ({len(triples)},), got {cred.shape}")
    if not triples:
        return ChainResult([], [], [], [], 0)
    if triple_emb is None:
        triple_emb = embedder.encode([t.text for t in triples])
    triple_emb = np.ascontiguousarray(triple_emb, dtype=np.float32)
    n_triples = len(triples)
    chains: list[tuple[int, ...]] = [()]
    scores = np.ones(1)
    finished = np.zeros(1, dtype=bool)
    first_hop: list[int] = []
    hops = 0
    for hop in range(params.max_hops):
        open_rows = np.flatnonzero(~finished)
        if open_rows.size == 0:
            break
        hops += 1
        open_chains = [[triples[t] for t in chains[b]] for b in open_rows]
        q_emb = embedder.encode([chain_query(question, c) for c in open_chains])
        used = np.zeros((open_rows.size, n_triples), dtype=bool)
        for r, b in enumerate(open_rows):
            used[r, list(chains[b])] = True
        t0 = time.perf_counter()
        sc, idx = triple_reliability(q_emb, triple_emb, cred, alpha=params.alpha, used=used, k=params.k)
        kernel_s = time.perf_counter() - t0
        cand_idx = [[int(i) for i in row if i >= 0] for row in idx]
        if hop == 0:
            first_hop = cand_idx[0]
        probs = np.full((len(chains), params.k + 1), np.nan)
        probs[open_rows] = chooser.choice_probs(question, open_chains,
                                                [[triples[i] for i in row] for row in cand_idx], sc)
        n_cand = np.zeros(len(chains), dtype=np.int64)
        n_cand[open_rows] = [len(row) for row in cand_idx]
        cand_of = dict(zip(open_rows.tolist(), cand_idx))
        t0 = time.perf_counter()
        step = beam_step(scores, finished, probs, n_cand, np.array([0, len(chains)], dtype=np.int64),
                         beams=params.beams, min_prob=params.min_prob, max_chains=params.max_chains)
        if timings is not None:
            timings["kernels"] = timings.get("kernels", 0.0) + kernel_s + time.perf_counter() - t0
        chains = [chains[p] if c <= 0 else chains[p] + (cand_of[p][c - 1],)
                  for p, c in zip(step.parent.tolist(), step.choice.tolist())]
        scores = np.asarray(step.score, dtype=np.float64)
        finished = np.asarray(step.finished, dtype=bool)
        logger.debug("reliablerag: hop %d: %d chains, %d finished", hop + 1, len(chains), int(finished.sum()))
    kept = [Chain(c, float(s), bool(f)) for c, s, f in zip(chains, scores, finished)]
    context = tbs_context(triples, kept, params.max_context)
    return ChainResult(kept, [triples[t].text for t in context], context, first_hop, hops)
