"""Fuzzer bytes -> one input of a shell (the ``rrag`` batch commands, the HTTP server), and the
oracle that runs it: for ``fuzz/fuzz_shells.py`` and ``tests/test_fuzz_shells_corpus.py``
(importable without atheris).

Targets
-------
``cli_defend_line``
    1-4 JSONL lines in a file, run in process through
    ``rrag_kernels.__main__.main(["defend", IN, OUT, "--nli", "lexical", "--quiet", ...])``
    (sometimes with ``--batch-size 1..3`` or ``--dropped``).
``cli_filter_line``
    1-4 response lines (or, rarely, a released ``{"data": [...]}`` document) through
    ``main(["conformal", "filter", CAL, IN, OUT, "--quiet"])``; CAL is calibrated once per
    process on the packaged sample (``rrag conformal calibrate``).
``server_body``
    A request: ``POST /defend`` or ``/filter``, a body (JSON text built like the lines, or
    raw bytes: UTF-16/32, a byte-order mark, invalid UTF-8, a NUL, over the body limit) and a
    ``Content-Type`` (sometimes wrong or missing), sent in process through
    ``fastapi.testclient.TestClient`` to one ``create_app(defense=MirageDefense(LexicalNLI),
    conformal=<calibrated>, limits=<small ServerLimits>)`` app per process.

Decoding
--------
Every byte string decodes (the kernel fuzzer's :class:`decode.Reader`: a read past the end is
0, and 0 is the ordinary valid choice, so the empty input is a small valid call). The lines
are raw JSON text written by the decoder, so they hold what ``json.dumps`` never writes: lone
surrogate escapes (``"\\ud800"``), pairs in the wrong order, a key given twice (also as
``"q\\u0075estion"``, the same key once decoded), nesting 2 to 10,000 deep, numbers JSON
readers disagree on (``1e400``, ``-0``, a 401-digit and a 4,301-digit integer, ``NaN``,
``Infinity``), every field of every type (a question that is a list, passages that are a
string, a text that is a number, a url that is a list, a retrieval_score that is a string, a
bool or a huge int), extra keys, invalid JSON (bad escapes, raw tabs, trailing garbage, two
objects on a line), blank lines of every kind, and at the file level ``\\r\\n`` / ``\\r``
line ends, a byte-order mark, raw surrogates, stray bytes and other encodings.

The oracle
----------
:func:`check` runs a :class:`Case` and raises :class:`Finding` when the contract is broken:

* **CLI** (the JSONL conventions of ``rrag_kernels/cli/common.py``): nothing escapes
  ``main`` but ``SystemExit(2)`` (a usage error); a file that is not UTF-8, or whose
  non-blank lines are none of them a JSON object, is exit 2 and leaves an existing ``OUT``
  as it was; otherwise the exit status is 0, or 1 exactly when every record is an error
  record, ``OUT`` is valid UTF-8 and holds exactly one JSON object per non-blank input line
  (lines counted as Python's text reader counts them: ``\\n``, ``\\r\\n`` and ``\\r`` end a
  line; a line that ``str.strip`` empties is blank and not an item), in order, with ``line``
  = that line's 1-based number, a str or int ``id`` echoed unchanged, and no ``OUT.partial``
  left behind. The expectation is computed here from the bytes, by the documented reading
  rule (``pipelines.loads_one_value_per_key``): a line that is not JSON, gives a key twice,
  is nested deeper than ``MAX_JSON_DEPTH`` or holds an integer too long to read is not an
  object (its record is an error record).
* **Server** (``serve/app.py``, ``serve/limits.py``, docs/server.md): the status is 200,
  400, 413, 415 or 422 (never 500; 503 only as "server busy", which sequential requests
  cannot cause; 504 would be a hang), the body is a JSON object, an error body is
  ``{"error": str, "status": <the status>, ...}``; a body over the limit is 413, a
  ``Content-Type`` that is not JSON is 415 (or 413), a JSON body that opens with a
  byte-order mark is 400 (or 413); a 200 has one result per item / response sent, ``line``
  1..n in order, ids echoed, and ``summary.n`` = n; ``GET /health`` answers 200 after every
  request.

Speed
-----
MIRAGE's content units embed each item's passages with MiniLM (~0.45 s a call on 2 cores,
which would make 100,000 executions take half a day). The oracle runs the CLI with the
shared embedder swapped for the model-free :class:`~rrag_kernels.models.HashingEmbedder`
(:func:`hashing_embedder`; the server's defense is given one), so a CLI execution takes
~6-10 ms: the code path is the same, only the vectors differ, and the shells never see
them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import os
import re
import shutil
import tempfile
import traceback
from typing import Any, Callable

from decode import Reader  # the kernel fuzzer's byte reader (fuzz/decode.py)

TARGETS: dict[str, Callable[[Reader], "Case"]] = {}  # name -> builder; filled by @target below

# --------------------------------------------------------------------------- text pools

QUESTIONS = ("Who built the Eiffel Tower?", "When did the museum open?", "How long is the bridge?",
             "Where is the museum?")
SENTENCES = ("Gustave Eiffel built the tower in 1889.", "The tower was built by Gustave Eiffel for the fair.",
             "Maria Lopez designed the tower in 1905.", "The museum opened in 1905 in Lyon.",
             "The museum opened in 1914 in Paris.", "The bridge is 300 metres long.",
             "The bridge is 120 metres long and was built in 1889.", "The museum closed in 1914.")
URLS = ("https://en.wikipedia.org/wiki/Eiffel_Tower", "https://example.com/tower", "https://news.example.org/a",
        "https://blog.example.net/b", "https://www.example.co.uk/x?y=1#z", "http://[::1]:80/", "not a url", "",
        "https://xn--e1afmkfd.xn--p1ai/", "ftp://example.com/f", "https://" + "a." * 60 + "com/")
# JSON text of strings json.dumps does not write, or writes differently (as they stand in the file).
WEIRD_STRINGS = (
    r'"\ud800"', r'"tower \udfff built"', r'"\ud83d\ude00 a pair"', r'"\udc00\ud800"', r'"\uD800\u0041"',
    r'"\udbff\udfff"', r'"\u0000nul"', r'"\u001f\u007f\u0085\u009f"', '"\u00e9 \u2713 \u6f22 \U0001f389"',
    '"\ufeffBOM inside"', '"line\u2028sep\u2029par"', '"\u0085nel"', '"\uffff\ufffe"', '""', '"   "',
    r'"\t\n\r "', r'"\"quoted\" \\ back\/slash"', '"' + "x" * 3000 + '"',
    '"' + "The tower was built by Eiffel. " * 20 + '"',
    r'"\x41"', '"unterminated', '"raw\ttab"', r'"\u12"', '"raw\x7fdel"', r'"\ud800\ud800\udc00"',
)
NUMBERS = ("0", "1", "-0", "-0.0", "0.5", "0.93", "-1", "1e400", "-1e400", "1e-400", "1" + "0" * 400,
           "-" + "9" * 400, "9" * 4301, "NaN", "Infinity", "-Infinity", "1.7976931348623157e308", "5e-324",
           "12345678901234567890", "2E+2", "01", ".5", "1.", "+1", "0x10", "1e", "--1")
DEPTHS = (2, 64, 400, 500, 900, 990, 1000, 5000, 10000)
BLANKS = ("", "   ", "\t", "\x0c", "\x0b", "\u00a0", "\u3000 ", "\x1c", "\u2028")
CONTENT_TYPES = (None, "", "text/plain", "application/json; charset=utf-16", "application/problem+json",
                 "APPLICATION/JSON", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x",
                 "application/jsonx", "json", "application/json;", "application/json; charset=latin-1",
                 " application/json ", "text/json")
BOMS = (b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff")


def _s(text: str) -> str:
    return json.dumps(text)


# --------------------------------------------------------------------------- JSON text


def number(r: Reader) -> str:
    """A number's JSON text: mostly a plain one; rarely one readers disagree on, or not JSON."""
    b = r.byte()
    if b < 0xC0:
        return repr(round(b / 255.0, 3))
    return r.pick(NUMBERS)


