"""``rrag d2f`` and ``rrag d2f-eval``: D2F-ReAG (decompose-to-fix reasoning with a reliability judge).

``d2f`` is the batch command: JSONL of questions in, one record per line out (the answer, the
search's figures and its trace). ``d2f-eval`` measures the method on a labelled multi-hop file:
the control flow with the scripted LLM (no model), or answer metrics with the embedded SmolLM2
or any OpenAI-compatible server (``--llm model``, ``--url``).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from .common import (
    JsonlWriter,
    UsageError,
    add_llm_options,
    add_resume_option,
    batch_status,
    check_distinct,
    existing_file,
    make_embedder,
    make_llm,
    output_file,
    parse_rows,
    progress,
    read_lines,
    rows_to_run,
    write_one_by_one,
)


def add_parser(sub: Any) -> None:
    """Register ``d2f`` and ``d2f-eval``."""
    d2 = sub.add_parser("d2f", help="D2F-ReAG: JSONL of questions in, JSONL of answers and traces out")
    d2.add_argument("input", type=existing_file, help="JSONL, one {'question', 'id'?, 'passages'?} per line")
    d2.add_argument("--corpus", type=existing_file, default=None,
                    help="JSONL of passages ({'pid'?, 'title'?, 'text'}) or of questions with 'passages' "
                         "(default: the input's passages, pooled)")
    d2.add_argument("-o", "--output", type=output_file, default=None, help="output JSONL (default: stdout)")
    _d2f_common_args(d2)
    add_resume_option(d2)
    d2.set_defaults(func=run)
    de = sub.add_parser("d2f-eval", help="D2F-ReAG: scripted control flow, or answer metrics with an LLM")
    de.add_argument("data", nargs="?", type=existing_file, default="../shared/data/multihop_dev.jsonl",
                    help="JSONL in the format of shared/data/multihop_dev.jsonl "
                         "(default: ../shared/data/multihop_dev.jsonl)")
    de.add_argument("--llm", default="scripted", choices=("scripted", "model"),
                    help="scripted: control flow with the scripted LLM (no model); model: the embedded "
                         "SmolLM2, or the --url server")
    de.add_argument("--limit", type=int, default=None,
                    help="first N questions (--llm model; default 5 with the embedded model, all with --url)")
    de.add_argument("--no-baseline", action="store_true", help="skip vanilla RAG")
    de.add_argument("--no-rates", action="store_true", help="skip measuring the prefill/decode rates")
    de.add_argument("--json", default=None, help="also write the report as JSON to this path")
    _d2f_common_args(de)
    de.set_defaults(func=run_eval)
    de.set_defaults(embedder="auto")  # hashing for the scripted LLM, MiniLM with a model


def _d2f_common_args(p: argparse.ArgumentParser) -> None:
    add_llm_options(p)
    p.add_argument("--embedder", default="minilm", choices=("minilm", "hashing"),
                   help="passage embedder: MiniLM (offline model) or a model-free hashed bag of words")
    p.add_argument("--k", type=int, default=None, help="passages retrieved per question (default 3)")
    p.add_argument("--threshold", type=float, default=None, help="solved iff judge score / 10 >= this (default 0.7)")
    p.add_argument("--order", default=None, choices=("bfs", "dfs"), help="frontier order (default bfs)")
    p.add_argument("--max-depth", type=int, default=None, help="deepest level processed (default 3)")
    p.add_argument("--max-branch", type=int, default=None, help="sub-questions per decomposition (default 3)")
    p.add_argument("--max-calls", type=int, default=None, help="LLM calls per question (default 60)")
    p.add_argument("--max-total-tokens", type=int, default=None,
                   help="prompt + completion tokens per question before the search stops (default 60000; 0: none)")
    p.add_argument("--reason-tokens", type=int, default=None, help="max_tokens of a reasoning (default 256)")
    p.add_argument("--answer-tokens", type=int, default=None, help="max_tokens of the final answer (default 32)")
    p.add_argument("--seed", type=int, default=None, help="sampling seed (and the scripted judge's seed)")
    p.add_argument("--quiet", action="store_true", help="no progress bar or summary on stderr")


def _d2f_params(args: argparse.Namespace, **over):
    from ..pipelines.d2f import D2FParams

    flags = {"k": "--k", "threshold": "--threshold", "order": "--order", "max_calls": "--max-calls",
             "max_total_tokens": "--max-total-tokens", "max_depth": "--max-depth", "max_branch": "--max-branch",
             "reason_tokens": "--reason-tokens", "answer_tokens": "--answer-tokens", "seed": "--seed"}
    values = {name: getattr(args, name) for name in flags if getattr(args, name, None) is not None}
    if getattr(args, "max_total_tokens", None) == 0:
        values["max_total_tokens"] = None  # 0 on the command line: no token budget
    try:
        return D2FParams(**{**values, **over}).validate()
    except (TypeError, ValueError) as exc:
        name = str(exc).split(":", 1)[0]
        raise UsageError(f"{flags.get(name, name)}: {exc}") from exc


def _d2f_llm(args: argparse.Namespace):
    """The LLM of d2f / d2f-eval: ``--url`` (any OpenAI-compatible server) or the embedded SmolLM2."""
    # Not folded into make_llm: reliablerag checks --model earlier and on None (so '--url "" --model M'
    # runs the embedded LLM there, and is this usage error here).
    if not args.url and args.model:
        raise UsageError("--model: names a model of the --url server; give --url too")
    return make_llm(args)


def _d2f_corpus(rows: list, what: str) -> list[dict]:
    """Passages from parsed JSONL rows (:func:`cli.common.parse_rows`): each a passage
    (``text``) or a question with ``passages``."""
    passages = []
    for n, row, why in rows:
        if row is None:
            if what == "--corpus":
                raise UsageError(f"--corpus: line {n}: {why}")
            continue  # an input line that is not an object is that item's error record
        items = row["passages"] if isinstance(row.get("passages"), list) else ([row] if "text" in row else [])
        for p in items:
            if not (isinstance(p, dict) and isinstance(p.get("text"), str)):
                raise UsageError(f"{what}: line {n}: a passage without a str 'text'")
            passages.append({k: p[k] for k in ("pid", "title", "text", "url") if p.get(k) is not None})
    return passages


def run(args: argparse.Namespace) -> int:
    """The batch command's records, as the other batch commands': ``line``, ``id`` when the
    input had one, then :meth:`D2FResult.to_record` (``question``, ``answer``, the search's
    figures, ``trace``) or :meth:`D2FError.to_record` (``error``, ``error_type``, ``question``)."""
    from ..pipelines.d2f import D2FReAG, corpus_retriever

    params = _d2f_params(args)
    if args.output is not None:
        check_distinct([args.input] + ([args.corpus] if args.corpus else []), args.output)
    rows = parse_rows(read_lines(args.input, "input"), "input")
    corpus_rows = parse_rows(read_lines(args.corpus, "--corpus"), "--corpus") if args.corpus else rows
    corpus = _d2f_corpus(corpus_rows, "--corpus" if args.corpus else "input")
    if not corpus:
        raise UsageError("no passages: give --corpus FILE, or 'passages' lists in the input lines")
    embedder = make_embedder(args.embedder)
    method = D2FReAG(_d2f_llm(args), corpus_retriever(corpus, embedder), params)
    failed = 0
    bar = None
    try:
        with JsonlWriter(args.output or "-", resume=args.resume) as out:
            rows = rows_to_run(rows, out, "d2f", args.quiet)
            bar = progress(len(rows), enabled=not args.quiet, desc="d2f", unit="q")
            failed = write_one_by_one(rows, method, out, bar)
    finally:
        if bar is not None:
            bar.close()
    if not args.quiet:
        print(f"d2f: {len(rows)} items, {failed} errors", file=sys.stderr)
    return batch_status("d2f", len(rows), failed, out)


def run_eval(args: argparse.Namespace) -> int:
    import time

    from ..pipelines.d2f import (
        CONTROL_SETTINGS,
        corpus_retriever,
        evaluate_control,
        evaluate_llm,
        format_report,
        load_questions,
        pooled_corpus,
    )

    try:
        rows = load_questions(args.data)
        corpus = pooled_corpus(rows)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise UsageError(f"data: {str(exc).removeprefix('path: ')}") from exc
    scripted = args.llm == "scripted"
    if scripted and (args.url or args.model):
        raise UsageError("--url/--model: a real LLM is used with --llm model only")
    params = _d2f_params(args)
    embedder_name = args.embedder if args.embedder != "auto" else ("hashing" if scripted else "minilm")
    embedder = make_embedder(embedder_name)
    t0 = time.perf_counter()
    retriever = corpus_retriever(corpus, embedder)
    embed_s = time.perf_counter() - t0
    print(f"D2F-ReAG on {len(rows)} questions, corpus of {len(corpus)} pooled passages embedded with "
          f"{type(embedder).__name__} in {embed_s:.2f} s; k {params.k}, threshold {params.threshold}, "
          f"max depth {params.max_depth}, max branch {params.max_branch}")
    report: dict
    if scripted:
        print("control flow with the scripted LLM (a test double: judge score = crc32(seed:question|reasoning) "
              f"mod 11, seed {args.seed or 0}; gold sub_questions as the root's decomposition, synthetic parts "
              "below it; picks 1 and 2); decomp: share of roots decomposed; d<n>: questions whose deepest "
              "processed level is n; budget: share of questions where the budget stopped the search\n")
        settings = CONTROL_SETTINGS if args.order is None and args.max_calls is None else (("as given", {}),)
        report = evaluate_control(rows, retriever, settings=settings, seed=args.seed or 0, base=params,
                                  progress=not args.quiet)
        print(format_report(report))
    else:
        limit = args.limit if args.limit is not None else (None if args.url else 5)
        if limit is not None and limit < 1:
            raise UsageError(f"--limit: must be >= 1, got {limit}")
        llm = _d2f_llm(args)
        name = f"{args.model or 'server default'} at {args.url}" if args.url else "embedded SmolLM2-135M-Instruct"
        print(f"LLM: {name}; order {params.order}, budget {params.max_calls} calls / "
              f"{params.max_total_tokens or 'no'} tokens per question; {limit or len(rows)} questions")
        try:
            if not args.no_rates:
                from ..models import measure_rates

                print(f"measured rates: {measure_rates(llm, rounds=1, prompt_words=120, max_tokens=16)}")
            report = evaluate_llm(rows, llm, retriever, params=params, limit=limit, baseline=not args.no_baseline,
                                  progress=not args.quiet)
            print("EM / F1 / Str-Acc (gold a substring of the prediction) / ASR (the injected wrong answer in the "
                  "prediction); time per question: retrieval (query embedding included) and LLM\n")
            print(format_report(report))
            usage = getattr(llm, "usage", None)
            if callable(usage):
                u = usage()
                rates = ", ".join(f"{k} {v:.1f} tok/s" for k, v in (("prefill", u.prefill_tok_s),
                                                                     ("decode", u.decode_tok_s)) if v is not None)
                print(f"LLM usage over the run: {u.calls} calls, {u.prompt_tokens} prompt + {u.completion_tokens} "
                      f"completion tokens, {u.seconds:.1f} s" + (f"; {rates}" if rates else ""))
        finally:
            close = getattr(llm, "close", None)
            if callable(close):
                close()
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(report, fh, indent=1, default=str)
    return 0
