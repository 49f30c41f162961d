"""MIRAGE: defended claims from retrieved passages via a cross-source NLI claim graph.

Reproduces "Defending Long-Form RAG Against Misinformation Pollution" with every constant a
parameter (:class:`MirageParams`):

1. claims = sentences of the top-k passages; each keeps its passage, registered domain
   and r̃ (the passage's retrieval score mapped to [0, 1], see :func:`top_passages`);
   the N highest-r̃ claims are kept (ties by index);
2. cross-source pairs whose token containment overlap is >= tau, capped at P_max
   (``pairing="semantic"`` / ``"hybrid"`` add MiniLM-cosine pairs, beyond the paper);
3. NLI on each pair in both directions -> support / contradiction edges;
4. counter-evidence probing of the top-M claims through a retriever (optional);
5. s(c) = ln(1 + n(c)) + alpha * trust(domain) + beta * r̃(c);
6. greedy removal maximising F(S) = sum s + sum over edges in S of (w_supp - w_contr);
7. gate on the defended set: contradiction ratio <= r_max, distinct domains >= d_min
   (and, optionally, a minimum share of kept claims with cross-source support); on BLOCK
   the prompt falls back as ``on_block`` says (parametric answer, refusal, or the retrieved
   passages unchanged).

``mode="corroboration"`` (the default) replaces step 6 and counts independent sources: the
passages are grouped into source units (same registered domain, or paraphrases beyond the
question's topic: pipelines/mirage/units.py), a coordinated unit's claims that state what no
other passage does are withheld, each contradiction is decided by corroboration from other
passages (pipelines/mirage/corroboration.py), and the gate's d_min counts units.
``mode="paper"`` is the paper's method unchanged.

The pipeline only reads a passage's ``text``, ``url``, ``title`` and ``retrieval_score``;
every other key is ignored.
"""

from __future__ import annotations

import functools
import logging
import math
import time
from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from ...models import (
    Embedder,
    NLIScorer,
    Retriever,
    checked_encode,
    checked_predict,
    clean_text,
    split_sentences,
    trust_score,
    trust_table,
    url_domain,
)
from ...ops import (
    check_choice,
    claim_token_ids,
    cosine_matrix,
    gate_stats,
    greedy_prune,
    label_columns,
    nli_graph,
    select_pairs,
)
from .._items import CheckedPassages, check_item, check_passages, check_question
from .._progress import progress_iter
from .corroboration import resolve_by_corroboration, slot_types, supporting_sources
from .prompts import PARAMETRIC_PROMPT, PASSTHROUGH_PROMPT, REFUSAL_PROMPT, checked_prompt
from .slots import with_slot_conflicts
from .types import PASSAGE_KEYS, SCORE_KINDS, Claim, MirageParams, MirageResult
from .units import (
    clashing_units,
    content_terms,
    coordinated_units,
    disputed,
    source_units,
    topic_residuals,
    unconfirmed_consensus,
)

logger = logging.getLogger("rrag_kernels")


