"""Shared pieces of the NLI scorers: the protocol, input checks, label maps, softmax,
length buckets. Nothing here imports a model library."""

from __future__ import annotations

import logging
import re
from typing import Any, Mapping, Protocol, Sequence, runtime_checkable

import numpy as np

logger = logging.getLogger("rrag_kernels")

#: The column order every scorer in this package returns.
LABELS: tuple[str, str, str] = ("entailment", "neutral", "contradiction")

# Names a model config may use for each class (compared lower-cased, with any non-letter
# characters removed, so "CONTRADICTION", "Contradiction", "contradiction " all match).
_LABEL_ALIASES: dict[str, str] = {
    "entailment": "entailment",
    "entail": "entailment",
    "entails": "entailment",
    "entailed": "entailment",
    "neutral": "neutral",
    "contradiction": "contradiction",
    "contradict": "contradiction",
    "contradicts": "contradiction",
    "contradictory": "contradiction",
}


@runtime_checkable
class NLIScorer(Protocol):
    """Sentence pairs to 3-way NLI probabilities.

    Attributes
    ----------
    labels : tuple of 3 str
        The names of the output columns, a permutation of ``("entailment", "neutral",
        "contradiction")``; every scorer in :mod:`rrag_kernels.nli` returns exactly that
        order.
    """

    labels: tuple[str, str, str]

    def predict_proba(self, premises: list[str], hypotheses: list[str]) -> np.ndarray:
        """Probabilities that each premise entails / is neutral to / contradicts its hypothesis.

        Parameters
        ----------
        premises, hypotheses : list of str, same length n

        Returns
        -------
        ndarray, shape (n, 3), float32
            Columns named by ``labels``; each row sums to 1. ``n == 0`` gives shape (0, 3).
        """
        ...


def check_pairs(premises: Any, hypotheses: Any) -> tuple[list[str], list[str]]:
    """Validate the two text lists of ``predict_proba``; return them as lists.

    Raises TypeError for anything that is not a sequence of str (a bare str included) and
    ValueError when the lengths differ; messages start with the argument name.
    """
    out = []
    for name, seq in (("premises", premises), ("hypotheses", hypotheses)):
        if isinstance(seq, (str, bytes)) or not isinstance(seq, Sequence) and not isinstance(seq, np.ndarray):
            raise TypeError(f"{name}: expected a list of str, got {type(seq).__name__}")
        seq = list(seq)
        for k, item in enumerate(seq):
            if not isinstance(item, str):
                raise TypeError(f"{name}[{k}]: expected str, got {type(item).__name__}")
        out.append(seq)
    if len(out[0]) != len(out[1]):
        raise ValueError(
            f"hypotheses: expected {len(out[0])} items (one per premise), got {len(out[1])}"
        )
    return out[0], out[1]


def check_positive_int(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name}: expected an int, got {type(value).__name__}")
    if value < 1:
        raise ValueError(f"{name}: must be >= 1, got {value}")
    return int(value)


def _canonical_label(name: Any) -> str | None:
    if not isinstance(name, str):
        return None
    key = re.sub(r"[^a-z]", "", name.lower())
    return _LABEL_ALIASES.get(key)


def label_permutation(id2label: Any, *, source: str = "config.json") -> np.ndarray:
    """Map a model's ``id2label`` to the column order :data:`LABELS`.

    Parameters
    ----------
    id2label : mapping {int or str: str}
        E.g. ``{0: "CONTRADICTION", 1: "entailment", 2: "Neutral"}``; keys may be strings
        (as in a JSON config).
    source : str
        Where the mapping came from, for the error message.

    Returns
    -------
    ndarray, shape (3,), int64
        ``perm`` such that ``model_output[:, perm]`` is in the order of :data:`LABELS`.

    Raises
    ------
    ValueError
        When the mapping is not a 3-way map whose names are, case-insensitively,
        entailment / neutral / contradiction (generic names such as ``LABEL_0`` included).
    """
    if not isinstance(id2label, Mapping) or not id2label:
        raise ValueError(f"id2label: {source} has no id2label mapping; cannot tell which output is which class")
    try:
        items = sorted((int(k), v) for k, v in id2label.items())
    except (TypeError, ValueError):
        raise ValueError(f"id2label: {source} has non-integer keys {sorted(map(str, id2label))}") from None
    if [k for k, _ in items] != [0, 1, 2]:
        raise ValueError(
            f"id2label: {source} must map the 3 outputs 0, 1, 2 to entailment/neutral/contradiction, "
            f"got {dict(items)!r}"
        )
    canon = [_canonical_label(v) for _, v in items]
    if sorted(c for c in canon if c is not None) != sorted(LABELS):
        raise ValueError(
            f"id2label: {source} does not name the classes entailment, neutral and contradiction "
            f"(case-insensitive), got {dict(items)!r}"
        )
    return np.array([canon.index(lab) for lab in LABELS], dtype=np.int64)


def softmax_rows(logits: np.ndarray) -> np.ndarray:
    """Row softmax in float64 (max-subtracted), returned as float32.

    Parameters
    ----------
    logits : ndarray, shape (n, c), any float dtype
    """
    x = np.asarray(logits, dtype=np.float64)
    if x.size and not np.isfinite(x).all():
        bad = int(np.argmax(~np.isfinite(x).all(axis=1)))
        raise ValueError(f"logits: the model returned NaN or inf (first at row {bad})")
    x = x - x.max(axis=1, keepdims=True)
    np.exp(x, out=x)
    x /= x.sum(axis=1, keepdims=True)
    return x.astype(np.float32)


def length_buckets(lengths: Sequence[int], batch_size: int) -> list[np.ndarray]:
    """Indices of the pairs, sorted by length (stable), cut into batches of ``batch_size``.

    Padding a batch to its longest member wastes little when its members have similar
    lengths. The caller scatters each batch's results back to these indices.
    """
    order = np.argsort(np.asarray(lengths, dtype=np.int64), kind="stable")
    return [order[s : s + batch_size] for s in range(0, len(order), batch_size)]


def empty_probs() -> np.ndarray:
    return np.zeros((0, 3), dtype=np.float32)