def string(r: Reader) -> str:
    """A string's JSON text: a sentence; rarely one json.dumps would not write, or not JSON."""
    b = r.byte()
    if b < 0xC0:
        return _s(SENTENCES[b % len(SENTENCES)])
    return r.pick(WEIRD_STRINGS)


def deep(r: Reader) -> str:
    """Nesting 2 to 10,000 deep: lists, objects, both, or one closer short."""
    d = r.pick(DEPTHS)
    how = r.below(4)
    if how == 0:
        return "[" * d + "]" * d
    if how == 1:
        return '{"a": ' * d + "0" + "}" * d
    if how == 2:
        return '[{"a": ' * (d // 2) + "1" + "}]" * (d // 2)
    return "[" * d + "]" * (d - 1)


def value(r: Reader, depth: int = 0) -> str:
    """Any JSON value (or something that is almost one)."""
    b = r.below(13)
    if b == 0:
        return "null"
    if b == 1:
        return "true"
    if b == 2:
        return "false"
    if b == 3:
        return number(r)
    if b == 4:
        return string(r)
    if b == 5:
        return r.pick(WEIRD_STRINGS)
    if b == 6 and depth < 2:
        return "[" + ", ".join(value(r, depth + 1) for _ in range(r.below(4))) + "]"
    if b == 7 and depth < 2:
        return obj(r, [(_s(k), value(r, depth + 1)) for k in ("text", "a")[: r.below(3)]])
    if b == 8:
        return deep(r)
    if b == 9:
        return "[]"
    if b == 10:
        return "{}"
    if b == 11:
        return r.pick(NUMBERS)
    return _s(r.pick(SENTENCES)) if b == 12 else "[1]"


def field(r: Reader, ordinary: Callable[[], str]) -> str | None:
    """A field's JSON text: mostly ``ordinary()``; rarely absent (None) or any other value."""
    b = r.byte()
    if b < 0xC0:
        return ordinary()
    if b < 0xCC:
        return None
    return value(r)


def _twin(key: str) -> str:
    """JSON text of a key that decodes to ``key`` but is written differently (an escape)."""
    if not key:
        return '""'
    c = key[0]
    return '"' + f"\\u{ord(c):04x}" + json.dumps(key)[2:]


def obj(r: Reader, pairs: list[tuple[str, str | None]]) -> str:
    """An object's JSON text from (key text, value text) pairs (None: left out), sometimes with a
    key given twice, extra keys, another order, or broken."""
    pairs = [(k, v) for k, v in pairs if v is not None]
    b = r.byte()
    if b >= 0xC0:
        how = r.below(8)
        if how == 0 and pairs:  # a key twice, written the same way
            k, _ = pairs[r.below(len(pairs))]
            pairs.append((k, value(r)))
        elif how == 1 and pairs:  # a key twice, the second written with an escape
            k, v = pairs[r.below(len(pairs))]
            pairs.append((_twin(json.loads(k)) if k.startswith('"') else k, v))
        elif how == 2:
            pairs.append((r.pick(('"extra"', '""', r'"\ud800"', '"id"', '"line"', '"error"', '"kept"')), value(r)))
        elif how == 3:
            pairs.reverse()
        elif how == 4:
            return "{" + ", ".join(f"{k}: {v}" for k, v in pairs) + ", }"  # a trailing comma
        elif how == 5:
            return "{" + ", ".join(f"{k}: {v}" for k, v in pairs)  # not closed
        elif how == 6:
            return "{" + ", ".join(k.strip('"') + ": " + v for k, v in pairs) + "}"  # keys not quoted
        else:
            pairs.append(('"__proto__"', "{}"))
    return "{" + ", ".join(f"{k}: {v}" for k, v in pairs) + "}"


def identifier(r: Reader) -> str | None:
    """An ``id``: mostly none or ``"q<n>"``; sometimes an int; rarely any value."""
    b = r.byte()
    if b < 0x80:
        return None
    if b < 0xC0:
        return _s(f"q{b}")
    if b < 0xD0:
        return str(b * 1000 + r.byte())
    return value(r)


def passage(r: Reader) -> str:
    url = r.byte()
    pairs = [('"text"', field(r, lambda: _s(" ".join(r.pick(SENTENCES) for _ in range(1 + r.below(2)))))),
             ('"url"', field(r, lambda: _s(r.pick(URLS))) if url & 1 else None),
             ('"title"', field(r, lambda: _s("A title")) if url & 2 else None),
             ('"retrieval_score"', field(r, lambda: number(r)) if url & 4 else None)]
    return obj(r, pairs)


def a_list(r: Reader, item: Callable[[], str], typical: int = 4, large: int = 7) -> str:
    """A list of 1..typical items (rarely up to ``large`` or empty), sometimes one not an item."""
    b = r.byte()
    n = 1 + b % typical if b < 0xF0 else r.pick((0, large, large + 1))
    parts = [item() for _ in range(n)]
    if parts and r.rare():
        parts[r.below(len(parts))] = value(r)
    return "[" + ", ".join(parts) + "]"


def defend_item(r: Reader) -> str:
    """One ``rrag defend`` item's JSON text: ``{"id"?, "question", "passages"}``."""
    return obj(r, [('"id"', identifier(r)), ('"question"', field(r, lambda: _s(r.pick(QUESTIONS)))),
                   ('"passages"', field(r, lambda: a_list(r, lambda: passage(r))))])


def claim(r: Reader) -> str:
    b = r.byte()
    text_key = '"subclaim"' if b & 1 else '"text"'
    score_key = '"relevance-score"' if b & 2 else '"score"'
    pairs = [(text_key, field(r, lambda: string(r))), (score_key, field(r, lambda: number(r)))]
    if b & 4:
        pairs.append(('"annotation"', _s(r.pick(("Y", "N", "S")))))
    return obj(r, pairs)


def response(r: Reader) -> str:
    """One ``rrag conformal filter`` response's JSON text: ``{"id"?, "prompt", "claims"}``."""
    b = r.byte()
    pairs = [('"id"', identifier(r)),
             ('"question"' if b & 1 else '"prompt"', field(r, lambda: _s(r.pick(QUESTIONS)))),
             ('"claims"', field(r, lambda: a_list(r, lambda: claim(r), 4, 13)))]
    if b & 2:
        pairs.append(('"group"', value(r)))
    return obj(r, pairs)


def line(r: Reader, item: Callable[[Reader], str]) -> str:
    """One line of a JSONL file: mostly an item; sometimes blank, another JSON value, or not JSON."""
    b = r.byte()
    if b < 0xA0:
        return item(r)
    if b < 0xB0:
        return r.pick(BLANKS)
    if b < 0xC0:
        return value(r)
    if b < 0xD0:
        text = item(r)
        how = r.below(6)
        if how == 0:
            return text[: r.below(len(text) + 1)]  # cut off
        if how == 1:
            return text + " trailing"
        if how == 2:
            return text + text  # two objects on one line
        if how == 3:
            return "\x00" + text
        if how == 4:
            return "\ufeff" + text  # a BOM inside the file
        return r.pick(("{", "}", "nul", "[", "{}", '{"question": }'))
    return item(r)


def encode(r: Reader, text: str) -> bytes:
    """The text as file / body bytes: UTF-8 mostly; rarely a BOM, a raw surrogate, a stray
    byte, a cut multi-byte character, or another encoding."""
    b = r.byte()
    if b < 0xD8:
        return text.encode("utf-8")
    how = r.below(9)
    if how == 0:
        return BOMS[0] + text.encode("utf-8")
    if how == 1:
        k = r.below(len(text) + 1)
        return (text[:k] + "\ud800" + text[k:]).encode("utf-8", "surrogatepass")
    if how == 2:
        data = text.encode("utf-8")
        k = r.below(len(data) + 1)
        return data[:k] + r.pick((b"\xff", b"\x80", b"\xc3", b"\xed\xa0\x80", b"\xf4\x90\x80\x80")) + data[k:]
    if how == 3:
        return text.encode("utf-16")
    if how == 4:
        return text.encode("utf-16-le")
    if how == 5:
        return text.encode("utf-32")
    if how == 6:
        return (text + " \u00e9").encode("latin-1", "replace")
    if how == 7:
        return text.encode("utf-8") + "\u00e9".encode("utf-8")[:1]
    return BOMS[r.below(3)] + text.encode("utf-8")


def jsonl(r: Reader, item: Callable[[Reader], str]) -> bytes:
    """1-4 lines, joined by ``\\n`` (mostly), ``\\r\\n``, ``\\r`` or a mix, then encoded."""
    n = 1 + r.byte() % 4
    lines = [line(r, item) for _ in range(n)]
    b = r.byte()
    sep = "\n" if b < 0xD0 else r.pick(("\r\n", "\r", "\n\n", "\n \n"))
    text = sep.join(lines)
    if r.byte() < 0xE0:
        text += sep
    return encode(r, text)


# --------------------------------------------------------------------------- cases


@dataclasses.dataclass
class Case:
    """One decoded input of a shell."""

    target: str
    data: bytes  # the input file (CLI) or the request body (server)
    options: tuple = ()  # extra CLI options
    out_before: bytes | None = None  # CLI: an OUT that exists before the run
    path: str = ""  # server: /defend or /filter
    content_type: str | None = "application/json"  # server: None sends no Content-Type

    def describe(self) -> str:
        data = self.data if len(self.data) <= 300 else self.data[:300] + b"...(%d bytes)" % len(self.data)
        if self.target == "server_body":
            return f"{self.target}: POST {self.path} Content-Type {self.content_type!r} body {data!r}"
        return f"{self.target}: options {list(self.options)} out_before {self.out_before is not None} input {data!r}"


def target(fn):
    TARGETS[fn.__name__.lstrip("_")] = fn
    return fn


def _cli_case(r: Reader, name: str, data: bytes, options: list[str]) -> Case:
    out_before = b'{"line": 1, "previous": "complete output"}\n' if r.byte() & 1 else None
    return Case(name, data, tuple(options), out_before)


@target
def cli_defend_line(r: Reader) -> Case:
    data = jsonl(r, defend_item)
    b = r.byte()
    options = []
    if b & 3:
        options += ["--batch-size", str(b & 3)]
    if b & 4:
        options.append("--dropped")
    return _cli_case(r, "cli_defend_line", data, options)


@target
def cli_filter_line(r: Reader) -> Case:
    b = r.byte()
    if b < 0xF4:
        data = jsonl(r, response)
    else:  # the released JSON document, on one line or spread over lines
        parts = [response(r) for _ in range(r.below(4))]
        sep = "\n" if b & 1 else ""
        data = encode(r, '{"data": [' + sep + ("," + sep).join(parts) + sep + "]}\n")
    options = ["--score", r.pick(("relevance", "other"))] if r.rare() else []
    return _cli_case(r, "cli_filter_line", data, options)


@target
def server_body(r: Reader) -> Case:
    path = "/filter" if r.byte() & 1 else "/defend"
    b = r.byte()
    if b < 0xC0:
        own = path == "/defend"
        if r.rare():
            own = not own  # the other endpoint's body
        if own:
            items = a_list(r, lambda: defend_item(r), 3, 9) if not r.rare() else value(r)
            pairs = [('"items"', items), ('"dropped"', field(r, lambda: "false") if r.byte() & 1 else None)]
        else:
            pairs = [('"responses"', a_list(r, lambda: response(r), 3, 9) if not r.rare() else value(r))]
        text = obj(r, pairs)
    elif b < 0xD0:
        text = value(r)
    else:
        text = line(r, defend_item if path == "/defend" else response)
    data = encode(r, text)
    if r.rare():
        data = data + b" " * (LIMITS["max_body_bytes"] + 1 - len(data))  # just over the body limit
    ctype = "application/json" if r.byte() < 0xD0 else r.pick(CONTENT_TYPES)
    return Case("server_body", data, path=path, content_type=ctype)


def decode(target_name: str, data: bytes) -> Case:
    """The case that ``data`` decodes to for target ``target_name``."""
    return TARGETS[target_name](Reader(data))


# --------------------------------------------------------------------------- the environment

#: The server's limits during fuzzing: small, so that 413 is reachable with small inputs.
LIMITS = {"max_body_bytes": 64 * 1024, "max_items": 8, "max_passages": 6, "max_claims": 12,
          "request_timeout_s": 120.0}


@contextlib.contextmanager
def hashing_embedder():
    """MIRAGE's shared embedder (content units) is the model-free HashingEmbedder meanwhile."""
    from rrag_kernels.models import HashingEmbedder
    from rrag_kernels.pipelines.mirage import defense

    saved = defense._shared_minilm
    embedder = HashingEmbedder()
    defense._shared_minilm = lambda: embedder
    try:
        yield
    finally:
        defense._shared_minilm = saved


SCRATCH = "RRAG_FUZZ_SHELLS_SCRATCH"  # where Env makes its folder (set by fuzz_shells.py)


def scratch_base() -> str | None:
    """/dev/shm when it can be written (the files are rewritten every execution), else the default."""
    return "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None


class Env:
    """What every execution of a process shares: a scratch folder (in ``$RRAG_FUZZ_SHELLS_SCRATCH``,
    else /dev/shm when there is one), a calibration file, and (made on first use) the server app and its TestClient.
    ``close()`` removes the folder."""

    def __init__(self) -> None:
        # fuzz_shells.py names a folder it removes afterwards (a libFuzzer process ends without
        # Python's clean-up, so close() never runs there).
        self.dir = tempfile.mkdtemp(prefix="rrag_fuzz_shells_", dir=os.environ.get(SCRATCH) or scratch_base())
        self.input = os.path.join(self.dir, "in.jsonl")
        self.output = os.path.join(self.dir, "out.jsonl")
        self.calibration = os.path.join(self.dir, "cal.json")
        self._client = None
        rc, err = self.rrag(["conformal", "calibrate", "-o", self.calibration, "--quiet"])
        if rc != 0:
            raise RuntimeError(f"rrag conformal calibrate failed ({rc}): {err}")

    @staticmethod
    def rrag(argv: list[str]) -> tuple[Any, str]:
        """``main(argv)`` with stdout / stderr captured: (exit status, stderr text)."""
        from rrag_kernels.__main__ import main

        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()), hashing_embedder():
            try:
                rc = main(argv)
            except SystemExit as exc:
                rc = exc.code
        return rc, err.getvalue()

    @property
    def client(self):
        if self._client is None:
            from fastapi.testclient import TestClient

            from rrag_kernels.models import HashingEmbedder
            from rrag_kernels.models.nli import LexicalNLI
            from rrag_kernels.pipelines.conformal import ClaimConformal
            from rrag_kernels.pipelines.mirage import MirageDefense
            from rrag_kernels.serve import ServerLimits, create_app

            app = create_app(defense=MirageDefense(nli=LexicalNLI(), embedder=HashingEmbedder()),
                             conformal=ClaimConformal.load(self.calibration), limits=ServerLimits(**LIMITS))
            self._client = TestClient(app, raise_server_exceptions=False)
            self._client.__enter__()
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.__exit__(None, None, None)
            self._client = None
        shutil.rmtree(self.dir, ignore_errors=True)


