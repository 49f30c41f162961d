"""How a method's record becomes JSON text: written once for every shell (CLI, server, Ray).

* Values JSON has no type for: numpy scalars and arrays become numbers and lists,
  dataclasses dicts, tuples and sets lists, anything else its ``str``.
* Floats JSON cannot hold: NaN is ``null``, infinities ``"inf"`` / ``"-inf"`` (as the
  conformal calibrator's file writes them).
* Text that is not valid Unicode: a lone surrogate (``"\\ud800"``) is a valid JSON escape that
  ``json`` and pydantic accept in an input, so an echoed ``id`` or ``prompt`` can hold one,
  and UTF-8 cannot encode it. Such a record is written with every non-ASCII character escaped
  (``ensure_ascii``): the text is then ASCII, no writer can fail on it, and ``json.loads``
  gives back exactly the string that came in. Every other record keeps its characters as they
  are. The text the methods read is cleaned where they read it (``models.clean_text``:
  U+FFFD); echoed fields are returned as given.
"""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any

__all__ = ["MAX_JSON_DEPTH", "DuplicateKeyError", "JSONLimitError", "json_text", "jsonable", "line_record",
           "loads_one_value_per_key"]

#: The deepest nesting of arrays and objects an input may have. A record echoes parts of its
#: input (an ``id``), and every writer walks it; nothing a method reads is nested beyond a few
#: levels, so deeper input is refused where it is read instead of failing a writer later.
MAX_JSON_DEPTH = 64


def jsonable(obj: Any) -> Any:
    """``obj`` with numpy values, dataclasses, tuples and sets made JSON values; NaN -> None,
    +-inf -> "inf" / "-inf"."""
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, bool) or obj is None or isinstance(obj, str):
        return obj
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return jsonable(dataclasses.asdict(obj))
    if hasattr(obj, "tolist") and callable(obj.tolist):  # numpy scalars and arrays
        return jsonable(obj.tolist())
    if isinstance(obj, float):
        if math.isnan(obj):
            return None
        if math.isinf(obj):
            return "inf" if obj > 0 else "-inf"
        return obj
    if isinstance(obj, int):
        return obj
    return str(obj)


def json_text(obj: Any, *, ascii_only: bool = False) -> str:
    """One line of JSON for a record (no newline): :func:`jsonable`, then ``json.dumps``.

    Characters stay as they are unless the text holds one UTF-8 cannot encode (a lone
    surrogate) or ``ascii_only`` is set: then every non-ASCII character is a ``\\uXXXX``
    escape, which decodes to the same string.
    """
    value = jsonable(obj)
    text = json.dumps(value, ensure_ascii=ascii_only, allow_nan=False)
    if not ascii_only and not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            text = json.dumps(value, ensure_ascii=True, allow_nan=False)
    return text


def line_record(line: int, item: Any, record: dict) -> dict:
    """What a shell writes for one item: ``line`` (its 1-based position), the item's ``id``
    when it has one, then the method's record (``Result.to_record()``)."""
    out: dict[str, Any] = {"line": line}
    if isinstance(item, dict) and item.get("id") is not None:
        out["id"] = item["id"]
    out.update(record)
    return out


class DuplicateKeyError(ValueError):
    """A JSON object that gives one key twice (``args[0]``: the key)."""


def _one_value_per_key(pairs: list[tuple[str, Any]]) -> dict:
    out: dict = {}
    for key, value in pairs:
        if key in out:
            raise DuplicateKeyError(key)
        out[key] = value
    return out


class JSONLimitError(ValueError):
    """JSON that parses but is beyond what an input may be: nested deeper than
    :data:`MAX_JSON_DEPTH`, or an integer too long to read (``sys.get_int_max_str_digits``)."""


def _deeper_than(value: Any, limit: int) -> bool:
    stack = [(value, 1)]
    while stack:  # iterative: the check itself must not recurse
        obj, depth = stack.pop()
        if isinstance(obj, (dict, list)):
            if depth > limit:
                return True
            stack.extend((v, depth + 1) for v in (obj.values() if isinstance(obj, dict) else obj))
    return False


def loads_one_value_per_key(text: str | bytes) -> Any:
    """``json.loads``, but an object that gives a key twice raises :class:`DuplicateKeyError`
    (``json`` alone keeps the last value: an input must not say two things at once), and JSON
    nested deeper than :data:`MAX_JSON_DEPTH` or with an integer too long to read raises
    :class:`JSONLimitError`. The reading rule of every shell's JSON input (CLI lines, request
    bodies, calibration files); a ``json.JSONDecodeError`` is text that is not JSON."""
    try:
        value = json.loads(text, object_pairs_hook=_one_value_per_key)
    except RecursionError:
        raise JSONLimitError(f"nested deeper than {MAX_JSON_DEPTH} levels") from None
    except (json.JSONDecodeError, DuplicateKeyError):
        raise
    except ValueError as exc:  # int("1" * 5000): Python's limit on digits in one integer
        raise JSONLimitError(f"a number too long to read ({exc})") from None
    if _deeper_than(value, MAX_JSON_DEPTH):
        raise JSONLimitError(f"nested deeper than {MAX_JSON_DEPTH} levels")
    return value
