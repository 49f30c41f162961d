"""Scale-out of the pipelines (the face of ``distributed/``).

    import ray
    from rrag_kernels.distributed import collect_by_id, defend_dataset

    ray.init()                                              # or ray.init(address="ray://head:10001")
    ds = ray.data.from_items(rows)                          # {"id", "question", "passages"} per row
    out = defend_dataset(ds, nli="lexical", num_actors=4, batch_size=64)
    rows = collect_by_id(out)                               # every input id once, ordered by id

:mod:`.ray` runs the MIRAGE defense (:func:`defend_dataset`), conformal claim scoring
(:func:`score_claims_dataset`, then :func:`calibrate_from_dataset` on the driver and
:func:`conformal_filter_dataset`), ReliableRAG (:func:`reliablerag_dataset`) and D2F-ReAG
(:func:`d2f_dataset`) over a Ray Dataset: ``map_batches`` with a callable class on a fixed
actor pool, the model built once per actor. Ray is imported only when one of them is
called, so this package imports without it (``pip install "rrag_kernels[ray]"``).
"""

from __future__ import annotations

from .ray import (
    CONFORMAL_FILTER_COLUMNS,
    D2F_COLUMNS,
    DEFEND_COLUMNS,
    RELIABLERAG_COLUMNS,
    SCORE_COLUMNS,
    calibrate_from_dataset,
    collect_by_id,
    conformal_filter_dataset,
    d2f_dataset,
    defend_dataset,
    failure_summary,
    reliablerag_dataset,
    score_claims_dataset,
)

__all__ = [
    "CONFORMAL_FILTER_COLUMNS",
    "D2F_COLUMNS",
    "DEFEND_COLUMNS",
    "RELIABLERAG_COLUMNS",
    "SCORE_COLUMNS",
    "calibrate_from_dataset",
    "collect_by_id",
    "conformal_filter_dataset",
    "d2f_dataset",
    "defend_dataset",
    "failure_summary",
    "reliablerag_dataset",
    "score_claims_dataset",
]
