"""What every LLM backend shares: the request rules, the result types, the errors, the meter.

One home for each rule: :func:`chat_request` validates the arguments of
:meth:`LLM.chat <rrag_kernels.models.LLM.chat>` and builds the OpenAI-style request body
that the HTTP client sends and the embedded server reads; :func:`parse_chat_response` reads
the OpenAI-style response body both of them get back. :class:`UsageMeter` keeps the
per-instance accounting every backend reports through ``usage()``.
"""

from __future__ import annotations

import json
import logging
import math
import threading
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Mapping, Sequence

from ...ops import check_int, check_real

logger = logging.getLogger("rrag_kernels.llm")

__all__ = [
    "ROLES",
    "ChatResult",
    "LLMConnectionError",
    "LLMError",
    "LLMTimeoutError",
    "LLMUsage",
    "TokenLogprob",
    "UsageMeter",
    "chat_request",
    "check_messages",
    "parse_chat_response",
]

#: Roles a message may have (OpenAI's chat roles; "developer" is OpenAI's newer "system").
ROLES = ("system", "developer", "user", "assistant", "tool")
#: The most alternatives per token OpenAI accepts; llama.cpp and vLLM accept the same range.
MAX_TOP_LOGPROBS = 20
_RESPONSE_FORMAT_TYPES = ("text", "json_object", "json_schema")


# --------------------------------------------------------------------------- errors


class LLMError(RuntimeError):
    """A chat call that failed: the server refused it, broke, or could not be reached.

    Parameters
    ----------
    message : str
        What happened, in words.
    status : int, optional
        The HTTP status the server answered with (None when there was no answer).
    server_message : str, optional
        The server's own error message (``error.message`` of an OpenAI-style error body,
        else the start of the body).
    url : str, optional
        The endpoint called.
    attempts : int
        How many requests were made before giving up.

    Attributes
    ----------
    message, status, server_message, url, attempts : as above
        ``str(error)`` joins them.
    """

    def __init__(self, message: str, *, status: int | None = None, server_message: str | None = None,
                 url: str | None = None, attempts: int = 1):
        super().__init__(message)
        self.message = message
        self.status = status
        self.server_message = server_message
        self.url = url
        self.attempts = attempts

    def __str__(self) -> str:
        parts = [self.message]
        if self.status is not None:
            parts.append(f"status {self.status}")
        if self.server_message:
            parts.append(f"server said: {self.server_message}")
        if self.url:
            parts.append(f"url {self.url}")
        if self.attempts > 1:
            parts.append(f"after {self.attempts} attempts")
        return "; ".join(parts)


class LLMTimeoutError(LLMError):
    """The server did not answer within the read timeout (or could not be reached within the
    connect timeout, when every retry timed out too)."""


class LLMConnectionError(LLMError):
    """The server could not be reached (refused, reset, closed, unknown host), after retries."""


# --------------------------------------------------------------------------- validation


