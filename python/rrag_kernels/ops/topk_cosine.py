"""``topk_cosine``: the k most cosine-similar corpus rows of each query, fused."""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import reference
from ._dispatch import core_module, finish, launcher, numpy_float32, plan, torch_float32
from ._memory import check_memory_budget
from ._validation import check_bool, check_int, check_matrices

__all__ = ["topk_cosine"]


def topk_cosine(
    queries: Any, corpus: Any, k: int, *, check_finite: bool = True, backend: str | None = None
) -> tuple[Any, Any]:
    """The k corpus rows most cosine-similar to each query, without forming the Q x N matrix.

    Tie-break: equal float32 scores come out by lower corpus index first, so the result is
    unique. In the C++ backend the scores equal ``cosine_matrix(queries, corpus)`` bitwise.

    Parameters
    ----------
    queries : array, shape (Q, d), float16/32/64
    corpus : array, shape (N, d), float16/32/64
    k : int, 1 <= k <= N
    check_finite : bool
    backend : {None, "auto", "reference", "cpp", "triton", "torch"}

    Returns
    -------
    scores : array, shape (Q, k), float32, descending along each row
    indices : array, shape (Q, k), int64, rows of ``corpus``
    """
    check_finite = check_bool(check_finite, "check_finite")
    arrays = {"queries": queries, "corpus": corpus}
    check_matrices(arrays)
    k = check_int(k, "k", minimum=1, maximum=int(corpus.shape[0]), maximum_is="len(corpus)")
    check_memory_budget(12 * int(queries.shape[0]) * k, "k", "the (len(queries), k) outputs")
    p = plan(arrays, backend, "topk_cosine")
    if p.backend in ("triton", "torch"):
        t, _ = torch_float32(p, arrays, check_finite)
        scores, indices = launcher(p, "topk_cosine")(t["queries"], t["corpus"], k)
        return finish(scores, p), finish(indices, p)
    x = numpy_float32(p, arrays, check_finite)
    if p.backend == "cpp":
        scores, indices = core_module().topk_cosine(x["queries"], x["corpus"], k, check_finite)
    else:
        scores, indices = reference.topk_cosine_ref(x["queries"], x["corpus"], k)
        scores = scores.astype(np.float32)
    return finish(scores, p), finish(indices, p)
