"""Independent source units: which retrieved passages speak with one voice.

Why
---
Counting passages as sources lets one writer vote many times: PoisonedRAG-style attacks put
several paraphrases of one false statement on several domains, so each of their claims is
"supported" by four other passages and the gate sees five domains. What a reader should
count is independent sources. Two passages are taken to be one *unit* when

- they share a registered domain (one publisher, one voice; passages without a URL have
  the domain ``"unknown"`` and never join by it), or
- their contents are near-duplicates or paraphrases: the cosine of their embeddings, with the
  question's direction projected out (:func:`topic_residuals`: every passage shares the
  question's topic, so raw cosines are high for agreeing and disagreeing passages alike), is
  at least ``tau_dup`` (:func:`rrag_kernels.ops.cosine_matrix`);

(content groups by average linkage, then joined by domain: :func:`source_units`). A unit of
two or more passages from two or more domains is *coordinated*: the same content under
several names, which a syndicated wire story and a poisoning campaign both produce; either
way it is one voice. What only such a voice asserts (:func:`unconfirmed_consensus`) is
withheld when the rest of the set gives another account (:func:`disputed`): the campaign
against real reports loses, the wire story that is the set's only account does not.
"""

from __future__ import annotations

import math
import re
from typing import Sequence

import numpy as np

from ...models import FUNCTION_WORDS
from ...ops import cosine_matrix

__all__ = ["clashing_units", "content_terms", "coordinated_units", "detail_terms", "disputed", "source_units",
           "topic_residuals", "unconfirmed_consensus"]


def topic_residuals(embeddings: np.ndarray, question: np.ndarray) -> np.ndarray:
    """Passage embeddings with the question's direction removed, as float32.

    Every passage retrieved for a question shares its topic, so raw cosines between them
    are high whether or not they say the same thing; what is left after projecting out the
    question's direction is what a passage says beyond the topic.

    Parameters
    ----------
    embeddings : (n, d) float32
    question : (d,) float32

    Returns
    -------
    (n, d) float32 (rows of passages along the question become zero and join nothing)
    """
    e = np.asarray(embeddings, dtype=np.float64)
    norms = np.linalg.norm(e, axis=1, keepdims=True)
    e = np.divide(e, norms, out=np.zeros_like(e), where=norms > 0)
    q = np.asarray(question, dtype=np.float64).reshape(-1)
    qn = float(np.linalg.norm(q))
    if qn > 0:
        q = q / qn
        e = e - np.outer(e @ q, q)
    return e.astype(np.float32)


def source_units(domains: Sequence[str], embeddings: np.ndarray | None, tau_dup: float) -> np.ndarray:
    """Unit id of each passage: the smallest passage index of its connected component.

    Parameters
    ----------
    domains : sequence of n str
        Each passage's registered domain (``"unknown"`` joins nothing).
    embeddings : (n, d) float32, optional
        Passage embeddings; None (or ``tau_dup > 1``) joins by domain only.
    tau_dup : float
        Passages whose embedding cosine is >= tau_dup are one unit.

    Returns
    -------
    (n,) int64
    """
    n = len(domains)
    if embeddings is not None and (np.ndim(embeddings) != 2 or len(embeddings) != n):
        raise ValueError(f"embeddings: expected shape ({n}, d) for {n} domains, got {np.shape(embeddings)}")
    parent = list(range(n))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def union(a: int, b: int) -> None:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)

    if embeddings is not None and n > 1 and tau_dup <= 1.0:
        # Content first (a spoofed URL must not split a paraphrase group), average linkage over
        # single passages: merge the two groups with the highest mean
        # cosine while it is >= tau_dup (ties by the lower ids). Single linkage would chain a
        # whole set of same-story reports into one voice.
        sims = np.asarray(cosine_matrix(embeddings, embeddings), dtype=np.float64)
        groups = {k: [k] for k in range(n)}
        while len(groups) > 1:
            best, pair = -np.inf, None
            keys = sorted(groups)
            for x in range(len(keys)):
                for y in range(x + 1, len(keys)):
                    m = float(sims[np.ix_(groups[keys[x]], groups[keys[y]])].mean())
                    if m > best:
                        best, pair = m, (keys[x], keys[y])
            if best < tau_dup:
                break
            a, b = pair
            union(a, b)
            groups[find(a)] = groups.pop(a) + groups.pop(b)
    first: dict[str, int] = {}
    for k, d in enumerate(domains):
        if d == "unknown":
            continue
        if d in first:
            union(first[d], k)
        else:
            first[d] = k
    return np.array([find(k) for k in range(n)], dtype=np.int64)


