"""``segmented_cosine``: the cosine of each doc with the query that owns it (CSR batches)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import reference
from ._dispatch import core_module, finish, launcher, numpy_float32, plan, to_torch_index, torch_float32
from ._validation import as_offsets, check_bool, check_matrices

__all__ = ["segmented_cosine"]


def segmented_cosine(
    queries: Any, docs: Any, doc_offsets: Any, *, check_finite: bool = True, backend: str | None = None
) -> Any:
    """Cosine of each doc with the query that owns it (ragged batches, no padding).

    Parameters
    ----------
    queries : array, shape (Q, d), float16/32/64
    docs : array, shape (D, d), float16/32/64
    doc_offsets : integer array, shape (Q + 1,)
        The docs of query ``q`` are ``docs[doc_offsets[q]:doc_offsets[q + 1]]``.
    check_finite : bool
    backend : {None, "auto", "reference", "cpp", "triton", "torch"}

    Returns
    -------
    array, shape (D,), float32
    """
    check_finite = check_bool(check_finite, "check_finite")
    arrays = {"queries": queries, "docs": docs}
    check_matrices(arrays)
    offsets = as_offsets(doc_offsets, "doc_offsets", int(queries.shape[0]), int(docs.shape[0]))
    p = plan({**arrays, "doc_offsets": doc_offsets}, backend, "segmented_cosine")
    if p.backend in ("triton", "torch"):
        t, device = torch_float32(p, arrays, check_finite)
        launch = launcher(p, "segmented_cosine")
        return finish(launch(t["queries"], t["docs"], to_torch_index(offsets, device)), p)
    x = numpy_float32(p, arrays, check_finite)
    if p.backend == "cpp":
        out = core_module().segmented_cosine(x["queries"], x["docs"], offsets, check_finite)
    else:
        out = reference.segmented_cosine_ref(x["queries"], x["docs"], offsets).astype(np.float32)
    return finish(out, p)
