"""Defensive reading of structured replies: an integer in a range, a choice, a JSON object.

Small models answer "Score: 7/10", "**B**", or a JSON object wrapped in a code fence; big
ones sometimes add a sentence. The parsers here read what can be read and say why when they
cannot; the ``ask_*`` helpers ask, parse, re-ask up to ``attempts`` times in all (showing
the model its unreadable reply and what is wanted), and then give up with a fallback value.
They never raise for what the LLM does (a bad reply, an :class:`LLMError`, any exception
from ``chat``): they return a :class:`ParseResult` holding the value and what happened, to
store on the item, so one bad item never breaks a batch. They raise only for invalid
arguments (TypeError / ValueError), before any call.

Rules (all documented on the functions):

* :func:`parse_int` -- the first integer in ``[low, high]`` written as a whole number
  (not part of a word, a decimal or a larger number); out-of-range integers are skipped.
* :func:`parse_choice` -- the whole reply when it is one choice (punctuation and markdown
  stripped, case ignored); else the choice after "answer is"/"answer:"; else the first
  choice standing alone as a word (single letters must match case, so the article "a" is
  not choice "A"; longer choices ignore case).
* :func:`parse_json_object` -- the reply, or the content of its first code fence, or the
  first ``{...}`` that decodes, as a JSON object, with the ``required_keys`` present.
* :func:`parse_json_list` -- the same search for a JSON list, or an object holding one
  (``{"picks": [1, 3]}``: its first list value).
* :func:`parse_questions` -- the strings of the reply's JSON list, else its numbered or
  bulleted lines, else its lines ending with "?"; cleaned, repeats dropped.
* :func:`parse_indices` -- the items a reply picks from a numbered list of ``n`` (1-based
  whole numbers, as :func:`parse_int` reads them, out-of-range ones skipped), as 0-based
  indices; a bare "none" or an empty list picks nothing.
* :func:`parse_short_answer` -- what follows the last "Answer:" line, else the first
  non-empty line; quotes, markdown and a final period removed (never fails).
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from ...ops import check_int
from .types import check_messages, logger

if TYPE_CHECKING:
    from ..protocols import LLM

__all__ = [
    "ParseResult",
    "ask_choice",
    "ask_int",
    "ask_json",
    "ask_parsed",
    "parse_choice",
    "parse_indices",
    "parse_int",
    "parse_json_list",
    "parse_json_object",
    "parse_questions",
    "parse_short_answer",
]

_INT = re.compile(r"(?<![\w.])[-+]?\d+(?!\w|\.\d)", re.ASCII)
_FENCE = re.compile(r"```[a-zA-Z]*\s*(.*?)```", re.DOTALL)
_STRIP = " \t\r\n*_`'\"()[]{}<>.,:;!?"
#: A numbered or bulleted line of a list ("1. x", "2) x", "Q3: x", "- x", "* x", "\u2022 x"): group 1 is x.
_LIST_LINE = re.compile(r"^\s*(?:\d+\s*[.):\]-]|[-*\u2022]|q\d+\s*[.):])\s*(.+?)\s*$", re.IGNORECASE)
#: A reply that says "nothing picked" in a word.
_NONE_REPLY = re.compile(r"^\W*(none|no|nothing|empty|\[\s*\])\W*$", re.IGNORECASE)
#: An "Answer: x" line ("The answer is: x", "Final answer - x", "**Answer**: x", "**Answer:** x"):
#: group 1 is x. Bold may close before or after the colon; both are common.
_ANSWER_LINE = re.compile(r"^\s*\**\s*(?:the\s+)?(?:final\s+)?answer(?:\s+is)?\s*\**\s*[:\-]\s*\**\s*(.+?)\s*$",
                          re.IGNORECASE | re.MULTILINE)


@dataclass
class ParseResult:
    """A value read from an LLM's reply, and how it was obtained.

    Attributes
    ----------
    value : Any
        The parsed value, or the fallback when ``fallback_used``.
    fallback_used : bool
        No attempt gave a readable reply.
    attempts : int
        Chat calls made (1 .. ``attempts``).
    replies : list of str
        The raw reply of each call ("" for a call that raised).
    errors : list of str
        Why each unreadable attempt failed (parse reason or the exception), in order.
    what : str
        What was asked for ("an integer in [0, 10]", ...).
    """

    value: Any
    fallback_used: bool
    attempts: int
    replies: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    what: str = ""

    @property
    def ok(self) -> bool:
        """True when the value was read from a reply (not the fallback)."""
        return not self.fallback_used

    def as_dict(self) -> dict[str, Any]:
        """The fields as a JSON-serialisable dict (to store on an item)."""
        return asdict(self)


# --------------------------------------------------------------------------- parsers


def _check_range(low: Any, high: Any) -> None:
    for name, v in (("low", low), ("high", high)):
        check_int(v, name, minimum=-(2**63))  # any int64: a range may be negative
    if low > high:
        raise ValueError(f"low must be <= high, got low={low}, high={high}")


def parse_int(text: str, low: int = 0, high: int = 10) -> int:
    """The first integer in ``[low, high]`` in ``text``.

    Parameters
    ----------
    text : str
        An LLM reply ("7", "Score: 7/10", "I'd give it an 8.").
    low, high : int
        Inclusive range.

    Returns
    -------
    int

    Raises
    ------
    ValueError
        No whole number in range (the message says which were found). Digits inside words
        ("A1", "7th") and decimals ("7.5") are not read as integers.
    """
    _check_range(low, high)
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    found = [int(m.group()) for m in _INT.finditer(text)]
    for value in found:
        if low <= value <= high:
            return value
    if found:
        raise ValueError(f"the integers in the reply ({', '.join(map(str, found[:5]))}) are outside [{low}, {high}]")
    raise ValueError("no integer in the reply")


def _check_choices(choices: Any) -> tuple[str, ...]:
    if isinstance(choices, str) or not isinstance(choices, (list, tuple)):
        raise TypeError(f"choices must be a list of str, got {type(choices).__name__}")
    if not choices:
        raise ValueError("choices must not be empty")
    seen = set()
    for i, c in enumerate(choices):
        if not isinstance(c, str):
            raise TypeError(f"choices[{i}] must be a str, got {type(c).__name__}")
        if not c.strip() or c != c.strip():
            raise ValueError(f"choices[{i}] must be non-empty without surrounding spaces, got {c!r}")
        if c.casefold() in seen:
            raise ValueError(f"choices[{i}] {c!r} repeats another choice (choices are compared ignoring case)")
        seen.add(c.casefold())
    return tuple(choices)


def _choice_pattern(choice: str) -> re.Pattern[str]:
    flags = 0 if len(choice) == 1 else re.IGNORECASE
    return re.compile(r"(?<!\w)" + re.escape(choice) + r"(?!\w)", flags)


def parse_choice(text: str, choices: Sequence[str] = ("A", "B", "C", "D")) -> str:
    """The choice a reply names.

    Parameters
    ----------
    text : str
        An LLM reply ("B", "(b)", "**B**", "The answer is B.", "B) Paris").
    choices : sequence of str
        The allowed answers (letters or words), distinct ignoring case.

    Returns
    -------
    str
        One of ``choices``, spelled as given there.

    Raises
    ------
    ValueError
        No choice found.

    Notes
    -----
    In order: the whole reply stripped of punctuation and markdown, compared ignoring case;
    a choice right after "answer is" / "answer:" (ignoring case); the first choice that stands
    alone as a word (single-letter choices must match case there, so "a" the article is not
    "A"; longer choices ignore case). When several choices stand alone, the first one wins.
    """
    choices = _check_choices(choices)
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    by_fold = {c.casefold(): c for c in choices}
    core = text.strip().strip(_STRIP)
    if core.casefold() in by_fold:
        return by_fold[core.casefold()]
    after = re.search(r"answer\s*(?:is|:|-|=)\s*[*_`'\"(\[]*([^\s*_`'\")\].,:;!?]+)", text, re.IGNORECASE)
    if after and after.group(1).casefold() in by_fold:
        return by_fold[after.group(1).casefold()]
    best: tuple[int, str] | None = None
    for c in choices:
        m = _choice_pattern(c).search(text)
        if m and (best is None or m.start() < best[0]):
            best = (m.start(), c)
    if best is not None:
        return best[1]
    raise ValueError(f"no choice among {', '.join(choices)} in the reply")


def _check_keys(required_keys: Any) -> tuple[str, ...]:
    if isinstance(required_keys, str) or not isinstance(required_keys, (list, tuple, set, frozenset)):
        raise TypeError(f"required_keys must be a list of str, got {type(required_keys).__name__}")
    for k in required_keys:
        if not isinstance(k, str):
            raise TypeError(f"required_keys must hold str, got {type(k).__name__}")
    return tuple(required_keys)


def parse_json_object(text: str, required_keys: Sequence[str] = ()) -> dict[str, Any]:
    """The JSON object in a reply.

    Parameters
    ----------
    text : str
        An LLM reply: a JSON object, possibly in a code fence or after some words.
    required_keys : sequence of str
        Keys the object must have.

    Returns
    -------
    dict

    Raises
    ------
    ValueError
        No JSON object decodes, or one lacks a required key.

    Notes
    -----
    Tried in order: the whole reply; the content of each code fence; the text from each
    ``{`` on (``json.JSONDecoder.raw_decode``, so trailing words are ignored). The first
    JSON object (not list or scalar) found is checked for ``required_keys``.
    """
    keys = _check_keys(required_keys)
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    decoder = json.JSONDecoder()
    candidates = [text.strip()] + [m.group(1).strip() for m in _FENCE.finditer(text)]
    obj = None
    for cand in candidates:
        try:
            value = json.loads(cand)
        except ValueError:
            continue
        if isinstance(value, dict):
            obj = value
            break
    if obj is None:
        for m in re.finditer(r"\{", text):
            try:
                value, _ = decoder.raw_decode(text, m.start())
            except ValueError:
                continue
            if isinstance(value, dict):
                obj = value
                break
    if obj is None:
        raise ValueError("no JSON object in the reply" if "{" in text else "no '{' in the reply")
    missing = [k for k in keys if k not in obj]
    if missing:
        raise ValueError(f"the JSON object lacks the keys {missing} (it has {sorted(obj)[:10]})")
    return obj


def _list_in(value: Any) -> list[Any] | None:
    """``value`` when it is a list; the first list value of an object; else None."""
    if isinstance(value, dict):
        value = next((v for v in value.values() if isinstance(v, list)), None)
    return value if isinstance(value, list) else None


def parse_json_list(text: str) -> list[Any]:
    """The JSON list in a reply.

    Parameters
    ----------
    text : str
        An LLM reply: a JSON list, or a JSON object holding one (``{"picks": [1, 3]}``),
        possibly in a code fence or among words.

    Returns
    -------
    list
        As decoded (items of any JSON type); ``[]`` for an explicit empty list.

    Raises
    ------
    ValueError
        No JSON list, and no JSON object holding one, decodes.

    Notes
    -----
    Tried in order: the whole reply; the content of each code fence; the text from each
    ``[`` or ``{`` on, in reading order (``json.JSONDecoder.raw_decode``, so trailing words
    and brackets inside strings, as in ``["Is [X] a film?"]``, do not matter). A list is
    returned as it is; an object gives its first list value, and one without a list value is
    passed over.
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    for cand in [text.strip()] + [m.group(1).strip() for m in _FENCE.finditer(text)]:
        try:
            found = _list_in(json.loads(cand))
        except ValueError:
            continue
        if found is not None:
            return found
    decoder = json.JSONDecoder()
    for m in re.finditer(r"[\[{]", text):
        try:
            found = _list_in(decoder.raw_decode(text, m.start())[0])
        except ValueError:
            continue
        if found is not None:
            return found
    raise ValueError("no JSON list in the reply" if re.search(r"[\[{]", text) else "no '[' in the reply")


def _clean_item(text: str) -> str:
    return text.strip().strip("\"'`").strip()


def _json_list_or_none(text: str) -> list | None:
    """The reply's JSON list (:func:`parse_json_list`), or None when it holds none."""
    try:
        return parse_json_list(text)
    except ValueError:
        return None


def parse_questions(text: str) -> list[str]:
    """The questions a reply lists (a decomposition into sub-questions, follow-up questions).

    Parameters
    ----------
    text : str
        A JSON list of strings, as :func:`parse_json_list` finds it (``["A?", "B?"]``,
        ``{"sub_questions": [...]}``, in a code fence or among words); else numbered or
        bulleted lines (``1. ...``, ``2) ...``, ``Q3: ...``, ``- ...``, ``* ...``); else
        every line that ends with ``?``.

    Returns
    -------
    list of str
        Stripped of whitespace, quotes and backticks; empty ones and repeats dropped; in
        order, not capped. ``[]`` for an explicit empty JSON list (nothing to ask).

    Raises
    ------
    ValueError
        Nothing readable.

    Notes
    -----
    The first rule that gives an item wins. A JSON list's items that are not strings are
    ignored (a list with none falls through to the lines). Only the last rule asks for a
    "?": without list markers it is what tells the questions from the words around them.
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    listed = _json_list_or_none(text)
    if listed == []:
        return []
    items = [_clean_item(v) for v in listed or () if isinstance(v, str)]
    if not items:
        lines = text.strip().splitlines()
        items = [_clean_item(m.group(1)) for m in map(_LIST_LINE.match, lines) if m]
        if not items:
            items = [_clean_item(line) for line in lines if line.strip().endswith("?")]
    out = list(dict.fromkeys(i for i in items if i))
    if not out:
        raise ValueError("no questions in the reply (expected a JSON array of strings)")
    return out


def parse_indices(text: str, n: int) -> list[int]:
    """The items a reply picks from a list of ``n`` numbered from 1, as 0-based indices.

    Parameters
    ----------
    text : str
        ``{"picks": [1, 3]}``, ``[1, 3]``, ``["1", "3"]``, ``1, 3``, ``Questions 1 and 3``.
        An empty JSON list, or a reply that is only "none", "no", "nothing", "empty" or
        ``[]`` (any case, punctuation around), picks nothing.
    n : int
        Items listed (>= 0).

    Returns
    -------
    list of int
        Sorted, unique, each in ``[0, n)``.

    Raises
    ------
    ValueError
        No number in ``1..n`` and no explicit "none" (the message says which numbers were
        found).

    Notes
    -----
    When the reply holds a JSON list (:func:`parse_json_list`), its int and str items are
    read, else the whole reply. Numbers are whole numbers as :func:`parse_int` reads them:
    not inside a word ("1st", "Q1"), not a decimal ("1.5"), and a sign belongs to the number,
    so ``[-1]`` (a common way to say "none") is -1, outside ``1..n``, not item 1. Numbers
    outside ``1..n`` are skipped.
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    check_int(n, "n", minimum=0)
    if _NONE_REPLY.match(text.strip()):
        return []
    listed = _json_list_or_none(text)
    if listed == []:
        return []
    if listed:
        text = " ".join(str(v) for v in listed if isinstance(v, (int, str)) and not isinstance(v, bool))
    found = [int(m.group()) for m in _INT.finditer(text)]
    picked = sorted({v - 1 for v in found if 1 <= v <= n})
    if not picked:
        if found:
            raise ValueError(f"the numbers in the reply ({', '.join(map(str, found[:5]))}) are not in 1..{n}")
        raise ValueError("no item number in the reply")
    return picked


def parse_short_answer(text: str) -> str:
    """The short answer in a free-text reply (a reasoning that ends with ``Answer: ...``).

    Parameters
    ----------
    text : str
        Any reply. An answer line is ``Answer: x``, ``The answer is: x``, ``Final answer - x``,
        ``**Answer**: x`` or ``**Answer:** x`` (case ignored).

    Returns
    -------
    str
        What follows the last answer line; without one, the first non-empty line; then
        surrounding whitespace, quotes, backticks and markdown ``*`` / ``_`` removed, and one
        final period. ``""`` for a reply with no non-empty line.

    Notes
    -----
    Never raises for a str: a free-text reply always has a short answer, possibly empty.
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    found = _ANSWER_LINE.findall(text)
    line = found[-1] if found else next((ln for ln in text.splitlines() if ln.strip()), "")
    line = line.strip().strip("*_`\"'").strip()
    return line[:-1].rstrip() if line.endswith(".") else line


# --------------------------------------------------------------------------- ask, re-ask, fall back


def _check_attempts(attempts: Any) -> int:
    return check_int(attempts, "attempts", minimum=1)


def ask_parsed(llm: LLM, messages: Sequence[Mapping[str, Any]], parse: Callable[[str], Any], *,
               fallback: Any = None, attempts: int = 3, instruction: str = "", what: str = "",
               **chat_kwargs: Any) -> ParseResult:
    """Ask, parse the reply, re-ask on failure; never raises for what the LLM does.

    Parameters
    ----------
    llm : LLM
        Anything with ``chat(messages, **chat_kwargs) -> ChatResult``.
    messages : sequence of dict
        The question (validated at once: TypeError / ValueError).
    parse : callable
        ``parse(text) -> value``; raises ValueError (or any exception) with the reason when
        the text cannot be read.
    fallback : Any
        The value when every attempt fails.
    attempts : int
        Chat calls at most (>= 1; default 3).
    instruction : str
        What to say when re-asking, after the reason ("Reply with only ...").
    what : str
        A description for the record.
    **chat_kwargs
        Passed to every ``llm.chat`` call (``max_tokens``, ``temperature``, ``seed``, ...).

    Returns
    -------
    ParseResult
        ``value`` (parsed or ``fallback``), ``fallback_used``, ``attempts``, ``replies``,
        ``errors``.

    Notes
    -----
    A re-ask sends the original messages, the unreadable reply as the assistant's turn, and
    a user turn "That reply could not be read (<reason>). <instruction>". After a call that
    raised, the original messages are sent again.
    """
    base = check_messages(messages)
    attempts = _check_attempts(attempts)
    if not callable(parse):
        raise TypeError(f"parse must be callable, got {type(parse).__name__}")
    replies: list[str] = []
    errors: list[str] = []
    convo = base
    for k in range(1, attempts + 1):
        try:
            text = llm.chat(convo, **chat_kwargs).text
        except Exception as exc:  # the LLM failing is an outcome to record, not to raise
            replies.append("")
            errors.append(f"{type(exc).__name__}: {exc}")
            convo = base
            continue
        replies.append(text)
        try:
            value = parse(text)
        except Exception as exc:
            reason = str(exc) or type(exc).__name__
            errors.append(reason)
            reask = f"That reply could not be read ({reason}). {instruction}".strip()
            convo = base + [{"role": "assistant", "content": text}, {"role": "user", "content": reask}]
            continue
        return ParseResult(value, False, k, replies, errors, what)
    logger.debug("no readable reply (%s) after %d attempts; using the fallback %r: %s", what, attempts, fallback,
                 errors[-1] if errors else "")
    return ParseResult(fallback, True, attempts, replies, errors, what)


def ask_int(llm: LLM, messages: Sequence[Mapping[str, Any]], *, low: int = 0, high: int = 10,
            fallback: int | None = None, attempts: int = 3, max_tokens: int = 8,
            **chat_kwargs: Any) -> ParseResult:
    """Ask for an integer in ``[low, high]`` (read by :func:`parse_int`).

    Parameters
    ----------
    llm : LLM
    messages : sequence of dict
    low, high : int
        Inclusive range.
    fallback : int or None
        The value when no attempt gives one (default None: "unknown").
    attempts : int
        Chat calls at most.
    max_tokens : int
        Per call.
    **chat_kwargs
        More ``chat`` arguments (``temperature``, ``seed``, ...).

    Returns
    -------
    ParseResult
        ``value`` is an int in range, or ``fallback``.
    """
    _check_range(low, high)
    return ask_parsed(llm, messages, lambda t: parse_int(t, low, high), fallback=fallback, attempts=attempts,
                      instruction=f"Reply with a single integer from {low} to {high} and nothing else.",
                      what=f"an integer in [{low}, {high}]", max_tokens=max_tokens, **chat_kwargs)


def ask_choice(llm: LLM, messages: Sequence[Mapping[str, Any]], choices: Sequence[str] = ("A", "B", "C", "D"), *,
               fallback: str | None = None, attempts: int = 3, max_tokens: int = 8,
               **chat_kwargs: Any) -> ParseResult:
    """Ask for one of ``choices`` (read by :func:`parse_choice`).

    Parameters
    ----------
    llm : LLM
    messages : sequence of dict
    choices : sequence of str
        The allowed answers, e.g. letters.
    fallback : str or None
        The value when no attempt gives one (default None); need not be a choice.
    attempts : int
        Chat calls at most.
    max_tokens : int
        Per call.
    **chat_kwargs
        More ``chat`` arguments.

    Returns
    -------
    ParseResult
        ``value`` is one of ``choices``, or ``fallback``.
    """
    choices = _check_choices(choices)
    listed = ", ".join(choices[:-1]) + f" or {choices[-1]}" if len(choices) > 1 else choices[0]
    return ask_parsed(llm, messages, lambda t: parse_choice(t, choices), fallback=fallback, attempts=attempts,
                      instruction=f"Reply with only {listed}.", what=f"one of {list(choices)}",
                      max_tokens=max_tokens, **chat_kwargs)


def ask_json(llm: LLM, messages: Sequence[Mapping[str, Any]], *, required_keys: Sequence[str] = (),
             fallback: dict[str, Any] | None = None, attempts: int = 3, max_tokens: int = 256,
             json_mode: bool = True, **chat_kwargs: Any) -> ParseResult:
    """Ask for a JSON object (read by :func:`parse_json_object`).

    Parameters
    ----------
    llm : LLM
    messages : sequence of dict
    required_keys : sequence of str
        Keys the object must have.
    fallback : dict or None
        The value when no attempt gives one (default None).
    attempts : int
        Chat calls at most.
    max_tokens : int
        Per call (a truncated object does not parse, and is re-asked).
    json_mode : bool
        Send ``response_format={"type": "json_object"}`` (vLLM, llama.cpp, Ollama and OpenAI
        constrain the output to JSON with it). Set False for a server that refuses it.
    **chat_kwargs
        More ``chat`` arguments.

    Returns
    -------
    ParseResult
        ``value`` is a dict, or ``fallback``.
    """
    keys = _check_keys(required_keys)
    if json_mode:
        chat_kwargs.setdefault("response_format", {"type": "json_object"})
    wanted = f" with the keys {', '.join(keys)}" if keys else ""
    return ask_parsed(llm, messages, lambda t: parse_json_object(t, keys), fallback=fallback, attempts=attempts,
                      instruction=f"Reply with a single JSON object{wanted} and nothing else.",
                      what=f"a JSON object{wanted}", max_tokens=max_tokens, **chat_kwargs)