def coordinated_units(units: np.ndarray, domains: Sequence[str]) -> set[int]:
    """The unit ids whose passages span two or more distinct domains (``"unknown"`` counts as
    a domain of its own per passage, since nothing says two unknown passages share one)."""
    seen: dict[int, set[str]] = {}
    for k, (u, d) in enumerate(zip(np.asarray(units).tolist(), domains)):
        seen.setdefault(int(u), set()).add(d if d != "unknown" else f"unknown#{k}")
    return {u for u, ds in seen.items() if len(ds) >= 2}


# Words that say nothing a source could be the only one to assert: the function words, and
# the words a report uses around any claim (reporting verbs, vague quantities, negation).
_STOPWORDS = FUNCTION_WORDS | frozenset(
    "according said say says new no nor not all any few more most some two after before down".split())
_WORD = re.compile(r"[^\W_]+(?:[.,][0-9]+)*", re.UNICODE)


def content_terms(text: str, bigrams: bool = False) -> set[str]:
    """The content words of a text: lower-cased word tokens (numbers keep their decimal point
    and thousands separators, so ``1.4`` is not ``14``), stop words removed, a plural ``s``
    stripped from words longer than three letters; with ``bigrams`` also every two adjacent
    content words (``"dwayne johnson"``), so a name is not confirmed by a namesake."""
    out = set()
    prev = None
    for w in _WORD.findall(text.lower()):
        if w in _STOPWORDS:
            prev = None
            continue
        w = _singular(w)
        out.add(w)
        if bigrams and prev is not None:
            out.add(f"{prev} {w}")
        prev = w
    return out


def unconfirmed_consensus(unit_texts: Sequence[str], outside_texts: Sequence[str], question: str,
                          share: float, bigrams: bool = False, min_count: int = 1) -> set[str]:
    """What a unit of several passages agrees on that nobody outside it says.

    Parameters
    ----------
    unit_texts : the unit's passage texts
    outside_texts : the texts of every other passage of the set
    question : str, whose own words are never a unit's message
    share : float in [0, 1]
        A term is the unit's consensus when at least ``ceil(share * len(unit_texts))`` of its
        passages contain it ...
    min_count : int
        ... and at least ``min_count`` of them.

    Returns
    -------
    set of str
        Consensus terms (:func:`content_terms`) absent from the question and from every
        outside text: the content only this one voice asserts, however many passages repeat it.
    """
    need = max(1, min_count, math.ceil(share * len(unit_texts)))
    counts: dict[str, int] = {}
    for t in unit_texts:
        for w in content_terms(t, bigrams):
            counts[w] = counts.get(w, 0) + 1
    outside = content_terms(question, bigrams)
    for t in outside_texts:
        outside |= content_terms(t, bigrams)
    return {w for w, c in counts.items() if c >= need and w not in outside}


def disputed(unit_texts: Sequence[str], outside_texts: Sequence[str], question: str, consensus: set[str],
             min_passages: int, bigrams: bool = False, specificity_ratio: float = 0.0) -> bool:
    """Whether the rest of the set disputes what a unit alone asserts.

    The unit's *message* is the consensus term (or terms) that the most of its passages
    state, and its *carriers* are the passages that state it; every other passage of the set
    (the unit's others too: a real result can share a spoofed URL's domain) may dispute them.
    The message is disputed when at least ``min_passages`` of those agree on a term the
    carriers never state and the question does not hold: another voice gives another answer.
    Carriers by the message, not by any consensus word: a real report that joined the
    campaign's unit and shares one of its lesser words ("league") is no carrier of the
    campaign's answer, and may dispute it. Undisputed, the consensus is the set's only account
    and is delivered: a story that every outlet carries reads like a campaign, and without a
    competing account withholding it costs the right answer (README, quality section).

    With ``specificity_ratio > 0`` a dispute is dismissed when the carriers hold at least that
    many times the mean checkable detail (:func:`detail_terms`, the contested terms left out)
    of the passages disputing them, and more than none: of two voices, the one that reads like
    reporting is not silenced by one that restates the question around its answer.

    Parameters
    ----------
    unit_texts, outside_texts : the unit's passage texts, the set's other passage texts
    question : str
    consensus : set of str, the unit's :func:`unconfirmed_consensus`
    min_passages : int >= 1
    bigrams : bool, as for :func:`content_terms`
    specificity_ratio : float >= 0 (0: off)

    Returns
    -------
    bool
    """
    if not consensus:
        return False
    unit_terms = [content_terms(t, bigrams) for t in unit_texts]
    held = {term: sum(term in terms for terms in unit_terms) for term in consensus}
    core = {term for term, n in held.items() if n == max(held.values())}
    stated = [bool(core & terms) for terms in unit_terms]
    carriers = [t for t, s in zip(unit_texts, stated) if s]
    others = [t for t, s in zip(unit_texts, stated) if not s] + list(outside_texts)
    account = unconfirmed_consensus(others, carriers, question, 0.0, bigrams, min_count=min_passages)
    if not account:
        return False
    if specificity_ratio <= 0:
        return True
    disputers = [t for t in others if account & content_terms(t, bigrams)]
    contested = {w for term in consensus | account for w in term.split()}
    mine = _mean_detail(carriers, question, contested)
    theirs = _mean_detail(disputers, question, contested)
    return not (mine > 0 and mine >= specificity_ratio * theirs)