class MirageDefense:
    """The MIRAGE defense, usable on any retrieved passages.

    Parameters
    ----------
    nli : NLIScorer, str or None
        An NLI scorer, a name/path for :func:`rrag_kernels.models.nli.load`, or None for the
        offline default.
    retriever : Retriever, optional
        Enables counter-evidence probing (step 4); without it that step is skipped.
    embedder : Embedder, optional
        Needed by ``pairing="semantic"``/``"hybrid"``; default MiniLM (offline) on demand.
    **params
        Any :class:`MirageParams` field.
    """

    def __init__(
        self,
        nli: NLIScorer | str | None = None,
        retriever: Retriever | None = None,
        embedder: Embedder | None = None,
        *,
        params: MirageParams | None = None,
        **overrides: Any,
    ):
        base = params if params is not None else MirageParams()
        unknown = set(overrides) - set(MirageParams.__dataclass_fields__)
        if unknown:
            raise TypeError(f"{sorted(unknown)[0]}: not a MirageParams field")
        self.params = replace(base, **overrides).validate()
        self._trust = trust_table(self.params.trust)
        url_domain("example.org")  # parse the bundled suffix list now, not inside the first timed defend()
        if nli is None or isinstance(nli, str):
            from ...models import nli as nli_module

            nli = nli_module.load(nli)
        if not hasattr(nli, "predict_proba") or not hasattr(nli, "labels"):
            raise TypeError("nli: expected an object with .labels and .predict_proba(premises, hypotheses)")
        self.nli = nli
        self.retriever = retriever
        self._embedder = embedder
        self._warned_no_embedder = False
        p = self.params
        if embedder is None and p.mode == "corroboration" and p.units == "content":
            # Loaded now, like the judge, so that the first defend() (a server's first request)
            # does not pay for it; one MiniLM per process, shared by every defense.
            try:
                self._embedder = _shared_minilm()
            except ImportError as exc:
                self._warn_no_embedder(exc)

    # ------------------------------------------------------------------ public API
    def defend(self, question: str, passages: Sequence[Mapping[str, Any]]) -> MirageResult:
        """Run the defense on one question's retrieved passages.

        Parameters
        ----------
        question : str
        passages : sequence of mapping
            ``text`` (str, required), optional ``url``, ``title``, ``retrieval_score``
            (float); any other key is ignored.

        Returns
        -------
        MirageResult
            The question and the passage texts are cleaned first by
            :func:`rrag_kernels.models.clean_text` (lone surrogates -> U+FFFD, control
            characters -> space): the claims, the NLI scorer, the retriever's probe
            queries and the prompt all read the cleaned text, so the result equals that of
            the cleaned input.

        Raises
        ------
        TypeError, ValueError
            Bad inputs; also a scorer output that is not (n, 3) probabilities in [0, 1]
            with rows summing to 1, or an embedder output that is not finite (n, d)
            (messages start with ``nli:`` / ``embedder:``). What the scorer, embedder or
            retriever raises propagates; :meth:`defend_batch` records it on the item.
        """
        state = self._prepare(question, passages)
        t = time.perf_counter()
        fwd, bwd = self._pair_nli(state.texts, state.pair_i, state.pair_j)
        state.timings["nli_s"] = time.perf_counter() - t
        return self._finish(state, fwd, bwd)

    def _prepare(self, question: str, passages: Sequence[Mapping[str, Any]],
                 checked: CheckedPassages | None = None) -> "_Prepared":
        """Steps 1-2: clean the inputs, make the claims, select the pairs for NLI."""
        question = check_question(question)
        # ``checked``: defend_batch has already read the item by the same rule (check_item, PASSAGE_KEYS)
        clean = checked if checked is not None else \
            _clean_passages(passages, skip_bad=self.params.on_bad_passage == "skip")
        for n, why in clean.skipped:
            logger.warning("mirage: passage %d left out (on_bad_passage='skip'): %s", n, why)
        p = self.params
        timings: dict[str, float] = {}
        t0 = time.perf_counter()
        claims = self._make_claims(clean)
        timings["split_s"] = time.perf_counter() - t0
        active = [c for c in claims if c.reason is None]
        coordinated: dict[int, set[str]] = {}
        domain_unit: dict[int, int] = {}
        if p.mode == "corroboration":
            t = time.perf_counter()
            coordinated = self._assign_units(question, clean, claims, domain_unit)
            timings["units_s"] = time.perf_counter() - t

        t = time.perf_counter()
        texts = [c.text for c in active]
        token_ids, token_offsets = claim_token_ids(texts)
        source_ids = np.array([c.source for c in active], dtype=np.int64)
        pair_i, pair_j, overlap = select_pairs(
            token_ids, token_offsets, source_ids, tau=p.tau, max_pairs=p.max_pairs
        )
        if p.mode == "corroboration" and p.tau_slot < p.tau:
            pair_i, pair_j, overlap = _with_slot_pairs(texts, token_ids, token_offsets, source_ids, pair_i, pair_j,
                                                       overlap, p.tau_slot, p.max_pairs)
        timings["kernels_s"] = time.perf_counter() - t
        if p.pairing != "lexical":
            t = time.perf_counter()
            pair_i, pair_j, overlap = self._semantic_pairs(texts, source_ids, pair_i, pair_j, overlap)
            timings["embed_s"] = time.perf_counter() - t
        return _Prepared(question, clean, claims, active, texts, source_ids, pair_i, pair_j, timings, coordinated,
                         domain_unit, np.asarray(overlap, dtype=np.float64))

    def _finish(self, state: "_Prepared", fwd: np.ndarray, bwd: np.ndarray) -> MirageResult:
        """Steps 3-7 from the pairs' NLI probabilities: graph, probing, scores, the kept set,
        the gate and the prompt."""
        p = self.params
        question, clean, claims, active, timings = state.question, state.clean, state.claims, state.active, state.timings
        pair_i, pair_j = state.pair_i, state.pair_j
        n = len(active)
        t = time.perf_counter()
        graph = nli_graph(pair_i, pair_j, fwd, bwd, n, label_order=self.nli.labels, reduce=p.nli_reduce)
        judge_graph = graph  # what the judge said (a unit splits only on the judge's word)
        if p.mode == "corroboration" and p.slot_conflicts:
            graph = with_slot_conflicts(graph, state.texts, pair_i, pair_j, n, name_overlap=p.name_overlap)
        timings["kernels_s"] += time.perf_counter() - t

        penalty = self._probe(active, timings)

        t = time.perf_counter()
        support = np.asarray(graph.support_count, dtype=np.float64)
        trust = np.array([c.trust for c in active], dtype=np.float64)
        r_tilde = np.array([c.r_tilde for c in active], dtype=np.float64)
        scores = np.log1p(support) + p.alpha * trust + p.beta * r_tilde
        edge_mask = np.asarray(graph.kind) != 0
        ei, ej = np.asarray(pair_i)[edge_mask], np.asarray(pair_j)[edge_mask]
        kind = np.asarray(graph.kind)[edge_mask]
        reasons: list[str | None] = [None] * n
        if p.mode == "corroboration" and p.units == "content":
            self._split_self_contradicting(state, judge_graph)
        if p.mode == "corroboration":
            # Weak contradictions (w_contr < contr_min) are left out of the decision and of
            # the gate's contradiction ratio: they are neutral pairs in the paper's rule.
            w_contr = np.asarray(graph.w_contr)[edge_mask]
            lopsided = (kind < 0) & (w_contr >= p.contr_lopsided)
            contr_min = np.full(len(kind), p.contr_min)
            if p.contr_min_far is not None and state.overlap is not None:
                far = np.asarray(state.overlap)[edge_mask] < p.tau
                contr_min[far] = p.contr_min_far
            weak = (kind < 0) & (w_contr < contr_min)
            unit_ids = np.array([c.unit for c in active], dtype=np.int64) if p.corroborate_by == "unit" \
                else state.source_ids
            res = resolve_by_corroboration(state.texts, unit_ids, ei, ej,
                                           np.where(weak & ~lopsided, 0, kind).astype(np.int8),
                                           active=penalty <= 0, min_sources=p.min_sources, decisive=~weak)
            kind = np.where(weak, 0, kind).astype(np.int8)
            keep, order, reasons = res.keep, np.zeros(0, dtype=np.int64), res.reason
            # The paper's objective at the kept set, for comparison with mode="paper".
            weights = (np.asarray(graph.w_supp) - np.asarray(graph.w_contr))[edge_mask]
            both = keep[ei] & keep[ej] if len(ei) else np.zeros(0, dtype=bool)
            f_value = float((scores - penalty)[keep].sum() + weights[both].sum())
            for k in np.flatnonzero(penalty > 0):
                reasons[k] = "contradicted by counter-evidence"
            corroboration = res.sources
            for k in np.flatnonzero(keep):
                only_here = state.coordinated.get(active[k].unit)
                if only_here is None:
                    continue
                if only_here & content_terms(active[k].text, p.consensus_bigrams):
                    keep[k] = False
                    reasons[k] = "asserted only by one coordinated source"
                elif corroboration[k] < p.coordinated_min_units:
                    keep[k] = False
                    reasons[k] = "coordinated source, not corroborated by another"
        else:
            weights = (np.asarray(graph.w_supp) - np.asarray(graph.w_contr))[edge_mask]
            keep, order, f_value = greedy_prune(scores, ei, ej, weights, self_penalty=penalty)
            corroboration = supporting_sources(n, state.source_ids, ei, ej, kind)
        keep = np.asarray(keep, dtype=bool)
        if p.mode == "corroboration":  # diversity counts independent units, not domains
            voices = sorted({c.unit for c in active})
            domain_ids = np.array([voices.index(c.unit) for c in active], dtype=np.int64)
        else:
            domains = sorted({c.domain for c in active})
            domain_ids = np.array([domains.index(c.domain) for c in active], dtype=np.int64)
        gate = gate_stats(keep, ei, ej, kind, domain_ids, eps=p.eps)
        supported = _supported_kept(keep, ei, ej, kind)
        timings["kernels_s"] += time.perf_counter() - t

        n_kept = int(keep.sum())
        support_share = float(supported.sum()) / n_kept if n_kept else 0.0
        passed, why = self._gate_decision(gate, n_kept, support_share)
        for k, c in enumerate(active):
            c.score = float(scores[k])
            c.support = int(graph.support_count[k])
            c.contradictions = int(graph.contradiction_count[k])
            c.sources = int(corroboration[k])
            c.self_contradiction = float(penalty[k])
            c.kept = bool(keep[k])
            if not c.kept:
                c.reason = reasons[k] or (
                    "contradicted" if (c.contradictions > 0 or c.self_contradiction > 0) else "pruned")
        for a, b in zip(*_kept_contradictions(keep, ei, ej, kind)):
            active[a].contradicted_by.append(active[b].index)
            active[b].contradicted_by.append(active[a].index)
        if clean.skipped or clean.index != list(range(len(clean))):
            for c in claims:  # a claim names its passage by input position (passages left out: stats)
                c.source = clean.index[c.source]
        stats = {
            "n_passages": len(clean),
            "skipped_passages": [{"passage": n, "error": why} for n, why in clean.skipped],
            "n_candidates": len(claims),
            "n_claims": n,
            "n_pairs": int(len(pair_i)),
            "n_kept": n_kept,
            "n_support": int(gate["n_support"]),
            "n_contradiction": int(gate["n_contradiction"]),
            "r_contr": float(gate["r_contr"]),
            "n_domains": int(gate["n_domains"]),  # what d_min counts: see "diversity"
            "diversity": "source units" if p.mode == "corroboration" else "domains",
            "support_share": support_share,
            "F": float(f_value),
            "gate_reason": why,
            "timings": timings,
        }
        if passed:
            prompt, fallback = checked_prompt(question, claims), None
        else:
            prompt, fallback = self._blocked_prompt(question, why, clean)
        return MirageResult(
            question=question,
            gate_passed=passed,
            claims=claims,
            stats=stats,
            prompt=prompt,
            removal_order=[active[int(k)].index for k in np.asarray(order)],
            fallback=fallback,
            edges=[(active[a].index, active[b].index, int(k)) for a, b, k in zip(ei.tolist(), ej.tolist(), kind.tolist())
                   if k != 0],
        )

    def defend_batch(
        self, items: Iterable[Mapping[str, Any]], *, progress: bool = True
    ) -> list[MirageResult]:
        """Defend many queries; each item has ``question`` and ``passages`` (the rules of
        pipelines/_items.py). :meth:`run_batch` is the same call under the method contract's name.

        A failing item yields a result with ``error`` set and the gate blocked, whose prompt
        follows ``on_block`` (``"passthrough"`` where the item's passages can be read, else
        the parametric prompt), and never loses the other items' results. ``progress``
        shows a tqdm bar when tqdm is installed.
        """
        items = list(items)
        results: list[MirageResult | None] = [None] * len(items)
        states: dict[int, _Prepared] = {}
        for n, item in enumerate(items):
            try:
                checked = check_item(item, passage_keys=PASSAGE_KEYS, skip_bad=self.params.on_bad_passage == "skip")
                states[n] = self._prepare(checked.question, checked.passages, checked=checked.passages)
            except Exception as exc:  # one bad item must not lose the batch
                results[n] = self._failed(n, item, exc)
        # One NLI pass over the distinct pairs of every item (both directions), in chunks so
        # that the scorer batches by length across items and a progress bar can move.
        probs: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        try:
            probs = self._batched_nli(states, progress)
        except Exception as exc:  # a scorer failure: isolate the item that causes it
            logger.warning("mirage: batched NLI failed (%s); scoring item by item", exc)
        for n, state in states.items():
            try:
                if n in probs:
                    fwd, bwd = probs[n]
                else:
                    t = time.perf_counter()
                    fwd, bwd = self._pair_nli(state.texts, state.pair_i, state.pair_j)
                    state.timings["nli_s"] = time.perf_counter() - t
                results[n] = self._finish(state, fwd, bwd)
            except Exception as exc:
                results[n] = self._failed(n, items[n], exc)
        return [r for r in results if r is not None]

    def run_batch(self, items: Iterable[Mapping[str, Any]], *, progress: bool = True) -> list[MirageResult]:
        """:meth:`defend_batch` under the method contract's name (pipelines/_items.py)."""
        return self.defend_batch(items, progress=progress)

    def _failed(self, n: int, item: Any, exc: Exception) -> MirageResult:
        logger.warning("mirage: item %d failed: %s", n, exc)
        question = item.get("question", "") if isinstance(item, Mapping) else ""
        try:
            readable = _clean_passages(item["passages"])
        except Exception:  # the passages themselves are what failed
            readable = []
        prompt, fallback = self._blocked_prompt(str(question), "the defense failed on this input", readable)
        return MirageResult(question=str(question), gate_passed=False, claims=[], stats={"gate_reason": "error"},
                            prompt=prompt, error=f"{type(exc).__name__}: {exc}", fallback=fallback)

    def _batched_nli(self, states: Mapping[int, "_Prepared"], progress: bool,
                     chunk: int = 4096) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        """Both directions of every item's pairs, each distinct (premise, hypothesis) scored
        once; returns (fwd, bwd) per item."""
        index: dict[tuple[str, str], int] = {}
        wanted: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        for n, st in states.items():
            f_idx, b_idx = [], []
            for a, b in zip(np.asarray(st.pair_i).tolist(), np.asarray(st.pair_j).tolist()):
                ta, tb = st.texts[a], st.texts[b]
                f_idx.append(index.setdefault((ta, tb), len(index)))
                b_idx.append(index.setdefault((tb, ta), len(index)))
            wanted[n] = (np.array(f_idx, dtype=np.int64), np.array(b_idx, dtype=np.int64))
        pairs = list(index)
        table = np.zeros((len(pairs), 3), dtype=np.float64)
        t = time.perf_counter()
        starts = range(0, len(pairs), chunk)
        for s0 in progress_iter(starts, enabled=progress and len(pairs) > chunk, desc="mirage nli", unit="chunk"):
            part = pairs[s0:s0 + chunk]
            table[s0:s0 + len(part)] = checked_predict(self.nli, [x for x, _ in part], [y for _, y in part])
        elapsed = time.perf_counter() - t
        total = sum(len(f) + len(b) for f, b in wanted.values()) or 1
        out = {}
        for n, (f_idx, b_idx) in wanted.items():
            states[n].timings["nli_s"] = elapsed * (len(f_idx) + len(b_idx)) / total  # the item's share
            out[n] = (table[f_idx].reshape(-1, 3), table[b_idx].reshape(-1, 3))
        return out

    # ------------------------------------------------------------------ steps
    def _make_claims(self, passages: list[dict[str, Any]]) -> list[Claim]:
        """Steps 1: sentence claims of the top-k passages, r̃, the N-claim cap."""
        p = self.params
        chosen, r_tilde = top_passages([ps["retrieval_score"] for ps in passages], p.top_k, p.score_kind)
        claims: list[Claim] = []
        for src, r in zip(chosen, r_tilde):
            ps = passages[src]
            domain = url_domain(ps.get("url"))
            trust = trust_score(domain, self._trust)
            for sentence in split_sentences(ps["text"]):
                claims.append(Claim(len(claims), sentence, src, domain, r, trust))
        ranked = sorted(claims, key=lambda c: (-c.r_tilde, c.index))
        for c in ranked[p.max_claims :]:
            c.reason = "capped"
        return claims

    def _assign_units(self, question: str, clean: list[dict[str, Any]], claims: list[Claim],
                      domain_unit: dict[int, int]) -> dict[int, set[str]]:
        """Source units of the passages that gave claims (pipelines/mirage/units.py): sets
        ``Claim.unit``; returns each coordinated unit's id with its unconfirmed consensus."""
        p = self.params
        used = sorted({c.source for c in claims})
        domains = [url_domain(clean[k].get("url")) for k in used]
        emb = None
        if p.units == "content" and len(used) > 1:
            try:
                emb = self._embed([question] + [clean[k]["text"] for k in used])
                emb = topic_residuals(emb[1:], emb[0])
            except ImportError as exc:  # core install without an embedder: units by domain only
                self._warn_no_embedder(exc)
                emb = None
        if p.units == "passage":
            local = np.arange(len(used), dtype=np.int64)
        else:
            local = source_units(domains, emb, p.tau_dup)
        unit_of = {k: used[int(u)] for k, u in zip(used, local)}
        by_domain = source_units(domains, None, 2.0) if p.units != "passage" else np.arange(len(used))
        domain_unit.update({k: used[int(u)] for k, u in zip(used, by_domain)})
        for c in claims:
            c.unit = unit_of[c.source]
        if p.units != "content":
            return {}
        out = {}
        for u in sorted(coordinated_units(local, domains)):
            inside = [clean[k]["text"] for k in used if unit_of[k] == used[u]]
            if len(inside) < p.coordinated_min_passages:
                continue
            outside = [clean[k]["text"] for k in used if unit_of[k] != used[u]]
            mine = unconfirmed_consensus(inside, outside, question, p.consensus_share, p.consensus_bigrams)
            if mine and p.dispute_min_passages and not disputed(
                    inside, outside, question, mine, p.dispute_min_passages, p.consensus_bigrams,
                    p.dispute_specificity):
                mine = set()  # the set's only account: delivered
            out[used[u]] = mine
        return out

    def _split_self_contradicting(self, state: "_Prepared", graph: Any) -> None:
        """Units whose passages disagree (:func:`clashing_units`) fall back to domain units."""
        p = self.params
        units = np.array([c.unit for c in state.active], dtype=np.int64)
        split = clashing_units(units, state.source_ids, state.pair_i, state.pair_j, graph.kind, graph.w_contr,
                               split_min=p.split_min, split_share=p.split_share)
        for u in split:
            state.coordinated.pop(u, None)
            for c in state.claims:
                if c.unit == u:
                    c.unit = state.domain_unit[c.source]

    def _warn_no_embedder(self, exc: Exception) -> None:
        if not self._warned_no_embedder:
            self._warned_no_embedder = True
            logger.warning("mirage: no embedder for content units, so units by domain only (pass embedder= "
                           "or install one: %s)", exc)

    def _embed(self, texts: list[str]) -> np.ndarray:
        if self._embedder is None:
            self._embedder = _shared_minilm()
        return checked_encode(self._embedder, texts)

    def _semantic_pairs(self, texts, source_ids, lex_i, lex_j, lex_overlap):
        """Beyond the paper: cross-source pairs whose MiniLM cosine >= tau_sem (each claim's
        top-m partners). ``semantic`` uses them alone, ``hybrid`` joins them to the lexical
        pairs; either is ranked by max(overlap, cosine) (ties by (i, j)) and capped at P_max."""
        p = self.params
        n = len(texts)
        if n < 2:
            return lex_i, lex_j, lex_overlap
        emb = self._embed(texts)
        sims = np.asarray(cosine_matrix(emb, emb), dtype=np.float64)
        same = source_ids[:, None] == source_ids[None, :]
        sims[same] = -np.inf
        # Top-m partners per claim (ties by lower index), as unordered pairs i < j.
        order = np.lexsort((np.broadcast_to(np.arange(n), (n, n)), -sims), axis=1)[:, : p.sem_top_m]
        cand: dict[tuple[int, int], float] = {}
        for a in range(n):
            for b in order[a]:
                s = sims[a, b]
                if s >= p.tau_sem:
                    key = (min(a, int(b)), max(a, int(b)))
                    cand[key] = max(cand.get(key, -np.inf), float(s))
        if p.pairing == "hybrid":
            for a, b, o in zip(np.asarray(lex_i), np.asarray(lex_j), np.asarray(lex_overlap)):
                key = (int(a), int(b))
                cand[key] = max(cand.get(key, -np.inf), float(o))
        ranked = sorted(cand.items(), key=lambda kv: (-kv[1], kv[0]))[: p.max_pairs]
        i = np.array([k[0] for k, _ in ranked], dtype=np.int64)
        j = np.array([k[1] for k, _ in ranked], dtype=np.int64)
        return i, j, np.array([v for _, v in ranked], dtype=np.float64)

    def _pair_nli(self, texts: list[str], pair_i, pair_j) -> tuple[np.ndarray, np.ndarray]:
        """Step 3: both directions of every pair in one NLI batch."""
        pair_i, pair_j = np.asarray(pair_i), np.asarray(pair_j)
        n_pairs = len(pair_i)
        if n_pairs == 0:
            empty = np.zeros((0, 3), dtype=np.float64)
            return empty, empty
        a = [texts[k] for k in pair_i]
        b = [texts[k] for k in pair_j]
        probs = checked_predict(self.nli, a + b, b + a)
        return probs[:n_pairs], probs[n_pairs:]

    def _probe(self, active: list[Claim], timings: dict[str, float]) -> np.ndarray:
        """Step 4: counter-evidence probing of the top-M claims by r̃ (ties by index)."""
        p = self.params
        penalty = np.zeros(len(active), dtype=np.float64)
        if self.retriever is None or p.probe_m == 0 or p.probe_k == 0 or not active:
            return penalty
        t = time.perf_counter()
        top = sorted(range(len(active)), key=lambda k: (-active[k].r_tilde, k))[: p.probe_m]
        premises, hypotheses, owner = [], [], []
        for k in top:
            hits = self.retriever.search(f"{active[k].text} {p.probe_suffix}", p.probe_k)
            for hit in hits[: p.probe_k]:
                premises.append(active[k].text)
                hypotheses.append(str(hit.get("text", "")))
                owner.append(k)
        timings["retrieval_s"] = time.perf_counter() - t
        if not premises:
            return penalty
        t = time.perf_counter()
        probs = checked_predict(self.nli, premises, hypotheses)
        timings["nli_s"] = timings.get("nli_s", 0.0) + time.perf_counter() - t
        e_col, c_col = label_columns(self.nli.labels)
        for k, row in zip(owner, probs):
            if row[c_col] > row[e_col] and row[c_col] >= p.probe_theta:
                penalty[k] = max(penalty[k], float(row[c_col]))
        return penalty

    def _gate_decision(self, gate: Mapping[str, Any], n_kept: int, support_share: float) -> tuple[bool, str]:
        """Step 7: pass iff the defended set is non-empty, its contradiction ratio is at most
        r_max, it spans at least d_min domains and (optional) enough of it is supported."""
        p = self.params
        if n_kept == 0:
            return False, "no claim survived pruning"
        if gate["r_contr"] > p.r_max:
            return False, f"contradiction ratio {gate['r_contr']:.2f} > {p.r_max:.2f}"
        if gate["n_domains"] < p.d_min:
            what = "independent source unit(s)" if p.mode == "corroboration" else "distinct domain(s)"
            return False, f"{gate['n_domains']} {what} < {p.d_min}"
        if support_share < p.support_share_min:
            return False, f"cross-source support share {support_share:.2f} < {p.support_share_min:.2f}"
        return True, "passed"

    def _blocked_prompt(self, question: str, why: str, passages: list[dict[str, Any]]) -> tuple[str, str]:
        """The prompt on BLOCK and the fallback it uses (``on_block``; ``"passthrough"``
        with nothing retrieved has nothing to pass and is the parametric prompt)."""
        mode = self.params.on_block
        if mode == "passthrough" and not passages:
            mode = "parametric"
        if mode == "refuse":
            return REFUSAL_PROMPT.format(question=question, why=why), mode
        if mode == "passthrough":
            lines = [f"P{n} [source: {url_domain(ps.get('url'))}] {ps['text']}" for n, ps in enumerate(passages, 1)]
            return PASSTHROUGH_PROMPT.format(question=question, why=why, passages="\n".join(lines)), mode
        return PARAMETRIC_PROMPT.format(question=question, why=why), mode


