"""Shared pieces of the NLI scorers: input checks, label maps, softmax, length buckets.
Nothing here imports a model library."""

from __future__ import annotations

import logging
from typing import Any, Mapping, Sequence

import numpy as np

from ...ops import LABELS, label_order_columns
from ..protocols import NLIScorer
from ..text import clean_texts

__all__ = ["LABELS", "NLIScorer", "check_pairs", "empty_probs", "label_permutation", "length_buckets",
           "softmax_rows"]

logger = logging.getLogger("rrag_kernels")


def check_pairs(premises: Any, hypotheses: Any) -> tuple[list[str], list[str]]:
    """Validate the two text lists of ``predict_proba``; return them as lists, each text
    cleaned by :func:`rrag_kernels.models.clean_text` (what every scorer's tokenizer reads).

    Raises TypeError for anything that is not a sequence of str (a bare str included) and
    ValueError when the lengths differ; messages start with the argument name.
    """
    premises, hypotheses = clean_texts(premises, "premises"), clean_texts(hypotheses, "hypotheses")
    if len(premises) != len(hypotheses):
        raise ValueError(
            f"hypotheses: expected {len(premises)} items (one per premise), got {len(hypotheses)}"
        )
    return premises, hypotheses


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
        The names are read by :func:`rrag_kernels.ops.label_order_columns`, the rule
        ``nli_graph`` applies to its ``label_order``.
    """
    if not isinstance(id2label, Mapping) or not id2label:
        raise ValueError(f"id2label: {source} has no id2label mapping; cannot tell which output is which class")
    return np.array(label_order_columns(id2label, "id2label", source=source), dtype=np.int64)


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
    """The (0, 3) float32 answer to an empty batch."""
    return np.zeros((0, 3), dtype=np.float32)


def checked_probs(probs: Any, n: int, name: str = "nli") -> np.ndarray:
    """A scorer's ``predict_proba`` output for ``n`` pairs, as float64 (n, 3), or a clear
    error naming ``name``: a wrong shape (which numpy could broadcast), NaN / inf, values
    outside [0, 1] or rows that do not sum to 1 must never become scores. The one check of
    every caller of an :class:`NLIScorer` (a user's scorer is plugged in as is).

    Parameters
    ----------
    probs : array-like, what ``predict_proba`` returned
    n : int, the number of pairs asked for
    name : str, the argument the scorer came in as (``"nli"``, ``"judge"``)

    Returns
    -------
    (n, 3) float64
    """
    try:
        arr = np.asarray(probs, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name}: predict_proba returned {type(probs).__name__}, not a float array ({exc})") from exc
    if arr.shape != (n, 3):
        raise ValueError(f"{name}: predict_proba returned shape {arr.shape} for {n} pairs, expected ({n}, 3)")
    if n:
        bad = ~((arr >= 0.0) & (arr <= 1.0)).all(axis=1)  # NaN compares False
        if bad.any():
            raise ValueError(f"{name}: predict_proba returned probabilities that are not finite and in [0, 1] "
                             f"(first at row {int(np.argmax(bad))})")
        off = np.abs(arr.sum(axis=1) - 1.0) > 1e-3
        if off.any():
            k = int(np.argmax(off))
            raise ValueError(f"{name}: predict_proba returned rows that do not sum to 1 "
                             f"(row {k} sums to {arr[k].sum():.4g})")
    return arr