_TOKEN = re.compile(r"[^\W_]+(?:[.,'’][^\W_]+)*", re.UNICODE)
_SENTENCE_START = re.compile(r"(?:^|[.!?:;]\s+|[\"“‘'(\[]\s*|\.\.\.\s*)")


def detail_terms(text: str, question: str, exclude: set[str] = frozenset()) -> set[str]:
    """The checkable specifics of a text beyond the question and ``exclude``: tokens with a
    digit (numbers, dates, amounts) and capitalised words that do not open a sentence (names
    of people, places, organisations), normalised as :func:`content_terms` normalises words
    (lower case, possessive and plural ``s`` stripped).

    Why: independent reporting of an event carries details a reader could check (who,
    where, how many); a fabricated message repeated by one writer mostly restates the
    question around its one answer. ``exclude`` takes the contested values themselves out,
    so that what is compared is the detail *around* them.
    """
    skip = content_terms(question) | set(exclude)
    starts = {m.end() for m in _SENTENCE_START.finditer(text)}
    out = set()
    for m in _TOKEN.finditer(text):
        w = m.group(0)
        if not (any(ch.isdigit() for ch in w) or (w[0].isupper() and m.start() not in starts)):
            continue
        key = _normal_word(w)
        if key and key not in skip and key not in _STOPWORDS:
            out.add(key)
    return out


def _normal_word(word: str) -> str:
    """A token as :func:`content_terms` would write it (apostrophes dropped first)."""
    w = word.lower().replace("\u2019", "'")
    if w.endswith("'s"):
        w = w[:-2]
    return _singular(w.replace("'", ""))


def _singular(word: str) -> str:
    """A plural ``s`` stripped from a word longer than three letters (not from ``1990s``)."""
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word[-2].isdigit() else word


def _mean_detail(texts: Sequence[str], question: str, exclude: set[str]) -> float:
    """Mean number of :func:`detail_terms` per text (0.0 for no texts)."""
    return float(np.mean([len(detail_terms(t, question, exclude)) for t in texts])) if texts else 0.0


def clashing_units(units: np.ndarray, sources: np.ndarray, pair_i: np.ndarray, pair_j: np.ndarray,
                   kind: np.ndarray, w_contr: np.ndarray, *, split_min: float, split_share: float) -> set[int]:
    """The units whose passages disagree: one voice does not contradict itself.

    A unit is returned when more than ``split_share`` of its passage pairs hold a
    contradiction (``kind < 0`` and ``w_contr >= split_min``) between their claims. A share,
    not any one edge: a spurious contradiction or two must not split a group of paraphrases,
    while a minimal edit among copies of a source contradicts most of them.

    Parameters
    ----------
    units : (n,) int64, each claim's unit
    sources : (n,) int64, each claim's passage
    pair_i, pair_j : (P,) int64, the judged claim pairs
    kind : (P,) int8, +1 support / -1 contradiction / 0
    w_contr : (P,) float, contradiction weight of each pair
    split_min, split_share : float

    Returns
    -------
    set of int, unit ids
    """
    units = np.asarray(units)
    sources = np.asarray(sources)
    clashing: dict[int, set[tuple[int, int]]] = {}
    for a, b, k, w in zip(np.asarray(pair_i).tolist(), np.asarray(pair_j).tolist(), np.asarray(kind).tolist(),
                          np.asarray(w_contr).tolist()):
        u = int(units[a])
        if k < 0 and w >= split_min and u == units[b] and sources[a] != sources[b]:
            pa, pb = sorted((int(sources[a]), int(sources[b])))
            clashing.setdefault(u, set()).add((pa, pb))
    out = set()
    for u, pairs in clashing.items():
        members = len(set(sources[units == u].tolist()))
        if len(pairs) > split_share * members * (members - 1) / 2:
            out.add(u)
    return out
