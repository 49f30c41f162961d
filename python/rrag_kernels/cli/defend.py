"""``rrag defend IN.jsonl OUT.jsonl``: the MIRAGE defense on unlabelled questions + passages.

Input line: ``{"id"?, "question", "passages": [{"text", "url"?, "title"?,
"retrieval_score"?}, ...]}`` (other keys are ignored). Output line, in input order::

    {"line", "id"?, "question", "gate_passed", "gate_reason", "fallback",
     "kept": [{"text", "source", "score", "domain", "contradicted_by"}],
     "dropped": [{"text", "source", "score", "domain", "reason"}],   # with --dropped
     "prompt", "stats"}

or an error record ``{"line", "id"?, "error"}`` (a line that is not a JSON object; an item that
breaks the input rules of ``pipelines/_items.py`` or on which the defense failed also has
``gate_passed`` false and the ``on_block`` fallback ``prompt``). Items run through
:meth:`MirageDefense.defend_batch` (one NLI pass per batch, a failing item isolated).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from .common import (
    JsonlWriter,
    UsageError,
    add_resume_option,
    batch_status,
    check_distinct,
    chunks,
    error_record,
    existing_file,
    int_at_least,
    load_nli,
    output_file,
    parse_rows,
    progress,
    read_lines,
    rows_to_run,
    stderr,
)


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p = sub.add_parser("defend", help="MIRAGE defense: JSONL of questions + passages in, JSONL of decisions, "
                                      "kept claims and prompts out (no labels needed)",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("input", type=existing_file, help="JSONL, one {'id'?, 'question', 'passages'} per line")
    p.add_argument("output", type=output_file, help="JSONL to write, one line per input line ('-': stdout)")
    add_defense_options(p)
    p.add_argument("--batch-size", type=int_at_least(1), default=64,
                   help="questions per defend_batch call (one NLI pass each; default 64)")
    p.add_argument("--dropped", action="store_true", help="also write the dropped claims with their reasons")
    p.add_argument("--graph", default=None, metavar="PNG",
                   help="draw the claim graph of the first item as PNG (matplotlib); a '{line}' in the path "
                        "draws one per item, e.g. graphs/q{line}.png")
    add_resume_option(p)
    p.add_argument("--quiet", action="store_true", help="no progress bar or summary on stderr")
    p.set_defaults(func=run)
    return p


def add_defense_options(p: argparse.ArgumentParser) -> None:
    """The MIRAGE defense's options (``--nli --mode --on-block --pairing --score-kind --top-k``),
    shared by ``rrag defend`` and ``rrag serve``; :func:`defense_from_args` builds the defense."""
    p.add_argument("--nli", default=None, metavar="NAME",
                   help="NLI scorer name or path (default: offline default; 'lexical' is model-free and fast)")
    p.add_argument("--mode", default="corroboration", choices=("corroboration", "paper"),
                   help="how the kept set is chosen (default corroboration; paper: greedy F(S) pruning)")
    p.add_argument("--on-block", default="parametric", choices=("parametric", "refuse", "passthrough"),
                   help="the prompt when the gate blocks (default parametric)")
    p.add_argument("--pairing", default="lexical", choices=("lexical", "semantic", "hybrid"),
                   help="which claim pairs are judged (semantic/hybrid load the MiniLM embedder)")
    p.add_argument("--score-kind", default="similarity", choices=("similarity", "distance"),
                   help="what the passages' retrieval_score is (default similarity: higher is better)")
    p.add_argument("--top-k", type=int_at_least(1), default=None, metavar="N",
                   help="passages read per question (default 20)")
    add_param_option(p)


def add_param_option(p: argparse.ArgumentParser) -> None:
    """``--param NAME=VALUE`` (repeatable): any scalar :class:`MirageParams` field."""
    p.add_argument("--param", action="append", default=[], metavar="NAME=VALUE", type=_param_item,
                   help="set a MirageParams field (int, float, str or bool ones, e.g. min_sources=1, "
                        "contr_min=0.4, slot_conflicts=true); repeatable; fields with their own option "
                        "(--mode ...) are set there")


def _param_item(text: str) -> tuple[str, Any]:
    """One ``NAME=VALUE`` of ``--param``, converted to the field's type."""
    import dataclasses

    from ..pipelines.mirage import MirageParams

    name, sep, value = text.partition("=")
    name = name.strip()
    kinds = {f.name: f.type for f in dataclasses.fields(MirageParams)}
    if not sep:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    if name not in kinds:
        raise argparse.ArgumentTypeError(f"{name!r} is not a MirageParams field")
    kind = kinds[name] if isinstance(kinds[name], str) else getattr(kinds[name], "__name__", "")
    kind = kind.removesuffix(" | None")  # optional fields (None = the mode's default) take their type
    convert = {"int": int, "float": float, "str": str, "bool": _boolean}.get(kind)
    if convert is None:
        raise argparse.ArgumentTypeError(f"{name!r} ({kind}) cannot be set from the command line")
    try:
        return name, convert(value.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"{name}: expected {kind}, got {value!r}") from None