# --------------------------------------------------------------------------- the oracle


class Finding(AssertionError):
    """The contract was broken; the message says how, and on which case."""


def _fail(case: Case, message: str) -> None:
    raise Finding(f"{message}\n  {case.describe()}")


def _dict_once(pairs: list[tuple[str, Any]]) -> dict:
    # The oracle's own reading of the documented rule, on purpose not pipelines'
    # loads_one_value_per_key: an oracle that called the code it checks would agree with it.
    out: dict = {}
    for k, v in pairs:
        if k in out:
            raise KeyError(k)
        out[k] = v
    return out


def _max_depth() -> int:
    """The documented input limit (``rrag_kernels.pipelines.MAX_JSON_DEPTH``; 64)."""
    try:
        from rrag_kernels.pipelines import MAX_JSON_DEPTH
    except ImportError:
        return 64
    return MAX_JSON_DEPTH


def _depth(value: Any) -> int:
    """Nesting depth of a parsed value: a scalar 0, ``[]`` / ``{}`` 1, ``[[1]]`` 2."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        obj, d = stack.pop()
        if isinstance(obj, (dict, list)):
            deepest = max(deepest, d)
            stack.extend((v, d + 1) for v in (obj.values() if isinstance(obj, dict) else obj))
    return deepest


def _parse(text: str) -> Any:
    """A line (or a document) as the documented reading rule reads it: one JSON value, or
    None when it is none: not JSON, a key given twice, nested deeper than the limit, or beyond
    Python's reader (an integer over 4,300 digits, nesting past the recursion limit)."""
    try:
        value = json.loads(text, object_pairs_hook=_dict_once)
    except (ValueError, KeyError, RecursionError):
        return None
    return None if _depth(value) > _max_depth() else value


