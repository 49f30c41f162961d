"""Reference for ``triple_reliability`` and ``triple_reliability_segmented`` (ReliableRAG).

For a reasoning chain with query embedding q, the reliability of a knowledge triple t with
credibility c(t) in [0, 10] is

    R(t) = alpha * cos(q, t) + (1 - alpha) * c(t) / 10,

and the chain takes the k triples of highest R among those it has not used yet.

Tie-break: equal R ranks the lower triple index first. When fewer than k triples are
available, the row is padded with index -1 and score -inf. (ReliableRAG's own code lets
used triples come back to fill the k slots; here they never do.)
"""

from __future__ import annotations

import numpy as np

from .cosine_matrix import cosine_matrix_ref


def triple_reliability_ref(
    query_emb: np.ndarray, triple_emb: np.ndarray, credibility: np.ndarray, *, alpha: float = 0.4,
    used: np.ndarray | None = None, k: int = 20,
) -> tuple[np.ndarray, np.ndarray]:
    """The k unused triples of highest reliability for each chain.

    Parameters
    ----------
    query_emb : ndarray, shape (B, d)
    triple_emb : ndarray, shape (T, d)
    credibility : ndarray, shape (T,), values in [0, 10]
    alpha : float in [0, 1]
    used : ndarray, shape (B, T), bool, optional
        ``used[b, t]``: chain b has already used triple t (None: nothing used).
    k : int >= 1

    Returns
    -------
    scores : ndarray, shape (B, k), float64, descending along each row, -inf padding
    indices : ndarray, shape (B, k), int64, rows of ``triple_emb``, -1 padding
    """
    reliability = alpha * cosine_matrix_ref(query_emb, triple_emb) + (1.0 - alpha) * (
        np.asarray(credibility, dtype=np.float64)[None, :] / 10.0
    )
    n_chains, n_triples = reliability.shape
    scores = np.full((n_chains, k), -np.inf)
    indices = np.full((n_chains, k), -1, dtype=np.int64)
    for b in range(n_chains):
        available = np.arange(n_triples) if used is None else np.flatnonzero(~np.asarray(used[b], dtype=bool))
        # lexsort sorts by the last key first: descending R, then ascending triple index.
        best = available[np.lexsort((available, -reliability[b, available]))][:k]
        scores[b, : len(best)] = reliability[b, best]
        indices[b, : len(best)] = best
    return scores, indices


def triple_reliability_segmented_ref(
    query_emb: np.ndarray, triple_emb: np.ndarray, credibility: np.ndarray, triple_offsets: np.ndarray,
    chain_question: np.ndarray, *, alpha: float = 0.4, used: np.ndarray | None = None, k: int = 20,
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`triple_reliability_ref` where chain b sees only its own question's triples.

    Parameters as in :func:`triple_reliability_ref`, except:

    triple_emb : ndarray, shape (T_total, d)
        The triples of every question, question by question; ``credibility`` has one entry
        per row.
    triple_offsets : ndarray, shape (Q + 1,), int
        CSR offsets: question q owns ``triple_emb[triple_offsets[q]:triple_offsets[q + 1]]``.
    chain_question : ndarray, shape (B,), int in [0, Q)
    used : ndarray, shape (sum_b n(chain_question[b]),), bool, optional
        Chain by chain in chain order, ``n(q) = triple_offsets[q + 1] - triple_offsets[q]``
        entries each; entry j of chain b's slice is its question's j-th triple.

    Returns
    -------
    scores : ndarray, shape (B, k), float64, -inf padding
    indices : ndarray, shape (B, k), int64, global rows of ``triple_emb``, -1 padding
    """
    offsets = np.asarray(triple_offsets, dtype=np.int64)
    questions = np.asarray(chain_question, dtype=np.int64)
    scores = np.full((len(questions), k), -np.inf)
    indices = np.full((len(questions), k), -1, dtype=np.int64)
    start = 0
    for b, q in enumerate(questions):
        lo, hi = int(offsets[q]), int(offsets[q + 1])
        mine = None if used is None else np.asarray(used[start : start + hi - lo], dtype=bool)[None, :]
        start += hi - lo
        s, i = triple_reliability_ref(
            query_emb[b : b + 1], triple_emb[lo:hi], credibility[lo:hi], alpha=alpha, used=mine, k=k
        )
        scores[b] = s[0]
        indices[b] = np.where(i[0] >= 0, i[0] + lo, -1)
    return scores, indices