def _check_str(value: Any, name: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, got {type(value).__name__}")
    return value


def check_messages(messages: Any) -> list[dict[str, Any]]:
    """Validate OpenAI-style chat messages and return them as a new list of dicts.

    Parameters
    ----------
    messages : sequence of mapping
        Each with ``role`` (one of :data:`ROLES`) and ``content`` (str; an ``assistant``
        message that carries ``tool_calls`` may have ``content`` None). Other keys
        (``name``, ``tool_call_id``, ...) pass through. At least one message.

    Returns
    -------
    list of dict
        Shallow copies, in order.

    Raises
    ------
    TypeError
        ``messages`` is not a list/tuple of mappings, or a role/content is not a str.
    ValueError
        ``messages`` is empty, a message lacks ``role``/``content``, or a role is unknown.
    """
    if isinstance(messages, (str, bytes, Mapping)) or not isinstance(messages, (list, tuple)):
        raise TypeError(f"messages must be a list of {{'role', 'content'}} dicts, got {type(messages).__name__}")
    if not messages:
        raise ValueError("messages must hold at least one message, got an empty list")
    out = []
    for i, msg in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(msg, Mapping):
            raise TypeError(f"{where} must be a dict with 'role' and 'content', got {type(msg).__name__}")
        for key in ("role", "content"):
            if key not in msg:
                raise ValueError(f"{where} has no {key!r} key (keys: {sorted(map(str, msg))})")
        role = _check_str(msg["role"], f"{where}['role']")
        if role not in ROLES:
            raise ValueError(f"{where}['role'] must be one of {ROLES}, got {role!r}")
        content = msg["content"]
        if content is None and not (role == "assistant" and msg.get("tool_calls")):
            raise TypeError(f"{where}['content'] is None (only an assistant message with tool_calls "
                            "may have no content)")
        if content is not None:
            _check_str(content, f"{where}['content']")
        out.append(dict(msg))
    return out


def chat_request(messages: Any, *, max_tokens: int, temperature: float, stop: str | Sequence[str] | None,
                 seed: int | None, response_format: Mapping[str, Any] | None,
                 top_logprobs: int | None, model: str | None = None) -> dict[str, Any]:
    """Validate the arguments of ``chat`` and build the OpenAI ``/v1/chat/completions`` body.

    Parameters
    ----------
    messages : sequence of mapping
        See :func:`check_messages`.
    max_tokens : int
        Most tokens to generate, >= 1.
    temperature : float
        >= 0 and finite; 0 is greedy decoding.
    stop : str or sequence of str or None
        Strings that end generation (not included in the text); each non-empty.
    seed : int or None
        Sampling seed, >= 0 (servers that support it make sampling reproducible).
    response_format : mapping or None
        ``{"type": "json_object"}`` (a JSON object), ``{"type": "text"}``, or
        ``{"type": "json_schema", "json_schema": {...}}`` where the server supports it.
    top_logprobs : int or None
        None: no log-probabilities. 0..20: the log-probability of each generated token and
        that many alternatives per token (the body asks for at least 1, since llama.cpp
        returns none for 0; :func:`parse_chat_response` trims them to what was asked).
    model : str or None
        The server's model name; omitted from the body when None.

    Returns
    -------
    dict
        The request body (JSON-serialisable), ``"stream": False``.

    Raises
    ------
    TypeError, ValueError
        Naming the argument that is wrong.
    """
    body: dict[str, Any] = {"messages": check_messages(messages)}
    if model is not None:
        body["model"] = _check_str(model, "model")
    body["max_tokens"] = check_int(max_tokens, "max_tokens", minimum=1)
    temperature = check_real(temperature, "temperature")
    if not math.isfinite(temperature) or temperature < 0:
        raise ValueError(f"temperature: must be finite and >= 0, got {temperature}")
    body["temperature"] = temperature
    if stop is not None:
        stops = [stop] if isinstance(stop, str) else stop
        if not isinstance(stops, (list, tuple)):
            raise TypeError(f"stop must be a str, a list of str or None, got {type(stop).__name__}")
        for i, s in enumerate(stops):
            if not isinstance(s, str):
                raise TypeError(f"stop[{i}] must be a str, got {type(s).__name__}")
            if not s:
                raise ValueError(f"stop[{i}] is empty (an empty stop string would end every reply at once)")
        if stops:
            body["stop"] = list(stops)
    if seed is not None:
        body["seed"] = check_int(seed, "seed", minimum=0)
    if response_format is not None:
        if not isinstance(response_format, Mapping):
            raise TypeError("response_format must be a dict such as {'type': 'json_object'}, "
                            f"got {type(response_format).__name__}")
        kind = response_format.get("type")
        if kind not in _RESPONSE_FORMAT_TYPES:
            raise ValueError(f"response_format['type'] must be one of {_RESPONSE_FORMAT_TYPES}, got {kind!r}")
        body["response_format"] = dict(response_format)
    if top_logprobs is not None:
        top_logprobs = check_int(top_logprobs, "top_logprobs", minimum=0, maximum=MAX_TOP_LOGPROBS)
        body["logprobs"] = True
        # At least one alternative on the wire: llama.cpp returns no logprobs at all for 0;
        # parse_chat_response(top_logprobs=0) trims the alternatives back off.
        body["top_logprobs"] = max(top_logprobs, 1)
    body["stream"] = False
    return body


# --------------------------------------------------------------------------- results


@dataclass(frozen=True)
class TokenLogprob:
    """One generated token with its log-probability and the best alternatives.

    Attributes
    ----------
    token : str
        The token's text.
    logprob : float
        Natural-log probability of the token (<= 0).
    top : tuple of (str, float)
        The ``top_logprobs`` most likely tokens at this position with their
        log-probabilities, most likely first (it usually contains ``token`` itself).
    """

    token: str
    logprob: float
    top: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True)