@dataclass
class _Prepared:
    """One item between pair selection and NLI (defend_batch scores all items' pairs at once)."""

    question: str
    clean: list[dict[str, Any]]
    claims: list["Claim"]
    active: list["Claim"]
    texts: list[str]
    source_ids: np.ndarray
    pair_i: Any
    pair_j: Any
    timings: dict[str, float]
    coordinated: dict[int, set[str]] = field(default_factory=dict)  # coordinated unit -> unconfirmed consensus
    domain_unit: dict[int, int] = field(default_factory=dict)  # passage -> its unit by domain alone
    overlap: Any = None  # (P,) float64, each pair's containment overlap (or cosine, semantic pairs)


def _with_slot_pairs(texts, token_ids, token_offsets, source_ids, pair_i, pair_j, overlap, tau_slot, max_pairs):
    """The paper's pairs plus the cross-source pairs at containment >= tau_slot that state the
    same kind of slot (see :func:`slot_types`); ranked by overlap, ties by (i, j), capped."""
    si, sj, so = select_pairs(token_ids, token_offsets, source_ids, tau=tau_slot, max_pairs=None)
    slots = np.array([slot_types(t) for t in texts], dtype=np.int64)
    si, sj, so = np.asarray(si), np.asarray(sj), np.asarray(so)
    share = (slots[si] & slots[sj]) != 0 if len(si) else np.zeros(0, dtype=bool)
    cand = {(int(a), int(b)): float(o) for a, b, o in zip(si[share], sj[share], so[share])}
    for a, b, o in zip(np.asarray(pair_i).tolist(), np.asarray(pair_j).tolist(), np.asarray(overlap).tolist()):
        cand[(a, b)] = max(cand.get((a, b), 0.0), float(o))
    ranked = sorted(cand.items(), key=lambda kv: (-kv[1], kv[0]))[:max_pairs]
    return (np.array([k[0] for k, _ in ranked], dtype=np.int64), np.array([k[1] for k, _ in ranked], dtype=np.int64),
            np.array([v for _, v in ranked], dtype=np.float64))


