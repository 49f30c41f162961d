"""StackedNLI: a learned NLI model and LexicalNLI's exact slot checks, combined by a
multinomial logistic regression fitted on held-out training pairs.

Why
---
The learned cross-encoder reads meaning (paraphrases, reframes, causal reversals) but is
unreliable on one-token edits of otherwise identical sentences (it called "opened on 15
August 1914" -> "... 1904" an entailment). :class:`~rrag_kernels.models.nli.LexicalNLI`
aligns the two word sequences and is exact on those edits (number, date, negation,
quantifier and name swaps) and blind to meaning. An equal-weight average of the two lowered
p_entail on every paraphrase (and so blocked clean MIRAGE sets); instead, a small
logistic regression learns how much each signal is worth, per class:

    features x = [log p_model(e), log p_model(n), log p_model(c), one-hot(LexicalNLI outcome)]
    p = softmax(W x + b)                      W: (3, 3 + 6), b: (3,)

The weights are fitted (L2-regularised, deterministic full-batch Newton steps) on pairs the
model was NOT trained on (``train_nli --stack-files``), and the held-out split is scored
only afterwards. They are stored as ``stacker.json`` beside the model; :func:`load` builds
this scorer whenever that file is present.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ._common import LABELS, NLIScorer, check_pairs, label_permutation
from .lexical import OUTCOMES, LexicalNLI

__all__ = ["STACKER_FILE", "StackedNLI", "fit_stacker", "stack_features", "stacker_record"]

#: The stacker's file in a model directory.
STACKER_FILE = "stacker.json"
_EPS = 1e-6


def stack_features(model_probs: np.ndarray, outcomes: Sequence[str]) -> np.ndarray:
    """The stacker's features: log model probabilities (columns in LABELS order) and the
    one-hot LexicalNLI outcome -> (n, 3 + len(OUTCOMES)) float64."""
    p = np.clip(np.asarray(model_probs, dtype=np.float64), _EPS, 1.0)
    onehot = np.zeros((len(outcomes), len(OUTCOMES)), dtype=np.float64)
    index = {o: k for k, o in enumerate(OUTCOMES)}
    for row, o in enumerate(outcomes):
        onehot[row, index[o]] = 1.0
    return np.concatenate([np.log(p), onehot], axis=1)


def _softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def fit_stacker(features: np.ndarray, labels: Sequence[str], *, l2: float = 1.0, iterations: int = 50) -> dict[str, Any]:
    """Multinomial logistic regression by Newton's method (full batch, deterministic).

    Parameters
    ----------
    features : (n, F) float64, from :func:`stack_features`
    labels : n label names (LABELS)
    l2 : float
        Penalty on the weights (not the bias), per pair summed into the loss.

    Returns
    -------
    dict with ``weights`` (3, F) and ``bias`` (3,) as lists, ``l2``, ``n``
    """
    x = np.asarray(features, dtype=np.float64)
    n, f = x.shape
    y = np.zeros((n, 3))
    y[np.arange(n), [LABELS.index(lab) for lab in labels]] = 1.0
    xb = np.concatenate([x, np.ones((n, 1))], axis=1)  # bias column last
    theta = np.zeros((3, f + 1))
    reg = np.full(f + 1, l2)
    reg[-1] = 1e-6  # the bias is (almost) free
    for _ in range(iterations):
        p = _softmax(xb @ theta.T)
        grad = (p - y).T @ xb + reg * theta  # (3, F + 1)
        # Block-diagonal approximation of the Hessian per class (exact per class block).
        step = np.zeros_like(theta)
        for k in range(3):
            w = p[:, k] * (1 - p[:, k])
            h = (xb * w[:, None]).T @ xb + np.diag(reg)
            step[k] = np.linalg.solve(h, grad[k])
        theta -= step
        if np.abs(step).max() < 1e-9:
            break
    return {"weights": theta[:, :-1].tolist(), "bias": theta[:, -1].tolist(), "l2": l2, "n": int(n)}


class StackedNLI:
    """A learned NLI scorer and LexicalNLI combined by a fitted logistic regression.

    Parameters
    ----------
    model : NLIScorer
        The learned scorer (e.g. :class:`~rrag_kernels.models.nli.OnnxNLI`).
    weights : (3, 3 + len(OUTCOMES)) float array-like
    bias : (3,) float array-like
    lexical : LexicalNLI, optional
        Default ``LexicalNLI()`` (no embedder: its outcome is read, not its probabilities).
    meta : dict, optional
        Where the weights came from (kept for ``repr`` and reports).

    Attributes
    ----------
    labels : ("entailment", "neutral", "contradiction")
    """

    labels: tuple[str, str, str] = LABELS

    def __init__(self, model: NLIScorer, weights: Any, bias: Any, *, lexical: LexicalNLI | None = None,
                 meta: dict[str, Any] | None = None) -> None:
        if not (hasattr(model, "predict_proba") and hasattr(model, "labels")):
            raise TypeError(f"model: expected an NLI scorer (labels, predict_proba), got {type(model).__name__}")
        w = np.asarray(weights, dtype=np.float64)
        b = np.asarray(bias, dtype=np.float64)
        if w.shape != (3, 3 + len(OUTCOMES)):
            raise ValueError(f"weights: expected shape (3, {3 + len(OUTCOMES)}), got {w.shape}")
        if b.shape != (3,):
            raise ValueError(f"bias: expected shape (3,), got {b.shape}")
        if not (np.isfinite(w).all() and np.isfinite(b).all()):
            raise ValueError("weights: must be finite")
        self.model = model
        self.lexical = lexical if lexical is not None else LexicalNLI()
        self.weights, self.bias = w, b
        self.meta = dict(meta or {})
        self._perm = label_permutation(dict(enumerate(model.labels)), source="model.labels")

    @classmethod
    def from_file(cls, model: NLIScorer, path: str | Path) -> "StackedNLI":
        """Read ``stacker.json`` (written by ``train_nli --stack-files``); ValueError naming
        the field when it is malformed."""
        try:
            d = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ValueError(f"path: cannot read the stacker file {path}: {exc}") from None
        if not isinstance(d, dict) or d.get("features") != list(_feature_names()):
            raise ValueError(f"features: {path} was fitted on other features than {_feature_names()}")
        return cls(model, d.get("weights"), d.get("bias"), meta={k: v for k, v in d.items()
                                                              if k not in ("weights", "bias")})

    def __repr__(self) -> str:
        return f"StackedNLI({self.model!r} + LexicalNLI, fitted on {self.meta.get('fitted_on', '?')})"

    def predict_proba(self, premises: Sequence[str], hypotheses: Sequence[str]) -> np.ndarray:
        """(n, 3) float32 probabilities, columns in :data:`LABELS` order."""
        premises, hypotheses = check_pairs(premises, hypotheses)
        if not premises:
            return np.zeros((0, 3), dtype=np.float32)
        pm = np.asarray(self.model.predict_proba(premises, hypotheses), dtype=np.float64)[:, self._perm]
        x = stack_features(pm, self.lexical.outcomes(premises, hypotheses))
        return _softmax(x @ self.weights.T + self.bias).astype(np.float32)


def _feature_names() -> tuple[str, ...]:
    return tuple(f"log_p_{lab}" for lab in LABELS) + tuple(f"lexical_{o}" for o in OUTCOMES)


def stacker_record(fit: dict[str, Any], **meta: Any) -> dict[str, Any]:
    """The JSON object written as ``stacker.json``."""
    return {"features": list(_feature_names()), **fit, **meta}
