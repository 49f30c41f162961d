"""``rrag reliablerag IN.jsonl [-o OUT.jsonl]``: ReliableRAG on a JSONL of questions + passages.

Input line: ``{"id"?, "question", "passages": [{"text", "title"?, "triples"?, "label"?}, ...]}``
(``triples`` as in ``shared/data/multihop_dev.jsonl``; passages without them are extracted by
the LLM with ``--extraction auto``; ``label`` is read by ``--credibility oracle`` only).
Output line, in input order::

    {"line", "id"?, "question", "answer", "context_kind", "context", "context_passages",
     "chains": [{"triples": [text, ...], "score", "finished"}], "credibility",
     "llm_calls", "prompt_tokens", "completion_tokens", "seconds", "fallbacks"}

or an error record ``{"line", "id"?, "error", "question"}`` (``question``: null when it could not be read). The LLM is the embedded SmolLM2-135M
(``--llm embedded``, the default, offline) or any OpenAI-compatible server (``--url URL
--model NAME``), as for ``d2f``.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from .common import (
    JsonlWriter,
    UsageError,
    add_llm_options,
    add_resume_option,
    batch_status,
    check_distinct,
    existing_file,
    int_at_least,
    load_nli,
    make_embedder,
    make_llm,
    output_file,
    parse_rows,
    progress,
    read_lines,
    rows_to_run,
    stderr,
    write_one_by_one,
)


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p = sub.add_parser("reliablerag", help="ReliableRAG: JSONL of questions + passages in, JSONL of answers, "
                                           "chains and contexts out",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("input", type=existing_file, help="JSONL, one {'id'?, 'question', 'passages'} per line")
    p.add_argument("-o", "--output", type=output_file, default="-", help="output JSONL (default: stdout)")
    add_llm_options(p, llm_flag_help="embedded: SmolLM2-135M on llama.cpp, offline (the default)")
    p.add_argument("--embedder", default="minilm", choices=("minilm", "hashing"),
                   help="triple embedder: MiniLM (offline model) or a model-free hashed bag of words")
    p.add_argument("--credibility", default="llm", choices=("llm", "uniform", "agreement", "oracle"),
                   help="passage credibility: the LLM judge (default), uniform, cross-passage agreement "
                        "(NLI, --judge), or the passages' 'label' (oracle)")
    p.add_argument("--judge", default=None, help="NLI judge of --credibility agreement (default: the package's; "
                                                 "'lexical' is model-free)")
    p.add_argument("--selector", default="llm", choices=("llm", "reliability"), help="chain selector (default llm)")
    p.add_argument("--context", default="tbs", choices=("tbs", "sbs"), help="reader context: triples or passages")
    p.add_argument("--extraction", default="auto", choices=("auto", "supplied", "llm"),
                   help="triples: supplied where given and LLM-extracted elsewhere (auto), or only one of them")
    p.add_argument("--k", type=int_at_least(1), default=5, help="candidates per hop (default 5; at most 25)")
    p.add_argument("--beams", type=int_at_least(1), default=2, help="letters per chain and hop (default 2)")
    p.add_argument("--max-chains", type=int_at_least(1), default=3, help="chains kept (default 3)")
    p.add_argument("--max-hops", type=int_at_least(1), default=2, help="hops (default 2)")
    p.add_argument("--max-context", type=int_at_least(1), default=10, help="the most triples in the TBS context")
    add_resume_option(p)
    p.add_argument("--quiet", action="store_true", help="no progress bar or summary on stderr")
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    from ..pipelines.reliablerag import ChainParams, ReliableRAG

    if args.model is not None and args.url is None:
        raise UsageError("--model: names a model of the --url server; give --url too")
    if args.k > 25:
        raise UsageError(f"--k: the LLM selector letters at most 25 candidates, got {args.k}")
    if args.judge is not None and args.credibility != "agreement":
        raise UsageError("--judge: the NLI judge of --credibility agreement only")
    try:
        params = ChainParams(k=args.k, beams=args.beams, max_chains=args.max_chains, max_hops=args.max_hops,
                             max_context=args.max_context).validate()
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    check_distinct([args.input], args.output)
    rows = parse_rows(read_lines(args.input, "input"), "input")  # unreadable / not JSONL: exit 2, before the model
    options: dict[str, Any] = {}
    if args.credibility == "agreement" and args.judge is not None:
        options["judge"] = load_nli(args.judge, "--judge")
    embedder = make_embedder(args.embedder)
    llm = make_llm(args)
    method = ReliableRAG(llm, embedder, credibility=args.credibility, credibility_options=options,
                         context=args.context, selector=args.selector, params=params, extraction=args.extraction)
    t0 = time.perf_counter()
    errors = 0
    bar = None
    try:
        with JsonlWriter(args.output, resume=args.resume) as out:
            rows = rows_to_run(rows, out, "reliablerag", args.quiet)
            bar = progress(len(rows), enabled=not args.quiet, desc="reliablerag", unit="q")
            errors = write_one_by_one(rows, method, out, bar)
    finally:
        if bar is not None:
            bar.close()
        close = getattr(llm, "close", None)
        if callable(close):
            close()
    stderr(f"reliablerag: {len(rows)} items, {errors} errors, {time.perf_counter() - t0:.2f} s", quiet=args.quiet)
    return batch_status("reliablerag", len(rows), errors, out)


# --------------------------------------------------------------------------- reliablerag-eval


def add_eval_parser(sub: Any) -> argparse.ArgumentParser:
    """Register ``reliablerag-eval`` (a top-level command): the offline alpha x injected grid, the
    credibility ROC-AUC table and, with ``--llm embedded`` or ``--url``, the answers of an LLM."""
    rr = sub.add_parser("reliablerag-eval", help="ReliableRAG chains: alpha x injected passages grid (offline)")
    rr.add_argument("data", nargs="?", type=existing_file, default="../shared/data/multihop_dev.jsonl",
                    help="JSONL in the format of shared/data/multihop_dev.jsonl "
                         "(default: ../shared/data/multihop_dev.jsonl)")
    rr.add_argument("--max-context", type=int, default=10, help="the most triples in the TBS context")
    rr.add_argument("--no-progress", action="store_true", help="no progress bar")
    rr.add_argument("--judge", default=None, help="NLI judge of the 'agreement' credibility (default: the "
                                                  "package's default judge; 'lexical' is model-free and fast)")
    rr.add_argument("--no-grid", action="store_true", help="skip the offline alpha x injected grid")
    rr.add_argument("--no-auc", action="store_true", help="skip the credibility ROC-AUC table")
    add_llm_options(rr, llm_flag_help="also answer with an LLM: 'embedded' = SmolLM2-135M on llama.cpp, "
                                      "offline (or --url: a server)")
    rr.add_argument("--limit", type=int, default=None, help="questions answered with the LLM (default: 3 "
                                                            "embedded, all with --url)")
    rr.add_argument("--credibility", default="oracle", choices=("oracle", "uniform", "agreement", "llm"),
                    help="credibility of ReliableRAG and of the exclusion baseline (default oracle)")
    rr.add_argument("--context", default="tbs", choices=("tbs", "sbs"), help="ReliableRAG's reader context")
    rr.add_argument("--selector", default="llm", choices=("llm", "reliability"), help="chain selector")
    rr.add_argument("--k", type=int, default=None, help="candidates per hop (default 20; 5 embedded)")
    rr.add_argument("--beams", type=int, default=None, help="letters per chain and hop (default 5; 2 embedded)")
    rr.add_argument("--max-chains", type=int, default=None, help="chains kept (default 20; 3 embedded)")
    rr.add_argument("--max-hops", type=int, default=None, help="hops (default 4; 2 embedded)")
    rr.set_defaults(func=run_eval)
    return rr


def run_eval(args: argparse.Namespace) -> int:
    from ..pipelines.reliablerag import (
        KEPT_STYLE,
        ChainParams,
        credibility_auc,
        evaluate,
        evaluate_llm,
        format_auc,
        format_llm_report,
        format_report,
        load_multihop,
    )

    try:
        rows = load_multihop(args.data)  # a malformed file is a usage error, found before the model loads
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise UsageError(f"data: {str(exc).removeprefix('path: ')}") from exc
    try:
        params = ChainParams(max_context=args.max_context).validate()
    except ValueError as exc:
        raise UsageError(f"--max-context: {exc}") from exc
    use_llm = args.llm is not None or args.url is not None
    if args.model is not None and args.url is None:
        raise UsageError("--model: needs --url")
    if args.limit is not None and args.limit < 1:
        raise UsageError(f"--limit: must be >= 1, got {args.limit}")
    if not use_llm and args.credibility == "llm":
        raise UsageError("--credibility llm: needs --llm embedded or --url")
    small = args.llm == "embedded"  # a 135M model on shared CPUs: a small search by default
    llm_params = {"k": args.k or (5 if small else 20), "beams": args.beams or (2 if small else 5),
                  "max_chains": args.max_chains or (3 if small else 20), "max_hops": args.max_hops or (2 if small else 4)}
    for name, value in llm_params.items():
        try:
            ChainParams(**{name: value}).validate()
        except ValueError as exc:
            raise UsageError(f"--{name.replace('_', '-')}: {exc}") from exc
    if llm_params["k"] > 25:
        raise UsageError(f"--k: the LLM selector letters at most 25 candidates, got {llm_params['k']}")
    judge = load_nli(args.judge, "--judge") if args.judge is not None else None
    try:
        from ..models import MiniLMEmbedder

        embedder = MiniLMEmbedder()
    except ImportError as exc:
        raise UsageError(f"embedder: {exc}") from exc
    if not args.no_grid:
        try:
            report = evaluate(rows, embedder, params=params, progress=not args.no_progress)
        except ValueError as exc:  # a malformed triple, gold_chain entry or a passage without 'label'
            raise UsageError(f"data: {exc}") from exc
        print(f"ReliableRAG chains on {len(rows)} questions: oracle credibility (injected 1, others 10), supplied "
              f"triples, 'reliability' selector, MiniLM embeddings; K {params.k}, beams {params.beams}, "
              f"F {params.max_chains}, L {params.max_hops}, TBS at most {params.max_context} triples")
        print(f"injected = injected passages kept (1: the {KEPT_STYLE}-style one); inj top-K: share of injected "
              "triples among the first hop's candidates; inj TBS: in the context; gold recall: gold_chain triples "
              "in the context\n")
        print(format_report(report))
    llm, server = None, None
    try:
        if use_llm:
            from ..models import LLMError, measure_rates

            llm = make_llm(args)  # --url, else the embedded model (--llm embedded)
            server = llm if small else None
        if not args.no_auc:
            sources = {"oracle": {"source": "oracle"}, "uniform": {"source": "uniform"},
                       "agreement": {"source": "agreement", "judge": judge}}
            auc_rows = rows
            if llm is not None:
                auc_rows = rows[: args.limit or (3 if small else len(rows))]
                sources["llm"] = {"source": "llm", "llm": llm}
            try:
                auc = credibility_auc(auc_rows, sources, progress=not args.no_progress)
            except ValueError as exc:
                raise UsageError(f"data: {exc}") from exc
            print(f"\nCredibility vs the injected labels on {len(auc_rows)} questions (all passages, supplied "
                  "triples): ROC-AUC = P(a non-injected triple scores above an injected one), ties 1/2; per-q: mean "
                  "of the per-question AUCs; agreement judge: " + (args.judge or "package default") + "\n")
            print(format_auc(auc))
        if llm is not None:
            try:
                rates = measure_rates(llm, rounds=2, prompt_words=120, max_tokens=16)
                print(f"\nLLM rates: {rates}")
            except LLMError as exc:
                print(f"\nLLM rates: not measured ({exc})")
            limit = args.limit or (3 if small else None)
            p = ChainParams(max_context=args.max_context, **llm_params)
            rep = evaluate_llm(rows, llm, embedder, limit=limit, credibility_source=args.credibility,
                               credibility_options={"judge": judge} if args.credibility == "agreement" else None,
                               context=args.context, params=p, selector=args.selector,
                               progress=not args.no_progress)
            print(f"\nWith the LLM on {rep['n']} questions (all 7 passages, 2 injected): credibility "
                  f"{args.credibility}, context {args.context}, selector {args.selector}; K {p.k}, beams {p.beams}, "
                  f"F {p.max_chains}, L {p.max_hops}, alpha {p.alpha} (TRACE: alpha 1); vanilla / exclude<=3: "
                  "top-3 passages by MiniLM cosine; per-question means, seconds split kernels / embedder / LLM / "
                  "other\n")
            print(format_llm_report(rep))
    finally:
        if server is not None:
            server.close()
    return 0