def top_passages(scores: Sequence[float | None], top_k: int, score_kind: str = "similarity") -> tuple[list[int], list[float]]:
    """The top-k passages by retrieval score and their relative score r̃ in [0, 1].

    Parameters
    ----------
    scores : sequence of float or None
        One finite score per passage, or None where a passage has none.
    top_k : int
    score_kind : {"similarity", "distance"}
        A similarity ranks higher-first; a distance ``d`` ranks lower-first and is read as
        the similarity ``-d``.

    Returns
    -------
    (chosen, r_tilde)
        ``chosen``: the indices of the top-k passages (best first, ties by index; passages
        without a score after every scored one), in passage order; ``r_tilde``: r̃ of each.

    Notes
    -----
    With the similarities ``s`` of the chosen scored passages, ``hi = max(s)`` and
    ``lo = min(0, min(s))``: ``r̃ = (s - lo) / (hi - lo)``, and 1 for all when ``hi == lo``
    (all scores equal, one passage). For non-negative similarities this is the paper's
    ``s / max s`` (0 means irrelevant, so the ratio keeps the scale); below 0 the scores are
    shifted so the lowest gets 0 (a negative score never becomes 1, as ``s / max s`` made
    it). A distance has no "irrelevant" point (0 is a perfect match), so only its position
    between the nearest chosen passage (r̃ = 1) and the farthest (r̃ = 0) is read. A passage
    without a score gets r̃ = 0 (ranked after the scored ones); when no passage has one,
    all rank equal (r̃ = 1, the first top_k passages).
    """
    check_choice(score_kind, "score_kind", SCORE_KINDS)
    sign = 1.0 if score_kind == "similarity" else -1.0
    scored = [k for k, s in enumerate(scores) if s is not None]
    unscored = [k for k, s in enumerate(scores) if s is None]
    order = sorted(scored, key=lambda k: (-sign * scores[k], k)) + unscored
    chosen = sorted(order[:top_k])
    sims = {k: sign * float(scores[k]) for k in chosen if scores[k] is not None}
    if not sims:
        return chosen, [1.0] * len(chosen)
    # Halves, so that hi - lo cannot overflow for any pair of finite floats.
    hi = max(sims.values()) / 2
    lo = min(0.0, min(sims.values())) / 2
    if hi == lo:
        return chosen, [1.0 if k in sims else 0.0 for k in chosen]
    return chosen, [min(1.0, max(0.0, (sims[k] / 2 - lo) / (hi - lo))) if k in sims else 0.0 for k in chosen]