def _boolean(text: str) -> bool:
    """A bool field's value: true/false, yes/no, on/off or 1/0 (any case)."""
    value = {"true": True, "yes": True, "on": True, "1": True,
             "false": False, "no": False, "off": False, "0": False}.get(text.lower())
    if value is None:
        raise ValueError(text)
    return value


def params_from_args(args: argparse.Namespace, **named: Any) -> Any:
    """:class:`MirageParams` from ``--param`` items and the named options; a ``--param`` of a
    field with its own option, or an invalid value, is a usage error naming ``--param``."""
    from ..pipelines.mirage import MirageParams

    over = dict(getattr(args, "param", None) or [])
    for name in over:
        if name in named:
            raise UsageError(f"--param: {name} has its own option, --{name.replace('_', '-')}")
    over.update(named)
    try:
        return MirageParams(**over).validate()
    except (TypeError, ValueError) as exc:
        raise UsageError(f"--param: {exc}") from exc


def defense_from_args(args: argparse.Namespace) -> Any:
    """The :class:`MirageDefense` of :func:`add_defense_options`' arguments; a judge that
    cannot be loaded is a usage error naming ``--nli``."""
    from ..pipelines.mirage import MirageDefense

    over = {"mode": args.mode, "on_block": args.on_block, "pairing": args.pairing, "score_kind": args.score_kind}
    if args.top_k is not None:
        over["top_k"] = args.top_k
    params = params_from_args(args, **over)  # checked before the judge loads
    return MirageDefense(nli=load_nli(args.nli), params=params)


def defend_record(line: int, row: dict, result: Any, with_dropped: bool) -> dict:
    """The output record of one defended item (the module docstring's shape): ``line``, the
    input's ``id`` and :meth:`MirageResult.to_record`."""
    from ..pipelines import line_record

    return line_record(line, row, result.to_record(dropped=with_dropped))


def _graph(result: Any, pattern: str, line: int) -> int:
    """Draw one item's claim graph (``{line}`` in the path: the input line); 1 when drawn."""
    from ..pipelines.mirage import plot_claim_graph

    path = Path(pattern.replace("{line}", str(line)))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)  # 'graphs/q{line}.png' in a fresh folder
        plot_claim_graph(result, path)
    except (OSError, ValueError) as exc:  # an unknown image suffix, an unwritable path
        raise UsageError(f"--graph: {exc}") from exc
    return 1


def run(args: argparse.Namespace) -> int:
    check_distinct([args.input], args.output)
    if args.graph is not None:
        import importlib.util

        if importlib.util.find_spec("matplotlib") is None:
            raise UsageError("--graph: needs matplotlib: pip install 'rrag_kernels[plot]'")
    rows = parse_rows(read_lines(args.input, "input"), "input")  # unreadable / not JSONL: exit 2, before the model
    defense = defense_from_args(args)
    t0 = time.perf_counter()
    errors = passed = graphs = 0
    bar = None
    try:
        with JsonlWriter(args.output, resume=args.resume) as out:
            rows = rows_to_run(rows, out, "defend", args.quiet)
            bar = progress(len(rows), enabled=not args.quiet, desc="defend", unit="q")
            for part in chunks(rows, args.batch_size):  # written as each batch ends, in input order
                records: list[dict | None] = [None] * len(part)
                todo = []
                for k, (line, row, why) in enumerate(part):
                    if why:
                        records[k] = error_record(line, row, why)
                    else:
                        todo.append(k)
                results = defense.defend_batch([part[k][1] for k in todo], progress=False) if todo else []
                for k, result in zip(todo, results):
                    records[k] = defend_record(part[k][0], part[k][1], result, args.dropped)
                    if args.graph is not None and result.error is None and (graphs == 0 or "{line}" in args.graph):
                        graphs += _graph(result, args.graph, part[k][0])
                for rec in records:
                    out.write(rec)
                    errors += "error" in rec
                    passed += bool(rec.get("gate_passed"))
                bar.update(len(part))
    finally:
        if bar is not None:
            bar.close()
    n = len(rows)
    stderr(f"defend: {n} items, {errors} errors, gate passed {passed}/{n - errors}, "
           f"{time.perf_counter() - t0:.2f} s (NLI {type(defense.nli).__name__}, mode {args.mode})", quiet=args.quiet)
    return batch_status("defend", n, errors, out)