class ChatResult:
    """The reply to one chat call.

    Attributes
    ----------
    text : str
        The generated text (the assistant message's content; "" when there was none).
    finish_reason : str or None
        ``"stop"`` (end of turn or a stop string), ``"length"`` (``max_tokens`` reached), ...
    prompt_tokens, completion_tokens : int
        Token counts the server reported (0 when it reported none).
    seconds : float
        Wall time of the call as the caller saw it (queueing, retries and transfer included).
    logprobs : tuple of TokenLogprob or None
        Per generated token, when ``top_logprobs`` was asked for and the server returned
        them; None otherwise.
    model : str or None
        The model name the server reported.
    prefill_tokens : int or None
        Prompt tokens the server actually evaluated (prompt_tokens minus those reused from
        its prompt cache), when it reports timings (llama.cpp does).
    prefill_seconds, decode_seconds : float or None
        Server-side time to evaluate the prompt / to generate the completion, when reported.
    raw : dict
        The server's response body, for anything not above.
    """

    text: str
    finish_reason: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    logprobs: tuple[TokenLogprob, ...] | None = None
    model: str | None = None
    prefill_tokens: int | None = None
    prefill_seconds: float | None = None
    decode_seconds: float | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def prefill_tok_s(self) -> float | None:
        """Server-side prompt evaluation rate (tokens/s), or None without timings."""
        if not self.prefill_seconds or self.prefill_tokens is None:
            return None
        return self.prefill_tokens / self.prefill_seconds

    @property
    def decode_tok_s(self) -> float | None:
        """Server-side generation rate (tokens/s), or None without timings."""
        if not self.decode_seconds:
            return None
        return self.completion_tokens / self.decode_seconds


def _server_message(body: Any) -> str | None:
    """``error.message`` of an OpenAI-style error body (or the closest thing)."""
    if isinstance(body, Mapping):
        err = body.get("error", body)
        if isinstance(err, Mapping):
            msg = err.get("message")
            return str(msg) if msg is not None else json.dumps(err)[:500]
        if err is not None:
            return str(err)[:500]
    return None


