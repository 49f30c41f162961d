"""The checks of what a model returns: one rule per model kind, for every caller.

A user plugs in their own embedder or NLI scorer as is; what it returns is checked once, here,
before it becomes a score. A wrong shape (which numpy could broadcast), NaN / inf or a
non-numeric dtype is a ValueError that names the argument the model came in as
(``"embedder"``, ``"nli"``, ``"judge"``), never a silently wrong score.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from .nli import checked_probs

__all__ = ["checked_embeddings", "checked_encode", "checked_predict"]


def checked_embeddings(emb: Any, n: int, *, name: str = "embedder", what: str = "texts",
                       dim: int | None = None) -> np.ndarray:
    """An embedder's ``encode`` output for ``n`` texts, checked.

    Parameters
    ----------
    emb : array-like or torch tensor, what ``encode`` returned
    n : int, the number of texts asked for
    name : str, the argument the embedder came in as
    what : str, what the texts are (in the message: "for 3 passages")
    dim : int, optional, the width it must have (e.g. the corpus's)

    Returns
    -------
    (n, d) float32, C-contiguous and finite
    """
    arr = np.asarray(emb.detach().cpu().numpy() if hasattr(emb, "detach") else emb)
    if arr.ndim != 2 or arr.shape[0] != n or (dim is not None and arr.shape[1] != dim):
        want = f"({n}, {dim if dim is not None else 'd'})"
        raise ValueError(f"{name}: encode returned shape {arr.shape} for {n} {what}, expected {want}")
    if arr.dtype.kind not in "fiu":
        raise ValueError(f"{name}: encode returned dtype {arr.dtype} for the {what}, expected floats")
    out = np.ascontiguousarray(arr, dtype=np.float32)
    if not np.isfinite(out).all():
        raise ValueError(f"{name}: encode returned NaN or inf for the {what}")
    return out


def checked_encode(embedder: Any, texts: Sequence[str], *, name: str = "embedder", what: str = "texts",
                   dim: int | None = None) -> np.ndarray:
    """``embedder.encode(texts)`` checked by :func:`checked_embeddings`; (len(texts), d) float32."""
    texts = list(texts)
    return checked_embeddings(embedder.encode(texts), len(texts), name=name, what=what, dim=dim)


def checked_predict(scorer: Any, premises: Sequence[str], hypotheses: Sequence[str], *,
                    name: str = "nli") -> np.ndarray:
    """``scorer.predict_proba(premises, hypotheses)`` checked by :func:`models.nli.checked_probs`:
    (n, 3) float64 probabilities in the scorer's label order, rows summing to 1."""
    premises, hypotheses = list(premises), list(hypotheses)
    return checked_probs(scorer.predict_proba(premises, hypotheses), len(premises), name)
