"""Thin pipelines, one folder per method: text in, arrays through the kernels, readable
results out.

* :mod:`rrag_kernels.pipelines.mirage` -- the MIRAGE defense and its evaluation harness;
* :mod:`rrag_kernels.pipelines.conformal` -- claim-level conformal factuality: the
  calibrator, the claim-data adapters, the trade-off plot and the (multi-hop) RAG pipeline;
* :mod:`rrag_kernels.pipelines.reliablerag` -- ReliableRAG: triples, credibility sources,
  reliability-ranked chain search (LLM or deterministic selector), TBS / SBS context, reader;
* :mod:`rrag_kernels.pipelines.d2f` -- D2F-ReAG: retrieve, reason, judge, decompose, rewrite.

Each folder's ``__init__`` is its face. Pipelines import the kernels through
:mod:`rrag_kernels.ops` and models, embedders, retrievers and text helpers through
:mod:`rrag_kernels.models` (small protocols, so any implementation can be plugged in; every
default works offline). ``_progress`` (progress bars), ``_answer_metrics`` (EM, F1, Str-Acc,
attack success) and ``_multihop`` (the multi-hop JSONL reader) are shared by the pipelines;
``_items`` (what an input item is, and the method contract: ``run_batch`` and
``to_record``) and ``_records`` (how a record becomes JSON text) are on this face for every
method and shell.
"""

from ._items import CheckedPassages, Item, check_item, check_passages, check_question
from ._records import MAX_JSON_DEPTH, DuplicateKeyError, JSONLimitError, json_text, jsonable, line_record, loads_one_value_per_key

__all__ = ["MAX_JSON_DEPTH", "CheckedPassages", "DuplicateKeyError", "JSONLimitError", "Item", "check_item", "check_passages", "check_question", "json_text", "jsonable",
           "line_record", "loads_one_value_per_key"]
