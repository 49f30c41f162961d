"""The outcome rule, its probability table and the scorer class of LexicalNLI (step 4).

:func:`decide` maps one pair's :class:`~.align.Features` to an outcome, checked in the
order of the table in the package docstring; :class:`LexicalNLI` tokenises each distinct
text once, aligns all pairs in one batch, and maps outcomes to the rows of
:data:`DEFAULT_TABLE` (with an embedder, cosines decide the ``unknown`` rows).
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np

from ....ops import check_int, check_real
from .._common import LABELS, check_pairs, empty_probs, logger
from .align import Features, _align_features, _batch_opcodes
from .tokens import Tokens, _tokenize

# --------------------------------------------------------------------------- decision

OUTCOMES = ("unknown", "contradiction", "contradiction_weak", "entailment", "entailment_weak", "neutral")

#: Probability rows (entailment, neutral, contradiction) per outcome of :func:`decide`.
DEFAULT_TABLE: dict[str, tuple[float, float, float]] = {
    "unknown": (0.20, 0.65, 0.15),
    "contradiction": (0.05, 0.10, 0.85),
    "contradiction_weak": (0.10, 0.30, 0.60),
    "entailment": (0.85, 0.10, 0.05),
    "entailment_weak": (0.60, 0.30, 0.10),
    "neutral": (0.10, 0.80, 0.10),
}


def decide(feat: Features, *, min_coverage: float = 0.5, max_new_content: int = 1, min_moved: int = 2) -> str:
    """Map features to an outcome name (see the module docstring for the rules)."""
    if feat.coverage_b < min_coverage:
        return "unknown"
    if (feat.number_conflict or feat.date_conflict or feat.negation_flip or feat.antonym_swap
            or feat.superlative_swap):
        return "contradiction"
    if feat.entity_swap:
        return "contradiction_weak"
    if feat.moved_content >= min_moved and not feat.voice_change and feat.new_content_b <= max_new_content:
        return "contradiction_weak"
    if feat.new_content_b <= max_new_content and feat.number_added == 0:
        return "entailment_weak" if feat.moved_content else "entailment"
    return "neutral"


class LexicalNLI:
    """Model-free NLI for minimal-edit sentence pairs (alignment of word tokens).

    See the module docstring of :mod:`rrag_kernels.models.nli.lexical` for the rules, the
    probability table and an honest list of what it catches and misses.

    Parameters
    ----------
    embedder : object with ``.encode(list[str]) -> ndarray (n, d)``, optional
        When given, pairs the alignment cannot judge (``unknown``) are decided by the
        cosine of their embeddings: >= ``cos_entail`` -> ``entailment_weak``, <
        ``cos_neutral`` -> ``neutral``.
    min_coverage : float in [0, 1]
        Below this share of hypothesis tokens found in the premise, the pair is not a
        minimal edit and the outcome is ``unknown`` (unless a number/date conflict shows).
    max_new_content : int >= 0
        A hypothesis with at most this many content words absent from the premise (and no
        new number) counts as adding nothing of substance.
    min_moved : int >= 0
        This many shared content words out of order, with no change of voice, is read as a
        role swap (``contradiction_weak``).
    table : mapping outcome -> (p_entail, p_neutral, p_contr), optional
        Overrides rows of :data:`DEFAULT_TABLE`; each row must be non-negative and sum to 1.
    cos_entail, cos_neutral : float
        Cosine thresholds of the embedder rule.

    Attributes
    ----------
    labels : ("entailment", "neutral", "contradiction")
    """

    labels: tuple[str, str, str] = LABELS

    def __init__(
        self,
        embedder: Any = None,
        *,
        min_coverage: float = 0.5,
        max_new_content: int = 1,
        min_moved: int = 2,
        table: Mapping[str, Sequence[float]] | None = None,
        cos_entail: float = 0.70,
        cos_neutral: float = 0.50,
    ) -> None:
        if embedder is not None and not callable(getattr(embedder, "encode", None)):
            raise TypeError(f"embedder: expected an object with .encode(texts), got {type(embedder).__name__}")
        for name, v in (("min_coverage", min_coverage), ("cos_entail", cos_entail), ("cos_neutral", cos_neutral)):
            v = check_real(v, name)
            if not -1.0 <= v <= 1.0 or math.isnan(v):
                raise ValueError(f"{name}: must be in [-1, 1] (a share or a cosine), got {v}")
        if not 0.0 <= min_coverage <= 1.0:
            raise ValueError(f"min_coverage: must be in [0, 1], got {min_coverage}")
        max_new_content = check_int(max_new_content, "max_new_content")
        min_moved = check_int(min_moved, "min_moved")
        rows = dict(DEFAULT_TABLE)
        if table is not None:
            if not isinstance(table, Mapping):
                raise TypeError(f"table: expected a mapping outcome -> 3 probabilities, got {type(table).__name__}")
            for key, row in table.items():
                if key not in DEFAULT_TABLE:
                    raise ValueError(f"table: unknown outcome {key!r}; expected one of {OUTCOMES}")
                arr = np.asarray(row, dtype=np.float64)
                if arr.shape != (3,) or not np.isfinite(arr).all() or (arr < 0).any() or abs(arr.sum() - 1) > 1e-6:
                    raise ValueError(f"table: row {key!r} must be 3 non-negative probabilities summing to 1, got {row!r}")
                rows[key] = tuple(float(x) for x in arr)
        self.embedder = embedder
        self.min_coverage = float(min_coverage)
        self.max_new_content = int(max_new_content)
        self.min_moved = int(min_moved)
        self.cos_entail = float(cos_entail)
        self.cos_neutral = float(cos_neutral)
        self.table = rows
        self._rows = np.array([rows[o] for o in OUTCOMES], dtype=np.float64)
        self._index = {o: k for k, o in enumerate(OUTCOMES)}

    def __repr__(self) -> str:
        emb = "" if self.embedder is None else f"embedder={type(self.embedder).__name__}, "
        return f"LexicalNLI({emb}min_coverage={self.min_coverage})"

    def features(self, premises: list[str], hypotheses: list[str]) -> list[Features]:
        """The :class:`Features` of each pair (for analysis)."""
        premises, hypotheses = check_pairs(premises, hypotheses)
        cache: dict[str, Tokens] = {}
        pairs = []
        for p, h in zip(premises, hypotheses):
            ta = cache.get(p)
            if ta is None:
                ta = cache[p] = _tokenize(p)
            tb = cache.get(h)
            if tb is None:
                tb = cache[h] = _tokenize(h)
            pairs.append((ta, tb))
        if not pairs:
            return []
        return [_align_features(ta, tb, ops) for (ta, tb), ops in zip(pairs, _batch_opcodes(pairs, cache))]

    def outcomes(self, premises: list[str], hypotheses: list[str]) -> list[str]:
        """The outcome name of each pair (before any embedder rule)."""
        return [
            decide(f, min_coverage=self.min_coverage, max_new_content=self.max_new_content, min_moved=self.min_moved)
            for f in self.features(premises, hypotheses)
        ]

    def predict_proba(self, premises: list[str], hypotheses: list[str]) -> np.ndarray:
        """NLI probabilities of each (premise, hypothesis) pair.

        Parameters
        ----------
        premises, hypotheses : list of str, same length n

        Returns
        -------
        ndarray, shape (n, 3), float32
            Columns ``labels`` = (entailment, neutral, contradiction); each row is one row
            of the probability table, so it sums to 1.
        """
        premises, hypotheses = check_pairs(premises, hypotheses)
        if not premises:
            return empty_probs()
        idx = np.fromiter(
            (self._index[o] for o in self.outcomes(premises, hypotheses)), dtype=np.int64, count=len(premises)
        )
        if self.embedder is not None:
            unknown = np.flatnonzero(idx == self._index["unknown"])
            if unknown.size:
                cos = self._cosines([premises[k] for k in unknown], [hypotheses[k] for k in unknown])
                idx[unknown[cos >= self.cos_entail]] = self._index["entailment_weak"]
                idx[unknown[cos < self.cos_neutral]] = self._index["neutral"]
        return self._rows[idx].astype(np.float32)

    def _cosines(self, a: list[str], b: list[str]) -> np.ndarray:
        texts = list(dict.fromkeys(a + b))
        where = {t: k for k, t in enumerate(texts)}
        emb = np.asarray(self.embedder.encode(texts), dtype=np.float64)
        if emb.ndim != 2 or emb.shape[0] != len(texts):
            raise ValueError(
                f"embedder: .encode returned shape {emb.shape}, expected ({len(texts)}, d)"
            )
        norms = np.linalg.norm(emb, axis=1)
        norms[norms == 0] = 1.0
        emb /= norms[:, None]
        ia = np.array([where[t] for t in a])
        ib = np.array([where[t] for t in b])
        cos = np.einsum("ij,ij->i", emb[ia], emb[ib])
        logger.debug("LexicalNLI: embedder decided %d unknown pairs", len(a))
        return cos
