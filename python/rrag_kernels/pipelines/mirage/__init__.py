"""MIRAGE: defended claims from retrieved passages (the face of ``pipelines/mirage/``).

    from rrag_kernels.pipelines.mirage import MirageDefense

    result = MirageDefense().defend(question, passages)   # gate decision, kept claims, prompt

:mod:`.defense` holds the method (:class:`MirageDefense`, every constant a
:class:`MirageParams` field); :mod:`.eval` the clean / mixed / polluted harness and the gate
tuning behind ``python -m rrag_kernels mirage-eval``.
"""

from __future__ import annotations

from .defense import (
    PAIRINGS,
    PARAMETRIC_PROMPT,
    PASSAGE_KEYS,
    VERIFIED_PROMPT,
    Claim,
    MirageDefense,
    MirageParams,
    MirageResult,
    params_dict,
)
from .eval import (
    DEFAULT_GRID,
    REGIMES,
    GateThresholds,
    RunRecord,
    build_regimes,
    cross_validate_gate,
    evaluate,
    format_report,
    load_dataset,
    run_regimes,
    summarise,
    tune_gate,
)

__all__ = [
    "DEFAULT_GRID",
    "PAIRINGS",
    "PARAMETRIC_PROMPT",
    "PASSAGE_KEYS",
    "REGIMES",
    "VERIFIED_PROMPT",
    "Claim",
    "GateThresholds",
    "MirageDefense",
    "MirageParams",
    "MirageResult",
    "RunRecord",
    "build_regimes",
    "cross_validate_gate",
    "evaluate",
    "format_report",
    "load_dataset",
    "params_dict",
    "run_regimes",
    "summarise",
    "tune_gate",
]