def expected_lines(data: bytes, document: bool) -> tuple[str | None, list[tuple[int, Any]]]:
    """What the CLI must make of the file, from its bytes alone: (why the file is a usage error,
    or None; [(line number, parsed value or None)] of the items).

    ``document``: a file whose first non-blank line starts with ``{`` and which as a whole
    reads (by the same rule) as ``{"data": [...]}`` holds those responses, numbered from 1
    (``rrag conformal filter``)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return "not UTF-8", []
    raw = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    if raw and raw[-1] == "":
        raw.pop()
    numbered = [(n, t) for n, t in enumerate(raw, 1) if t.strip()]
    if document and numbered and numbered[0][1].lstrip().startswith("{"):
        doc = _parse("".join(t + "\n" for _, t in numbered))
        if isinstance(doc, dict) and isinstance(doc.get("data"), list):
            return None, [(n, r) for n, r in enumerate(doc["data"], 1)]
    parsed = [(n, _parse(t)) for n, t in numbered]
    if parsed and not any(isinstance(p, dict) for _, p in parsed):
        return "no line is a JSON object", parsed
    return None, parsed


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except FileNotFoundError:
        return None


def check_cli(case: Case, env: Env) -> str:
    """Run a CLI case; raise :class:`Finding` on a broken contract, else say what happened."""
    with open(env.input, "wb") as fh:
        fh.write(case.data)
    for path in (env.output, env.output + ".partial"):
        if os.path.exists(path):
            os.remove(path)
    if case.out_before is not None:
        with open(env.output, "wb") as fh:
            fh.write(case.out_before)
    if case.target == "cli_defend_line":
        argv = ["defend", env.input, env.output, "--nli", "lexical", "--quiet", *case.options]
    else:
        argv = ["conformal", "filter", env.calibration, env.input, env.output, "--quiet", *case.options]
    try:
        rc, err = env.rrag(argv)
    except BaseException as exc:  # noqa: BLE001 - everything but SystemExit is the finding
        tb = "".join(traceback.format_exception(exc)[-12:])
        _fail(case, f"rrag {argv[0]} raised {type(exc).__name__}: {str(exc)[:300]}\n{tb}")
    out = _read(env.output)
    partial = _read(env.output + ".partial")
    return _judge(case, expected_lines(case.data, document=case.target == "cli_filter_line"), rc, err, out, partial)


def _judge(case: Case, reading: tuple, rc: Any, err: str, out: bytes | None, partial: bytes | None) -> str:
    """Whether the CLI's exit status and files are right for the input (its expected reading)."""
    usage, items = reading
    if rc == 2 and usage is not None:
        if out != case.out_before:
            _fail(case, f"a usage error ({err.strip()[-200:]!r}) changed OUT: {out!r}")
        if partial is not None:
            _fail(case, "a usage error left OUT.partial")
        return "usage error"
    if usage is not None:
        _fail(case, f"expected a usage error ({usage}), got exit {rc!r}; stderr {err[-500:]!r}")
    if rc not in (0, 1):
        _fail(case, f"exit {rc!r} (expected 0 or 1); stderr {err[-800:]!r}")
    if partial is not None:
        _fail(case, f"OUT.partial left behind after exit {rc}")
    if out is None:
        _fail(case, f"no OUT after exit {rc}")
    try:
        text = out.decode("utf-8")
    except UnicodeDecodeError as exc:
        _fail(case, f"OUT is not UTF-8: {exc}")
    if text and not text.endswith("\n"):
        _fail(case, "OUT's last line has no newline")
    records = []
    for k, raw in enumerate(text.split("\n")[:-1] if text else []):
        try:
            rec = json.loads(raw)
        except ValueError as exc:
            _fail(case, f"OUT line {k + 1} is not JSON ({exc}): {raw[:200]!r}")
        if not isinstance(rec, dict):
            _fail(case, f"OUT line {k + 1} is not an object: {raw[:200]!r}")
        records.append(rec)
    want = [n for n, _ in items]
    got = [r.get("line") for r in records]
    if got != want:
        _fail(case, f"count in != count out: input lines {want}, records' line {got}")
    for (n, row), rec in zip(items, records):
        if isinstance(row, dict) and type(row.get("id")) in (str, int) and rec.get("id") != row["id"]:
            _fail(case, f"line {n}: id {row['id']!r} came back as {rec.get('id')!r}")
        if not ("error" in rec or "gate_passed" in rec or "kept" in rec):
            _fail(case, f"line {n}: a record that is neither a result nor an error: {str(rec)[:200]}")
    failed = bool(records) and all("error" in r for r in records)
    if rc != (1 if failed else 0):
        _fail(case, f"exit {rc} with {sum('error' in r for r in records)} error records of {len(records)}")
    return f"exit {rc}, {len(records)} records"


