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
    make_embedder,
    make_llm,
    JsonlWriter,
    UsageError,
    check_distinct,
    error_record,
    existing_file,
    int_at_least,
    output_file,
    parse_rows,
    progress,
    read_lines,
    stderr,
)


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p = sub.add_parser("reliablerag", help="ReliableRAG: JSONL of questions + passages in, JSONL of answers, "
                                           "chains and contexts out",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("input", type=existing_file, help="JSONL, one {'id'?, 'question', 'passages'} per line")
    p.add_argument("-o", "--output", type=output_file, default="-", help="output JSONL (default: stdout)")
    llm = p.add_mutually_exclusive_group()
    llm.add_argument("--llm", choices=("embedded",), default=None,
                     help="embedded: SmolLM2-135M on llama.cpp, offline (the default)")
    llm.add_argument("--url", default=None, help="an OpenAI-compatible server (e.g. http://localhost:8000/v1)")
    p.add_argument("--model", default=None, help="the model name the --url server serves")
    p.add_argument("--api-key-env", default="OPENAI_API_KEY", help="environment variable holding the API key")
    p.add_argument("--timeout", type=float, default=300.0, help="read timeout per call in seconds (--url)")
    p.add_argument("--n-threads", type=int_at_least(1), default=1, help="threads of the embedded LLM (1)")
    p.add_argument("--n-ctx", type=int_at_least(512), default=4096, help="context size of the embedded LLM")
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
    p.add_argument("--quiet", action="store_true", help="no progress bar or summary on stderr")
    p.set_defaults(func=run)
    return p


def _record(line: int, row: dict, res: Any) -> dict:
    """``line``, the input's ``id`` and :meth:`RAGAnswer.to_record`."""
    from ..pipelines import line_record

    return line_record(line, row, res.to_record())


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
        from ..models import nli

        try:
            options["judge"] = nli.load(args.judge)
        except (ValueError, OSError, ImportError) as exc:
            raise UsageError(f"--judge: {exc}") from exc
    embedder = make_embedder(args.embedder)
    llm = make_llm(args)
    method = ReliableRAG(llm, embedder, credibility=args.credibility, credibility_options=options,
                         context=args.context, selector=args.selector, params=params, extraction=args.extraction)
    t0 = time.perf_counter()
    errors = 0
    bar = progress(len(rows), enabled=not args.quiet, desc="reliablerag", unit="q")
    try:
        with JsonlWriter(args.output) as out:
            for line, row, why in rows:  # one at a time: each written as soon as it is answered
                if why:
                    rec = error_record(line, row, why)
                else:
                    rec = _record(line, row, method.run_batch([row])[0])
                out.write(rec)
                errors += "error" in rec
                bar.update(1)
    finally:
        bar.close()
        close = getattr(llm, "close", None)
        if callable(close):
            close()
    stderr(f"reliablerag: {len(rows)} items, {errors} errors, {time.perf_counter() - t0:.2f} s", quiet=args.quiet)
    return 0
