"""The ``rrag`` parser and entry point: every command family registered, then one run.

:func:`main` is what ``rrag``, ``rrag-kernels`` and ``python -m rrag_kernels`` call (through
:mod:`rrag_kernels.__main__`). Each family module adds its commands (``add_parser(sub)``) and
runs them (the ``func`` each parser sets); :func:`build_parser` registers them in the order
``rrag --help`` lists them.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from . import bench, conformal, d2f, defend, info, mirage, reliablerag, serve
from .common import UsageError


def build_parser() -> argparse.ArgumentParser:
    """The ``rrag`` parser with every command; each command's parser is its ``_parser`` default."""
    parser = argparse.ArgumentParser(
        prog="rrag", description="rrag_kernels on the command line (also: python -m rrag_kernels). Batch commands "
        "read and write JSONL, one output line per input line (a failed item is an error record); '--quiet' "
        "silences progress bars. 'rrag COMMAND -h' describes a command.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    # The order is the order of 'rrag --help' (and so not grouped by family: conformal-demo and
    # reliablerag-eval come after the batch commands, as they always have).
    info.add_parser(sub)
    bench.add_parser(sub)
    defend.add_parser(sub)
    conformal.add_parser(sub)
    reliablerag.add_parser(sub)
    serve.add_parser(sub)
    mirage.add_parser(sub)  # demo, mirage-eval
    conformal.add_demo_parser(sub)
    reliablerag.add_eval_parser(sub)
    d2f.add_parser(sub)  # d2f, d2f-eval
    for command in sub.choices.values():  # usage errors are told with the usage of the command that ran
        command.set_defaults(_parser=command)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv`` (default: ``sys.argv[1:]``) and run the command.

    Returns
    -------
    int
        The command's exit status; 130 when interrupted (Ctrl-C or SIGTERM). A usage error
        (argparse's or a :class:`~.common.UsageError` the command raised) exits with 2.
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    import logging

    logger = logging.getLogger("rrag_kernels")
    level = logger.level
    if getattr(args, "quiet", False):  # the libraries' warnings (a failed item) are in the records already
        logger.setLevel(logging.ERROR)
    # SIGTERM (what schedulers and containers send) ends a run like Ctrl-C: outputs are closed
    # and said, never left half-written (only in the main thread, where Python runs handlers).
    import signal
    import threading

    on_term = None
    if threading.current_thread() is threading.main_thread():
        on_term = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        return args.func(args)
    except UsageError as exc:
        args._parser.error(str(exc))
    except KeyboardInterrupt:
        print(f"{parser.prog}: interrupted", file=sys.stderr)
        return 130
    finally:
        logger.setLevel(level)  # main() may be called in process (tests, notebooks)
        if on_term is not None:
            signal.signal(signal.SIGTERM, on_term)


class Terminated(KeyboardInterrupt):
    """SIGTERM, handled as Ctrl-C. A subclass: when the signal lands while CPython runs an
    ``exec`` (dataclasses build their methods so, e.g. while torch loads), a plain
    KeyboardInterrupt caught and answered with exit 130 still makes ``python -m`` exit by SIGINT
    (status -2); a subclass does not (benchmarks/soak_resume.py saw both)."""


def _raise_interrupt(signum: int, frame: Any) -> None:
    raise Terminated