def _number(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{name} is not a number: {value!r}")
    return float(value)


def _parse_logprobs(choice: Mapping[str, Any], top_logprobs: int | None) -> tuple[TokenLogprob, ...] | None:
    lp = choice.get("logprobs")
    if not isinstance(lp, Mapping) or not isinstance(lp.get("content"), list):
        return None
    out = []
    for i, item in enumerate(lp["content"]):
        top = tuple((str(alt["token"]), _number(alt["logprob"], f"logprobs[{i}].top_logprobs.logprob"))
                    for alt in item.get("top_logprobs") or ())
        if top_logprobs is not None:
            top = top[:top_logprobs]
        out.append(TokenLogprob(str(item["token"]), _number(item["logprob"], f"logprobs[{i}].logprob"), top))
    return tuple(out)


def parse_chat_response(body: Any, *, seconds: float, url: str | None = None,
                        top_logprobs: int | None = None) -> ChatResult:
    """Read an OpenAI-style chat completion body into a :class:`ChatResult`.

    Parameters
    ----------
    body : dict
        The decoded JSON response.
    seconds : float
        The call's wall time.
    url : str, optional
        For error messages.
    top_logprobs : int or None
        What the call asked for: alternatives beyond it are dropped; None keeps all (a debug
        line is logged when log-probabilities were asked for and are absent).

    Returns
    -------
    ChatResult

    Raises
    ------
    LLMError
        The body is an error object, or lacks ``choices[0].message``.
    """
    if not isinstance(body, Mapping):
        raise LLMError(f"malformed response: expected a JSON object, got {type(body).__name__}", url=url)
    if "choices" not in body and ("error" in body or "message" in body):
        err = body.get("error", body)
        status = err.get("code") if isinstance(err, Mapping) else None
        raise LLMError("the server returned an error", status=status if isinstance(status, int) else None,
                       server_message=_server_message(body), url=url)
    try:
        choice = body["choices"][0]
        message = choice["message"]
        text = message.get("content") or ""
        if not isinstance(text, str):
            raise ValueError(f"message.content is {type(text).__name__}, not str")
        usage = body.get("usage") or {}
        logprobs = _parse_logprobs(choice, top_logprobs)
        timings = body.get("timings")
        prefill_tokens = prefill_seconds = decode_seconds = None
        if isinstance(timings, Mapping) and "prompt_ms" in timings and "predicted_ms" in timings:
            prefill_tokens = int(_number(timings.get("prompt_n", 0), "timings.prompt_n"))
            prefill_seconds = _number(timings["prompt_ms"], "timings.prompt_ms") / 1000.0
            decode_seconds = _number(timings["predicted_ms"], "timings.predicted_ms") / 1000.0
        result = ChatResult(
            text=text,
            finish_reason=choice.get("finish_reason"),
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
            seconds=float(seconds),
            logprobs=logprobs,
            model=body.get("model"),
            prefill_tokens=prefill_tokens,
            prefill_seconds=prefill_seconds,
            decode_seconds=decode_seconds,
            raw=dict(body),
        )
    except (KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:
        raise LLMError(f"malformed response: {type(exc).__name__}: {exc}", server_message=json.dumps(body)[:300],
                       url=url) from exc
    if top_logprobs is not None and logprobs is None:
        logger.debug("top_logprobs was asked for but %s returned no logprobs", url or "the server")
    return result


# --------------------------------------------------------------------------- accounting


@dataclass(frozen=True)
class LLMUsage:
    """Accounting of one LLM object since it was made or last reset.

    Attributes
    ----------
    calls : int
        ``chat`` calls made (successful or not).
    retries : int
        Extra requests made after a retryable failure.
    failures : int
        ``chat`` calls that raised.
    prompt_tokens, completion_tokens : int
        Summed over successful calls, as the server reported them.
    seconds : float
        Summed wall time of all calls (concurrent calls overlap, so this can exceed the
        elapsed time).
    prefill_tokens : int
        Prompt tokens the server evaluated (cache hits excluded), over the calls that
        reported timings.
    prefill_seconds, decode_seconds : float
        Server-side prompt and generation time, over the calls that reported timings.
    timed_calls : int
        How many successful calls reported timings.
    timed_completion_tokens : int
        Completion tokens of those calls.
    max_in_flight : int
        The most calls in progress at once (requests on the wire, for the HTTP client).
    """

    calls: int = 0
    retries: int = 0
    failures: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    prefill_tokens: int = 0
    prefill_seconds: float = 0.0
    decode_seconds: float = 0.0
    timed_calls: int = 0
    timed_completion_tokens: int = 0
    max_in_flight: int = 0

    @property
    def prefill_tok_s(self) -> float | None:
        """Measured prompt evaluation rate (tokens/s) over the timed calls, or None."""
        return self.prefill_tokens / self.prefill_seconds if self.prefill_seconds > 0 else None

    @property
    def decode_tok_s(self) -> float | None:
        """Measured generation rate (tokens/s) over the timed calls, or None."""
        return self.timed_completion_tokens / self.decode_seconds if self.decode_seconds > 0 else None

    def as_dict(self) -> dict[str, Any]:
        """The fields and the two rates, JSON-serialisable."""
        return {**asdict(self), "prefill_tok_s": self.prefill_tok_s, "decode_tok_s": self.decode_tok_s}


class UsageMeter:
    """Thread-safe counters behind ``usage()``; every backend of this package keeps one."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._in_flight = 0
        self._reset_locked()

    def _reset_locked(self) -> None:
        self._counts = {f.name: f.default for f in fields(LLMUsage)}
        self._counts["max_in_flight"] = self._in_flight

    def enter(self) -> None:
        """A call (or request) starts."""
        with self._lock:
            self._in_flight += 1
            self._counts["max_in_flight"] = max(self._counts["max_in_flight"], self._in_flight)

    def leave(self) -> None:
        """It ends."""
        with self._lock:
            self._in_flight -= 1

    def add(self, **counts: float) -> None:
        """Add to named counters (``calls=1``, ``retries=1``, ...)."""
        with self._lock:
            for k, v in counts.items():
                self._counts[k] += v

    def record(self, result: ChatResult) -> None:
        """Add a successful call's tokens and timings."""
        with self._lock:
            c = self._counts
            c["prompt_tokens"] += result.prompt_tokens
            c["completion_tokens"] += result.completion_tokens
            if result.decode_seconds is not None and result.prefill_seconds is not None:
                c["timed_calls"] += 1
                c["timed_completion_tokens"] += result.completion_tokens
                c["prefill_tokens"] += result.prefill_tokens or 0
                c["prefill_seconds"] += result.prefill_seconds
                c["decode_seconds"] += result.decode_seconds

    def snapshot(self, reset: bool = False) -> LLMUsage:
        """The counters now; with ``reset=True`` they restart from zero atomically."""
        with self._lock:
            out = LLMUsage(**self._counts)
            if reset:
                self._reset_locked()
        return out
