"""MIRAGE: defended claims from retrieved passages (the face of ``pipelines/mirage/``).

    from rrag_kernels.pipelines.mirage import MirageDefense

    result = MirageDefense().defend(question, passages)   # gate decision, kept claims, prompt

:mod:`.defense` holds the method (:class:`MirageDefense`, every constant a
:class:`MirageParams` field; ``mode="paper"`` or ``"corroboration"``); :mod:`.types` its
constants, :class:`MirageParams`, :class:`Claim` and :class:`MirageResult`; :mod:`.prompts` the
checked prompt and the fallbacks on BLOCK; :mod:`.corroboration` the rule that decides
contradictions by independent support; :mod:`.units` the independent source units (domains,
paraphrase groups, coordinated units and what only they assert); :mod:`.slots` typed slot
values and the conflicts that do not wait for the judge; :mod:`.eval` the clean / mixed /
polluted harness and the gate tuning behind ``python -m rrag_kernels mirage-eval``;
:mod:`.eval_answers` the coordinated-poisoning harness (RealtimeQA format: context ASR /
utility, TrustRAG's first stage, a simulated judge); :mod:`.plot` the claim graph of one result
(:func:`plot_claim_graph`, matplotlib imported only when called).
"""

from __future__ import annotations

from .corroboration import resolve_by_corroboration, slot_types, supporting_sources
from .defense import MirageDefense, top_passages
from .eval_answers import (
    ANSWER_REGIMES,
    AnswerRecord,
    SimulatedJudge,
    contains_answer,
    evaluate_answers,
    format_answer_report,
    is_answer_row,
    load_answer_rows,
    normalise_answer,
    run_answer_harness,
    summarise_answers,
    trustrag_stage1,
)
from .slots import SLOT_TYPES, slot_conflicts, slot_values
from .units import content_terms, coordinated_units, disputed, source_units, topic_residuals, unconfirmed_consensus
from .eval import (
    DEFAULT_GRID,
    REGIMES,
    GateThresholds,
    RunRecord,
    build_regimes,
    changed_values,
    contradiction_ceiling,
    cross_validate_gate,
    evaluate,
    fold_gates,
    format_ceiling,
    format_report,
    is_false_claim,
    iter_jsonl,
    load_dataset,
    multihop_as_mirage,
    normalise_claim,
    run_regimes,
    summarise,
    tune_gate,
)
from .plot import ClaimGraphSummary, plot_claim_graph
from .prompts import CHECKED_PROMPT, PARAMETRIC_PROMPT, PASSTHROUGH_PROMPT, REFUSAL_PROMPT
from .types import MODES, ON_BLOCK, PAIRINGS, PASSAGE_KEYS, SCORE_KINDS, Claim, MirageParams, MirageResult, params_dict

__all__ = [
    "ANSWER_REGIMES",
    "AnswerRecord",
    "SLOT_TYPES",
    "SimulatedJudge",
    "contains_answer",
    "content_terms",
    "coordinated_units",
    "disputed",
    "evaluate_answers",
    "format_answer_report",
    "is_answer_row",
    "iter_jsonl",
    "load_answer_rows",
    "normalise_answer",
    "run_answer_harness",
    "slot_conflicts",
    "slot_values",
    "source_units",
    "summarise_answers",
    "topic_residuals",
    "trustrag_stage1",
    "unconfirmed_consensus",
    "CHECKED_PROMPT",
    "DEFAULT_GRID",
    "MODES",
    "ON_BLOCK",
    "PAIRINGS",
    "PARAMETRIC_PROMPT",
    "PASSAGE_KEYS",
    "PASSTHROUGH_PROMPT",
    "REFUSAL_PROMPT",
    "REGIMES",
    "resolve_by_corroboration",
    "slot_types",
    "supporting_sources",
    "SCORE_KINDS",
    "Claim",
    "ClaimGraphSummary",
    "GateThresholds",
    "MirageDefense",
    "MirageParams",
    "MirageResult",
    "RunRecord",
    "build_regimes",
    "changed_values",
    "contradiction_ceiling",
    "cross_validate_gate",
    "evaluate",
    "fold_gates",
    "format_ceiling",
    "format_report",
    "is_false_claim",
    "load_dataset",
    "multihop_as_mirage",
    "normalise_claim",
    "params_dict",
    "plot_claim_graph",
    "run_regimes",
    "summarise",
    "top_passages",
    "tune_gate",
]
