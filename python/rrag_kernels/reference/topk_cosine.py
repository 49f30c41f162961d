"""Reference for ``topk_cosine``."""

from __future__ import annotations

import numpy as np

from .cosine_matrix import cosine_matrix_ref


def topk_cosine_ref(queries: np.ndarray, corpus: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The k corpus rows most cosine-similar to each query.

    Tie-break: equal scores are ordered by lower corpus index first.

    Parameters
    ----------
    queries : ndarray, shape (Q, d)
    corpus : ndarray, shape (N, d)
    k : int, 1 <= k <= N

    Returns
    -------
    scores : ndarray, shape (Q, k), float64, descending along each row
    indices : ndarray, shape (Q, k), int64
    """
    sims = cosine_matrix_ref(queries, corpus)
    n = sims.shape[1]
    index = np.arange(n)
    order = np.empty((sims.shape[0], k), dtype=np.int64)
    for q in range(sims.shape[0]):
        # lexsort sorts by the last key first: descending score, then ascending index.
        order[q] = np.lexsort((index, -sims[q]))[:k]
    return np.take_along_axis(sims, order, axis=1), order
