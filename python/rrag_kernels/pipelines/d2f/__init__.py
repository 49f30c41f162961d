"""D2F-ReAG: decompose-to-fix retrieval-augmented reasoning with a reliability judge (the face
of ``pipelines/d2f/``).

    from rrag_kernels.models import MiniLMEmbedder, OpenAIChatLLM
    from rrag_kernels.pipelines.d2f import D2FParams, D2FReAG, corpus_retriever

    retriever = corpus_retriever(passages, MiniLMEmbedder())    # "title: ... content: ..."
    method = D2FReAG(OpenAIChatLLM("http://localhost:8000/v1"), retriever, D2FParams(k=3))
    result = method.answer(question)        # answer + the whole search tree as data
    results = method.run_batch(questions)   # per-question D2FError records for failures

Retrieve top-k, reason, judge 0-10 (solved iff score / 10 >= 0.7); decompose what is not
solved (at most 3 sub-questions, depth at most 3, breadth or depth first); feed reliable
sub-answers to the questions they help (LLM picks, rewrites, root update and re-judge, early
stop); a call and token budget; a final short answer.

:mod:`.algorithm` holds the method (:class:`D2FReAG`: judge, decompose, picks, rewrites,
root update, early stop, budget, ``answer`` / ``run_batch``); :mod:`.types` its data
(:class:`D2FParams`, :class:`Node`, :class:`D2FResult`, :class:`D2FError` and their records);
:mod:`.parsing` how it reads the LLM's replies (:func:`parse_sub_questions`,
:func:`parse_picks`, :func:`short_answer`: the models layer's shared readers under this
method's names); :mod:`.corpus` :func:`build_corpus` and :func:`corpus_retriever`;
:mod:`.prompts` the system prompts and the concatenating prompt builders; :mod:`.eval` the
evaluations behind ``python -m rrag_kernels d2f-eval`` (the scripted control flow and the
answer metrics with a real LLM against vanilla RAG).
"""

from __future__ import annotations

from .eval import (
    CONTROL_SETTINGS,
    evaluate_control,
    evaluate_llm,
    format_report,
    load_questions,
    pooled_corpus,
    scripted_llm,
    vanilla_rag,
)
from .algorithm import D2FReAG
from .corpus import build_corpus, corpus_retriever
from .parsing import parse_picks, parse_sub_questions, short_answer
from .types import MAX_BRANCH, MAX_DEPTH, ORDERS, STOP_REASONS, D2FError, D2FParams, D2FResult, Node

__all__ = [
    "CONTROL_SETTINGS",
    "MAX_BRANCH",
    "MAX_DEPTH",
    "ORDERS",
    "STOP_REASONS",
    "D2FError",
    "D2FParams",
    "D2FReAG",
    "D2FResult",
    "Node",
    "build_corpus",
    "corpus_retriever",
    "evaluate_control",
    "evaluate_llm",
    "format_report",
    "load_questions",
    "parse_picks",
    "parse_sub_questions",
    "pooled_corpus",
    "scripted_llm",
    "short_answer",
    "vanilla_rag",
]