@functools.lru_cache(maxsize=1)
def _shared_minilm() -> Any:
    """The packaged MiniLM embedder, loaded once per process (ImportError when not installed)."""
    from ...models import MiniLMEmbedder

    return MiniLMEmbedder()


def _clean_passages(passages: Sequence[Mapping[str, Any]], skip_bad: bool = False) -> CheckedPassages:
    """The passages checked (pipelines/_items.py) and cut to the keys the defense may read."""
    return check_passages(passages, keys=PASSAGE_KEYS, skip_bad=skip_bad)


def _kept_contradictions(keep: np.ndarray, ei: np.ndarray, ej: np.ndarray, kind: np.ndarray):
    """(i, j) of the contradiction edges with both ends kept."""
    mask = (kind < 0) & keep[ei] & keep[ej] if len(ei) else np.zeros(0, dtype=bool)
    return ei[mask].tolist(), ej[mask].tolist()


def _supported_kept(keep: np.ndarray, ei: np.ndarray, ej: np.ndarray, kind: np.ndarray) -> np.ndarray:
    """Kept claims with at least one support edge to another kept claim."""
    mask = (kind > 0) & keep[ei] & keep[ej] if len(ei) else np.zeros(0, dtype=bool)
    out = np.zeros(len(keep), dtype=bool)
    out[ei[mask]] = True
    out[ej[mask]] = True
    return out & keep
