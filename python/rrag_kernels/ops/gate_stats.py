"""``gate_stats``: the statistics MIRAGE's gate reads on the defended claim set."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .. import reference
from ._dispatch import core_cached, cpu_plan, numpy_cpp
from ._validation import (
    array_like,
    as_bool,
    as_buffer,
    as_index,
    check_bool,
    check_dtype_kind,
    check_index_range,
    check_real,
    check_shape,
    is_plain,
    to_numpy,
)

__all__ = ["gate_stats"]

_I64, _I8, _BOOL = np.dtype(np.int64), np.dtype(np.int8), np.dtype(np.bool_)
_KINDS = (-1, 0, 1)


def gate_stats(
    keep: Any,
    edge_i: Any,
    edge_j: Any,
    kind: Any,
    domain_ids: Any,
    *,
    eps: float = 1e-9,
    count_unknown: bool = True,
    backend: str | None = None,
) -> dict:
    """Statistics the MIRAGE gate reads on the defended set S* = {c : keep[c]}.

    Parameters
    ----------
    keep : bool array, shape (N,)
    edge_i, edge_j : integer arrays, shape (E,), ends in [0, N)
    kind : integer array, shape (E,), values in {-1, 0, +1} (``nli_graph``'s kind)
    domain_ids : integer array, shape (N,)
        Each claim's domain id. A negative id means "unknown domain" (no URL): all kept
        unknown claims together count as ONE domain, like the paper's ``dom(c) = "unknown"``,
        when ``count_unknown`` (default), and as no domain otherwise.
    eps : float >= 0
    count_unknown : bool
    backend : {None, "auto", "reference", "cpp"}

    Returns
    -------
    dict
        ``n_kept`` (int); ``n_support``, ``n_contradiction`` (int): edges of kind +1 / -1
        with both ends kept; ``r_contr`` (float) ``= n_contradiction / (n_support +
        n_contradiction + eps)``, 0.0 when that denominator is 0; ``n_domains`` (int):
        distinct domains among kept claims.
    """
    eps = check_real(eps, "eps")
    if not (math.isfinite(eps) and eps >= 0.0):
        raise ValueError(f"eps: must be finite and >= 0, got {eps}")
    count_unknown = check_bool(count_unknown, "count_unknown")
    # Fast path (MIRAGE's tiny per-query graphs): plain numpy arguments need no conversion,
    # and the C++ kernel checks every value itself.
    if (numpy_cpp(backend, (keep, edge_i, edge_j, kind, domain_ids)) and is_plain(keep, _BOOL)
            and is_plain(edge_i, _I64) and is_plain(edge_j, _I64) and is_plain(kind, _I8)
            and is_plain(domain_ids, _I64)):
        return core_cached().gate_stats(keep, edge_i, edge_j, kind, domain_ids, eps, count_unknown)
    kp = as_bool(keep, "keep")
    n = kp.shape[0]
    ei = as_index(edge_i, "edge_i")
    n_edges = ei.shape[0]
    ej = as_index(edge_j, "edge_j", n_edges, " (len(edge_i))")
    kd = array_like(kind, "kind")
    check_dtype_kind(kd, "kind", "iu", "an integer array (int8)")
    check_shape(kd, "kind", (n_edges,), " (len(edge_i))")
    kd = to_numpy(kd)
    dom = as_index(domain_ids, "domain_ids", n, " (len(keep))")
    p = cpu_plan({"keep": keep, "edge_i": edge_i, "edge_j": edge_j, "kind": kind, "domain_ids": domain_ids},
                 backend, "gate_stats")
    if kd.dtype != np.int8 or p.backend != "cpp":
        # Cast to int8 only after checking the values (a cast would wrap 255 to -1).
        if kd.size and not np.isin(kd, _KINDS).all():
            e = int(np.argmax(~np.isin(kd, _KINDS)))
            raise ValueError(f"kind: values must be -1, 0 or +1, got {int(kd[e])} at position {e}")
    kd = as_buffer(kd, np.int8)
    if p.backend == "cpp":
        return core_cached().gate_stats(kp, ei, ej, kd, dom, eps, count_unknown)
    check_index_range(ei, "edge_i", n, "len(keep)")
    check_index_range(ej, "edge_j", n, "len(keep)")
    return reference.gate_stats_ref(kp, ei, ej, kd, dom, eps, count_unknown)