def _is_json_type(ctype: str | None) -> bool:
    kind = (ctype or "").split(";", 1)[0].strip().lower()
    return kind == "application/json" or (kind.startswith("application/") and kind.endswith("+json"))


def check_server(case: Case, env: Env) -> str:
    client = env.client
    headers = {} if case.content_type is None else {"content-type": case.content_type}
    try:
        resp = client.post(case.path, content=case.data, headers=headers)
    except Exception as exc:  # noqa: BLE001
        _fail(case, f"the request raised {type(exc).__name__}: {exc}")
    status = resp.status_code
    try:
        body = json.loads(resp.content)
    except ValueError:
        _fail(case, f"status {status}: the body is not JSON: {resp.content[:300]!r}")
    if not isinstance(body, dict):
        _fail(case, f"status {status}: the body is not an object: {resp.content[:300]!r}")
    if status != 200:
        if status not in (400, 413, 415, 422) and not (status == 503 and "busy" in str(body.get("error"))):
            _fail(case, f"status {status}: {resp.content[:500]!r}")
        if not isinstance(body.get("error"), str) or body.get("status") != status:
            _fail(case, f"status {status}: not an error body {{'error', 'status'}}: {resp.content[:300]!r}")
    over = len(case.data) > LIMITS["max_body_bytes"]
    if over and status != 413:
        _fail(case, f"a body of {len(case.data)} bytes (limit {LIMITS['max_body_bytes']}) answered {status}")
    if not _is_json_type(case.content_type) and status not in (413, 415):
        _fail(case, f"Content-Type {case.content_type!r} answered {status}, not 415")
    if _is_json_type(case.content_type) and case.data.startswith(BOMS) and status not in (400, 413):
        _fail(case, f"a body with a byte-order mark answered {status}, not 400")
    if status == 200:
        key = "items" if case.path == "/defend" else "responses"
        sent = json.loads(case.data)[key]
        results = body.get("results")
        if not isinstance(results, list) or len(results) != len(sent):
            _fail(case, f"200 with {len(results) if isinstance(results, list) else results!r} results for "
                        f"{len(sent)} {key}")
        for k, (item, rec) in enumerate(zip(sent, results), 1):
            if not isinstance(rec, dict) or rec.get("line") != k:
                _fail(case, f"result {k} is not a record with line {k}: {str(rec)[:200]}")
            if type(item.get("id")) in (str, int) and rec.get("id") != item["id"]:
                _fail(case, f"result {k}: id {item['id']!r} came back as {rec.get('id')!r}")
        if body.get("summary", {}).get("n") != len(sent):
            _fail(case, f"summary.n {body.get('summary', {}).get('n')!r} for {len(sent)} {key}")
    health = client.get("/health")
    if health.status_code != 200 or health.json().get("status") != "ok":
        _fail(case, f"GET /health after the request: {health.status_code} {health.content[:200]!r}")
    return f"{status}"


def check(case: Case, env: Env) -> str:
    """Run ``case``; raise :class:`Finding` on a broken contract (the case is in the message);
    returns a short outcome ("exit 0, 3 records", "usage error", "422")."""
    if case.target == "server_body":
        return check_server(case, env)
    return check_cli(case, env)


# Signatures of known, reported bugs (see fuzz/README.md): a finding whose text matches one is
# not a new bug. Empty when every reported bug is fixed; ``fuzz_shells.py --ignore-known``
# uses it to go on searching while a fix is pending (e.g. r"raised OverflowError.*_claim_error").
KNOWN: tuple[str, ...] = ()


def known(finding: Finding) -> bool:
    return any(re.search(sig, str(finding)) for sig in KNOWN)


__all__ = ["TARGETS", "Case", "Env", "Finding", "LIMITS", "check", "decode", "expected_lines",
           "hashing_embedder", "known"]
