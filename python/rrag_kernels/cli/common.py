"""What the batch commands share: argument types, JSONL in and out, progress, usage errors.

JSONL conventions of every command
----------------------------------
* Input: one JSON object per line, UTF-8; blank lines are skipped (they are not items).
* Output: one line per input item, in input order (count in = count out). An item that
  cannot be run (a line that is not JSON, a missing field, a failure inside the method) is
  an error record ``{"line": n, "id": ..., "error": "..."}`` (``id`` when the line had one;
  ``line`` is 1-based in the input file), never a lost line.
* ``OUT`` is written as ``OUT.partial`` and renamed when the run ends: a run that fails or
  is interrupted (Ctrl-C, SIGTERM, a full disk) leaves a previous ``OUT`` as it was and its
  records so far, whole lines, in ``OUT.partial`` (:class:`JsonlWriter`).
* A file that is not JSONL at all (no line is a JSON object), is not UTF-8 or cannot be read
  is a usage error (exit 2) found before any model loads.
* Floats JSON cannot hold: NaN is written as ``null``, infinities as ``"inf"`` / ``"-inf"``
  (as the conformal calibrator's file does); text UTF-8 cannot hold (a lone surrogate in an
  echoed ``id``) as JSON escapes (``rrag_kernels.pipelines.json_text``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import stat
import sys
from typing import Any, Callable, Iterator, Sequence

from ..pipelines import DuplicateKeyError, JSONLimitError, json_text, jsonable, loads_one_value_per_key

__all__ = ["UsageError", "existing_file", "output_file", "check_distinct", "open_unit", "unit_open_closed",
           "unit_closed", "int_at_least", "add_llm_options", "read_lines", "parse_rows", "error_record", "jsonable", "JsonlWriter",
           "progress", "chunks", "stderr", "make_llm", "make_embedder", "load_nli", "batch_status",
           "add_resume_option", "rows_to_run", "write_one_by_one"]


class UsageError(Exception):
    """A mistake on the command line found after parsing (an unknown scorer, an unreadable
    data file): reported by argparse (exit 2), never as a traceback."""


# --------------------------------------------------------------------------- argument types


def existing_file(path: str) -> str:
    if not os.path.isfile(path):
        raise argparse.ArgumentTypeError(f"no such file: {path!r}")
    return path


def output_file(path: str) -> str:
    """A path that can be written: ``-`` (stdout), or a file in an existing folder."""
    if path == "-":
        return path
    if os.path.isdir(path):
        raise argparse.ArgumentTypeError(f"is a folder, not a file: {path!r}")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise argparse.ArgumentTypeError(f"no such folder: {os.path.dirname(path)!r}")
    return path


def check_distinct(inputs: Sequence[str], output: str) -> None:
    """The output must not replace an input (``OUT.partial`` is renamed over ``OUT`` at the end, and
    stdout or a device is written from the start)."""
    if output == "-" or not os.path.exists(output):
        return
    for path in inputs:
        if os.path.exists(path) and os.path.samefile(path, output):
            raise UsageError(f"output: {output} is also an input; write the results to another file")


def _number(text: str, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
    if math.isnan(value):
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
    return value


def open_unit(text: str) -> float:
    """A number in the open interval (0, 1) (alpha, calibration fractions)."""
    value = _number(text, "a number in (0, 1)")
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1), got {text}")
    return value


def unit_open_closed(text: str) -> float:
    """A number in (0, 1] (the conformal level ``a``)."""
    value = _number(text, "a number in (0, 1]")
    if not 0.0 < value <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1], got {text}")
    return value


def unit_closed(text: str) -> float:
    """A number in [0, 1] (a simulated judge's accuracy)."""
    value = _number(text, "a number in [0, 1]")
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a number in [0, 1], got {text}")
    return value


def int_at_least(minimum: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer >= {minimum}, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected an integer >= {minimum}, got {value}")
        return value

    parse.__name__ = f"integer >= {minimum}"  # what argparse names in "invalid ... value"
    return parse


# --------------------------------------------------------------------------- JSONL in


def read_lines(path: str, what: str) -> list[tuple[int, str]]:
    """(1-based line number, text) of each non-blank line; a usage error when unreadable."""
    try:
        with open(path, encoding="utf-8") as fh:
            return [(n, line) for n, line in enumerate(fh, 1) if line.strip()]
    except UnicodeDecodeError as exc:
        raise UsageError(f"{what}: {path} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise UsageError(f"{what}: {exc}") from None


def parse_rows(lines: Sequence[tuple[int, str]], what: str
               ) -> list[tuple[int, dict | None, str | None]]:
    """``(line, row, error)`` per line: the parsed object, or None and why it is not one.

    Raises UsageError when there are lines but none is a JSON object: the file is not JSONL
    (a CSV, a JSON document spread over lines, the wrong file), which no record would help.
    """
    out: list[tuple[int, dict | None, str | None]] = []
    for n, text in lines:
        try:
            row = loads_one_value_per_key(text)
        except DuplicateKeyError as exc:  # json alone keeps the last: a line must not say two things
            out.append((n, None, f"the key {str(exc.args[0])[:80]!r} appears twice in one object"))
            continue
        except json.JSONDecodeError as exc:
            out.append((n, None, f"not JSON ({exc})"))
            continue
        except JSONLimitError as exc:  # nested too deeply, an integer too long to read
            out.append((n, None, f"not accepted as input: {exc}"))
            continue
        if not isinstance(row, dict):
            out.append((n, None, f"not a JSON object (a {type(row).__name__})"))
            continue
        out.append((n, row, None))
    if out and all(row is None for _, row, _ in out):
        raise UsageError(f"{what}: not JSONL (no line is a JSON object; line {out[0][0]}: {out[0][2]})")
    return out


def error_record(line: int, row: dict | None, message: str) -> dict:
    rec: dict[str, Any] = {"line": line}
    if isinstance(row, dict) and row.get("id") is not None:
        rec["id"] = row["id"]
    rec["error"] = message
    return rec


# --------------------------------------------------------------------------- JSONL out


class JsonlWriter:
    """Writes records one per line to a path (``-``: stdout); a context manager.

    A file is written as ``PATH.partial`` beside it and renamed to ``PATH`` when the run ends
    without an error, so a run that fails or is interrupted (Ctrl-C, SIGTERM, a full disk)
    never replaces a previous complete output: its records so far stay in ``PATH.partial``,
    whole lines (each line is flushed as written), and the message says how many. A path
    that is not a regular file (``/dev/null``, a FIFO) is written in place.

    With ``resume`` the records already in ``PATH.partial`` are kept (a line cut off by a kill
    is dropped) and their ``line`` numbers are in :attr:`done`: the command skips those input
    lines and appends the rest, so the renamed file is the complete output in input order.
    """

    def __init__(self, path: str, *, resume: bool = False):
        self.path = path
        self.count = 0
        self._target = None if path == "-" else (path if _special_file(path) else f"{path}.partial")
        #: ``line`` of each record an interrupted run left in ``PATH.partial`` (``resume``), and
        #: how many of them are error records.
        self.done: set[int] = set()
        self.done_errors = 0
        if resume:
            if self._target is None or self._target == self.path:
                raise UsageError("--resume: needs an output file (not stdout or a device) to resume into")
            self.done, self.done_errors = _finished_lines(self._target)
            self.count = len(self.done)
        try:
            self._fh = sys.stdout if self._target is None else open(self._target, "a" if resume else "w",
                                                                    encoding="utf-8", buffering=1)
        except OSError as exc:
            raise UsageError(f"output: {exc}") from None

    def write(self, record: dict) -> None:
        try:
            try:
                self._fh.write(json_text(record) + "\n")
            except UnicodeEncodeError:  # a stream that cannot hold the characters (stdout in an ASCII locale)
                self._fh.write(json_text(record, ascii_only=True) + "\n")
        except OSError as exc:
            raise UsageError(f"output: cannot write {self._target or 'stdout'} ({exc.strerror or exc}); "
                             f"{self._kept()}") from None
        self.count += 1

    def _kept(self) -> str:
        if self._target is None or self._target == self.path:
            return f"{self.count} records written"
        return f"{self.count} records written to {self._target}, {self.path} left as it was"

    def __enter__(self) -> "JsonlWriter":
        return self

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        if self._fh is sys.stdout:
            self._fh.flush()
            return
        try:
            self._fh.close()
        except OSError as exc:  # the last buffered line did not fit
            if exc_type is None:
                raise UsageError(f"output: cannot write {self._target} ({exc.strerror or exc}); {self._kept()}") \
                    from None
        if exc_type is None:
            if self._target != self.path:
                os.replace(self._target, self.path)
        elif exc_type is not UsageError:  # a UsageError says it already
            print(f"output: {self._kept()}", file=sys.stderr, flush=True)


def _finished_lines(partial: str) -> tuple[set[int], int]:
    """The ``line`` of every whole record in an interrupted run's ``partial`` file (none when
    there is no such file), and how many are error records; a last line without its newline
    (a kill mid-write) is cut off."""
    try:
        with open(partial, "rb") as fh:
            data = fh.read()
    except FileNotFoundError:
        return set(), 0
    except OSError as exc:
        raise UsageError(f"--resume: cannot read {partial} ({exc.strerror or exc})") from None
    whole = data[: data.rfind(b"\n") + 1]
    done: set[int] = set()
    errors = 0
    for n, raw in enumerate(whole.splitlines(), 1):
        try:
            record = json.loads(raw)
            line = record.get("line")
            errors += "error" in record
        except (ValueError, AttributeError):
            line = None
        if not isinstance(line, int) or isinstance(line, bool):
            raise UsageError(f"--resume: line {n} of {partial} is not an output record; remove the file to "
                             f"start over")
        done.add(line)
    if len(whole) != len(data):
        try:
            with open(partial, "r+b") as fh:
                fh.truncate(len(whole))
        except OSError as exc:
            raise UsageError(f"--resume: cannot repair {partial} ({exc.strerror or exc})") from None
    return done, errors


def rows_to_run(rows: Sequence[tuple[int, Any, Any]], out: "JsonlWriter", command: str, quiet: bool) -> list:
    """The input rows a (resumed) run still has to run: those whose ``line`` is not in
    ``out.done``. The records kept must be the first lines of this input (a run writes in input
    order), else the partial file is another run's and resuming would mix them: a usage error."""
    if not out.done:
        return list(rows)
    first = {line for line, _, _ in rows[: len(out.done)]}
    if out.done != first:
        raise UsageError(f"--resume: {out.path}.partial does not hold the first {len(out.done)} lines of this "
                         f"input (another input?); remove it to start over")
    stderr(f"{command}: resuming after {len(out.done)} of {len(rows)} records", quiet=quiet)
    return list(rows[len(out.done):])


def write_one_by_one(rows: Sequence[tuple[int, Any, Any]], method: Any, out: "JsonlWriter", bar: Any) -> int:
    """Run ``method`` (the method contract: ``run_batch``, ``to_record``) on each row and write
    its record as soon as it is made, so an interrupted run keeps every answer it got (slow
    LLM methods: reliablerag, d2f); a row that is not a JSON object is its error record.
    Returns the number of error records written."""
    from ..pipelines import line_record

    errors = 0
    for line, row, why in rows:
        rec = error_record(line, row, why) if why else line_record(line, row, method.run_batch([row])[0].to_record())
        out.write(rec)
        errors += "error" in rec
        bar.update(1)
    return errors


def add_resume_option(p: argparse.ArgumentParser) -> None:
    """``--resume``: continue an interrupted run from the records in ``OUTPUT.partial``."""
    p.add_argument("--resume", action="store_true",
                   help="continue an interrupted run: keep the records in OUTPUT.partial and run only the "
                        "input lines it does not hold (the same input and options as the run it continues)")


def _special_file(path: str) -> bool:
    """Whether ``path`` exists and is not a regular file (a device, a FIFO): not renamed over."""
    try:
        return not stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


# --------------------------------------------------------------------------- progress and messages


class _NoBar:
    def update(self, n: int = 1) -> None:
        pass

    def close(self) -> None:
        pass

    def __enter__(self) -> "_NoBar":
        return self

    def __exit__(self, *exc: Any) -> None:
        pass


def progress(total: int, *, enabled: bool, desc: str, unit: str = "item") -> Any:
    """A tqdm bar on stderr (``update(n)``, ``close()``, a context manager), or a silent one
    when not ``enabled`` or tqdm is missing."""
    if not enabled:
        return _NoBar()
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return _NoBar()
    return tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, dynamic_ncols=True)


def chunks(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for s in range(0, len(items), size):
        yield items[s:s + size]


def stderr(message: str, *, quiet: bool = False) -> None:
    if not quiet:
        print(message, file=sys.stderr, flush=True)


def batch_status(command: str, n: int, errors: int, out: "JsonlWriter | None" = None) -> int:
    """A batch command's exit status: 1 when it had items and every one failed (a wrong
    input format, a backend that is down: a script must notice), else 0 (some error records
    among good ones are the records' business). Said on stderr even with ``--quiet``. With
    ``out`` the records a resumed run kept count too: the status is the whole output's."""
    if out is not None:
        n, errors = n + len(out.done), errors + out.done_errors
    if n and errors == n:
        print(f"{command}: every item failed ({n} of {n}); see the error records", file=sys.stderr, flush=True)
        return 1
    return 0


def add_llm_options(p: argparse.ArgumentParser, *, llm_flag_help: str | None = None) -> None:
    """The one option group of the LLM commands (reliablerag, reliablerag-eval, d2f, d2f-eval):
    which LLM answers and how it is reached, read by :func:`make_llm`. With ``llm_flag_help``
    the group has ``--llm embedded``, exclusive with ``--url``."""
    g = p.add_argument_group("LLM", "the embedded SmolLM2-135M on llama.cpp (offline; the default) or any "
                                    "OpenAI-compatible chat server (--url)")
    where = g.add_mutually_exclusive_group() if llm_flag_help else g
    if llm_flag_help:
        where.add_argument("--llm", choices=("embedded",), default=None, help=llm_flag_help)
    where.add_argument("--url", default=None, help="an OpenAI-compatible server (e.g. http://localhost:8000/v1)")
    g.add_argument("--model", default=None, help="the model name the --url server serves")
    g.add_argument("--api-key-env", default="OPENAI_API_KEY",
                   help="environment variable holding the --url server's API key (default OPENAI_API_KEY)")
    g.add_argument("--timeout", type=float, default=300.0, help="read timeout per call in seconds (--url; default 300)")
    g.add_argument("--n-threads", type=int_at_least(1), default=1, help="threads of the embedded LLM (default 1)")
    g.add_argument("--n-ctx", type=int_at_least(512), default=4096, help="context size of the embedded LLM (default 4096)")


def make_llm(args: argparse.Namespace) -> Any:
    """The LLM of ``--llm embedded`` / ``--url`` (d2f, d2f-eval, reliablerag; tests patch it with a
    scripted one where a command imports it)."""
    from ..models import EmbeddedLLM, LLMError, OpenAIChatLLM

    if args.url:
        try:
            return OpenAIChatLLM(args.url, args.model, api_key_env=args.api_key_env, read_timeout=args.timeout)
        except (TypeError, ValueError) as exc:
            raise UsageError(f"--url: {exc}") from exc
    try:
        return EmbeddedLLM(n_ctx=args.n_ctx, n_threads=args.n_threads)
    except (ImportError, FileNotFoundError, LLMError) as exc:
        raise UsageError(f"embedded LLM: {exc} (or point --url at an OpenAI-compatible server)") from exc


def make_embedder(name: str) -> Any:
    """``--embedder minilm`` (MiniLMEmbedder, offline) or ``hashing`` (model-free)."""
    from ..models import HashingEmbedder, MiniLMEmbedder

    if name == "hashing":
        return HashingEmbedder()
    try:
        return MiniLMEmbedder()
    except ImportError as exc:
        raise UsageError(f"--embedder minilm: {exc} (or use --embedder hashing, model-free)") from exc


def load_nli(name: str | None, option: str = "--nli") -> Any:
    """The NLI scorer named by ``option`` (:func:`rrag_kernels.models.nli.load`; ``--nli`` of
    demo, mirage-eval, defend and serve, ``--judge`` of reliablerag and reliablerag-eval); a
    name that cannot be loaded, a hub id neither cached nor downloadable included (OSError), is
    a usage error naming the option, never a traceback."""
    from ..models import nli

    try:
        return nli.load(name)
    except (ValueError, OSError, ImportError) as exc:
        raise UsageError(f"{option}: {exc}") from exc
