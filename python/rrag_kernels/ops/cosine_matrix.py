"""``cosine_matrix``: all-pairs cosine similarity of two sets of embeddings."""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import reference
from ._dispatch import core_module, finish, launcher, numpy_float32, plan, torch_float32
from ._memory import check_memory_budget
from ._validation import check_bool, check_matrices

__all__ = ["cosine_matrix"]


def cosine_matrix(a: Any, b: Any, *, check_finite: bool = True, backend: str | None = None) -> Any:
    """All-pairs cosine similarity.

    Parameters
    ----------
    a : array, shape (n, d), float16/32/64
    b : array, shape (m, d), float16/32/64
    check_finite : bool
        Raise ValueError on NaN/inf inputs.
    backend : {None, "auto", "reference", "cpp", "triton", "torch"}

    Returns
    -------
    array, shape (n, m), float32
        ``out[i, j] = cos(a[i], b[j])``, computed as ``(<a_i, b_j> / |a_i|) / |b_j|``.
    """
    check_finite = check_bool(check_finite, "check_finite")
    arrays = {"a": a, "b": b}
    check_matrices(arrays)
    check_memory_budget(4 * int(a.shape[0]) * int(b.shape[0]), "b", "the (len(a), len(b)) float32 output")
    p = plan(arrays, backend, "cosine_matrix")
    if p.backend in ("triton", "torch"):
        t, _ = torch_float32(p, arrays, check_finite)
        return finish(launcher(p, "cosine_matrix")(t["a"], t["b"]), p)
    x = numpy_float32(p, arrays, check_finite)
    if p.backend == "cpp":
        out = core_module().cosine_matrix(x["a"], x["b"], check_finite)
    else:
        out = reference.cosine_matrix_ref(x["a"], x["b"]).astype(np.float32)
    return finish(out, p)
