"""EnsembleNLI: a weighted mean of several scorers' probabilities.

Why
---
The packaged model and :class:`~rrag_kernels.models.nli.LexicalNLI` fail on different phenomena of
the held-out split (``../shared/data/nli/train_5.jsonl``): the model reads reframes and causal
reversals, the word alignment reads number swaps and dropped conjuncts. Their equal-weight
mean is better than either (accuracy 0.613 / macro-F1 0.602 against 0.580 / 0.581 for the
model and 0.532 / 0.512 for LexicalNLI; measured by ``benchmarks/bench_nli.py``). The weights
are not tuned on that split: equal weights were fixed before it was scored.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ...ops import check_real
from ._common import LABELS, NLIScorer, check_pairs, label_permutation

__all__ = ["EnsembleNLI"]


class EnsembleNLI:
    """Weighted mean of member scorers' (n, 3) probabilities.

    Parameters
    ----------
    members : sequence of NLIScorer, at least one
        Each with ``.labels`` (any order of the three names; columns are reordered to
        :data:`LABELS`) and ``.predict_proba(premises, hypotheses)``.
    weights : sequence of non-negative float, optional
        One per member, not all zero; normalised to sum to 1. Default: equal weights.

    Attributes
    ----------
    labels : ("entailment", "neutral", "contradiction")
    members : tuple of NLIScorer
    weights : (m,) float64, summing to 1
    """

    labels: tuple[str, str, str] = LABELS

    def __init__(self, members: Sequence[NLIScorer], weights: Sequence[float] | None = None) -> None:
        if isinstance(members, (str, bytes)) or not isinstance(members, Sequence):
            raise TypeError(f"members: expected a sequence of NLI scorers, got {type(members).__name__}")
        members = tuple(members)
        if not members:
            raise ValueError("members: at least one scorer is needed")
        for k, m in enumerate(members):
            if not (hasattr(m, "predict_proba") and hasattr(m, "labels")):
                raise TypeError(f"members[{k}]: expected an NLI scorer (labels, predict_proba), got {type(m).__name__}")
        if weights is None:
            w = np.full(len(members), 1.0 / len(members))
        else:
            if isinstance(weights, (str, bytes)) or not isinstance(weights, Sequence):
                raise TypeError(f"weights: expected a sequence of floats, got {type(weights).__name__}")
            if len(weights) != len(members):
                raise ValueError(f"weights: expected {len(members)} values (one per member), got {len(weights)}")
            for k, x in enumerate(weights):
                check_real(x, f"weights[{k}]")
            w = np.asarray(weights, dtype=np.float64)
            if not np.isfinite(w).all() or (w < 0).any() or w.sum() <= 0:
                raise ValueError(f"weights: expected finite non-negative values, not all zero, got {list(weights)}")
            w = w / w.sum()
        self.members = members
        self.weights = w
        self._perms = [label_permutation(dict(enumerate(m.labels)), source=f"members[{k}].labels")
                       for k, m in enumerate(members)]

    def predict_proba(self, premises: list[str], hypotheses: list[str]) -> np.ndarray:
        """Weighted mean of the members' probabilities.

        Parameters
        ----------
        premises, hypotheses : list of str, same length n

        Returns
        -------
        ndarray, shape (n, 3), float32
            Columns ``labels``; rows sum to 1 (up to float32 rounding).
        """
        premises, hypotheses = check_pairs(premises, hypotheses)
        out = np.zeros((len(premises), 3), dtype=np.float64)
        for w, m, perm in zip(self.weights, self.members, self._perms):
            if w == 0.0:
                continue
            p = np.asarray(m.predict_proba(premises, hypotheses), dtype=np.float64)
            if p.shape != (len(premises), 3):
                raise ValueError(f"members: {type(m).__name__}.predict_proba returned shape {p.shape}, "
                                 f"expected ({len(premises)}, 3)")
            out += w * p[:, perm]
        return out.astype(np.float32)

    def __repr__(self) -> str:
        parts = ", ".join(f"{type(m).__name__}:{w:.2f}" for m, w in zip(self.members, self.weights))
        return f"EnsembleNLI({parts})"


def default_ensemble(**kwargs: Any) -> EnsembleNLI:
    """The packaged model and LexicalNLI, equal weights (see the module docstring)."""
    from . import LexicalNLI, OnnxNLI, default_model_dir

    d = default_model_dir()
    if d is None:
        raise FileNotFoundError("ensemble: the packaged NLI model is absent, so there is nothing to ensemble "
                                "LexicalNLI with (use 'lexical')")
    return EnsembleNLI([OnnxNLI(d, **kwargs), LexicalNLI()])
