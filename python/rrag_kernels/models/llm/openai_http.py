"""A client for any OpenAI-compatible ``/v1/chat/completions`` server, on the standard library.

Works with vLLM, llama.cpp's ``llama-server`` (and the embedded one of
:class:`~rrag_kernels.models.EmbeddedServer`), Ollama's OpenAI endpoint and OpenAI itself.

Design
------
* One new connection per request (``http.client``), closed after it: nothing is shared
  between threads but the semaphore and the usage meter, so one client serves any number of
  threads. At most ``max_concurrency`` requests are on the wire at once; a thread waiting for
  a slot, or sleeping before a retry, holds none.
* Every socket operation has a timeout: ``connect_timeout`` for the connection, then
  ``read_timeout`` bounds the whole wait for the answer (sending, headers and body: the
  socket's timeout is set to what is left of it before each read, and the deadline is
  checked between reads; a server that trickles a body which closes the connection can
  stretch the total to about twice ``read_timeout``, never more).
* Retried, with exponential backoff and jitter (``backoff * 2**k`` seconds, capped at
  ``max_backoff``, times a uniform factor in [0.5, 1]; a 429/503 ``Retry-After`` in seconds
  is honoured up to ``max_backoff``): connection failures (refused, reset, closed early,
  connect timeout) and statuses 429 and 5xx. Not retried: other 4xx (the request is wrong),
  a read timeout (the server is busy with it; a retry would double the wait), a 2xx body that
  is not a chat completion.
* Failures are :class:`LLMError` (status, the server's message, url, attempts);
  :class:`LLMTimeoutError` and :class:`LLMConnectionError` are its subclasses.
"""

from __future__ import annotations

import http.client
import json
import math
import os
import random
import socket
import ssl
import threading
import time
import urllib.parse
from typing import Any, Mapping, Sequence

from ...ops import check_int, check_real
from .types import (
    ChatResult,
    LLMConnectionError,
    LLMError,
    LLMTimeoutError,
    LLMUsage,
    UsageMeter,
    _server_message,
    chat_request,
    logger,
    parse_chat_response,
)

__all__ = ["OpenAIChatLLM"]

#: Statuses worth another try: rate limited, or the server failed.
_RETRY_STATUSES = frozenset({429}) | frozenset(range(500, 600))
#: A response body larger than this is refused (a chat completion is a few kB).
_MAX_BODY = 64 * 1024 * 1024


class _Retryable(Exception):
    """Internal: an attempt failed in a way worth retrying (carries the error to raise last)."""

    def __init__(self, error: LLMError, retry_after: float | None = None):
        self.error = error
        self.retry_after = retry_after


def _positive(value: Any, name: str, *, allow_zero: bool = False) -> float:
    """A finite float > 0 (>= 0 with ``allow_zero``): a timeout or a backoff."""
    value = check_real(value, name)
    if not (value >= 0 if allow_zero else value > 0) or not math.isfinite(value):
        raise ValueError(f"{name}: must be {'>= 0' if allow_zero else '> 0'} and finite, got {value}")
    return value


class OpenAIChatLLM:
    """An :class:`~rrag_kernels.models.LLM` served by an OpenAI-compatible HTTP endpoint.

    Parameters
    ----------
    base_url : str
        ``http(s)://host[:port][/path]``. With no path, ``/v1`` is used; otherwise the path is
        taken as given (``https://api.openai.com/v1``, ``http://localhost:11434/v1``). Requests
        go to ``<base_url>/chat/completions``.
    model : str, optional
        The model name sent in each request (required by OpenAI, vLLM and Ollama; llama.cpp
        ignores it). Omitted when None.
    api_key : str, optional
        Sent as ``Authorization: Bearer <key>``. When None, read once from the environment
        variable ``api_key_env``; no header when neither is set.
    api_key_env : str or None
        The variable to read (default ``OPENAI_API_KEY``); None reads none.
    connect_timeout : float
        Seconds to establish the TCP (and TLS) connection.
    read_timeout : float
        Seconds to wait for the whole answer once connected.
    max_retries : int
        Retries after the first attempt (0: none), for connection failures, 429 and 5xx.
    backoff : float
        The first retry waits about ``backoff`` seconds, the k-th ``backoff * 2**(k-1)``
        (times a random factor in [0.5, 1]); 0 retries at once.
    max_backoff : float
        Cap on one wait (also on a server's ``Retry-After``).
    max_concurrency : int
        Most requests on the wire at once, over all threads using this client.
    headers : mapping of str to str, optional
        Extra headers for every request.
    seed : int, optional
        Seeds the jitter (not the model), for reproducible waits.

    Notes
    -----
    Thread-safe: share one client between threads. Token and call accounting is read with
    :meth:`usage`. The API key is never shown in ``repr`` or in errors.
    """

    def __init__(self, base_url: str, model: str | None = None, *, api_key: str | None = None,
                 api_key_env: str | None = "OPENAI_API_KEY", connect_timeout: float = 10.0,
                 read_timeout: float = 120.0, max_retries: int = 3, backoff: float = 0.5,
                 max_backoff: float = 20.0, max_concurrency: int = 4,
                 headers: Mapping[str, str] | None = None, seed: int | None = None):
        if not isinstance(base_url, str):
            raise TypeError(f"base_url must be a str, got {type(base_url).__name__}")
        parts = urllib.parse.urlsplit(base_url.strip())
        if parts.scheme not in ("http", "https"):
            raise ValueError(f"base_url must start with http:// or https://, got {base_url!r}")
        if not parts.hostname:
            raise ValueError(f"base_url has no host: {base_url!r}")
        try:
            port = parts.port
        except ValueError as exc:
            raise ValueError(f"base_url has an invalid port: {base_url!r}") from exc
        if model is not None and not isinstance(model, str):
            raise TypeError(f"model must be a str or None, got {type(model).__name__}")
        if api_key is None and api_key_env is not None:
            if not isinstance(api_key_env, str):
                raise TypeError(f"api_key_env must be a str or None, got {type(api_key_env).__name__}")
            api_key = os.environ.get(api_key_env) or None
        if api_key is not None and not isinstance(api_key, str):
            raise TypeError(f"api_key must be a str or None, got {type(api_key).__name__}")
        path = parts.path.rstrip("/") or "/v1"
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = port or (443 if self._https else 80)
        self._path = path + "/chat/completions" + (f"?{parts.query}" if parts.query else "")
        self.base_url = urllib.parse.urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))
        self.url = urllib.parse.urlunsplit((parts.scheme, parts.netloc, path + "/chat/completions", parts.query, ""))
        self.model = model
        self.connect_timeout = _positive(connect_timeout, "connect_timeout")
        self.read_timeout = _positive(read_timeout, "read_timeout")
        self.max_retries = check_int(max_retries, "max_retries", minimum=0)
        self.backoff = _positive(backoff, "backoff", allow_zero=True)
        self.max_backoff = _positive(max_backoff, "max_backoff", allow_zero=True)
        self.max_concurrency = check_int(max_concurrency, "max_concurrency", minimum=1)
        self._headers = {"Content-Type": "application/json", "Accept": "application/json",
                         "User-Agent": "rrag_kernels-llm"}
        for k, v in (headers or {}).items():
            if not isinstance(k, str) or not isinstance(v, str):
                raise TypeError(f"headers must map str to str, got {k!r}: {type(v).__name__}")
            self._headers[k] = v
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._ssl = ssl.create_default_context() if self._https else None
        self._slots = threading.BoundedSemaphore(self.max_concurrency)
        self._meter = UsageMeter()
        self._rng = random.Random(seed)

    def __repr__(self) -> str:
        return (f"OpenAIChatLLM({self.base_url!r}, model={self.model!r}, max_concurrency={self.max_concurrency}, "
                f"max_retries={self.max_retries}, read_timeout={self.read_timeout})")

    # ------------------------------------------------------------------ public

    def chat(self, messages: Sequence[Mapping[str, Any]], *, max_tokens: int = 256, temperature: float = 0.0,
             stop: str | Sequence[str] | None = None, seed: int | None = None,
             response_format: Mapping[str, Any] | None = None, top_logprobs: int | None = None) -> ChatResult:
        """One chat completion; see :meth:`rrag_kernels.models.LLM.chat`.

        Parameters
        ----------
        messages : sequence of dict
        max_tokens : int
        temperature : float
        stop : str or sequence of str, optional
        seed : int, optional
        response_format : dict, optional
        top_logprobs : int, optional

        Returns
        -------
        ChatResult

        Raises
        ------
        TypeError, ValueError
            Invalid arguments; nothing is sent.
        LLMError
            The server answered 4xx (not retried), or 429/5xx after ``max_retries`` retries,
            or the body is not a chat completion.
        LLMConnectionError
            The server could not be reached, after retries.
        LLMTimeoutError
            No answer within ``read_timeout`` (or every connect attempt timed out).
        """
        body = chat_request(messages, max_tokens=max_tokens, temperature=temperature, stop=stop, seed=seed,
                            response_format=response_format, top_logprobs=top_logprobs, model=self.model)
        data = json.dumps(body).encode("utf-8")
        t0 = time.perf_counter()
        self._meter.add(calls=1)
        try:
            result = self._post_with_retries(data, t0, top_logprobs=top_logprobs)
        except BaseException:
            self._meter.add(failures=1, seconds=time.perf_counter() - t0)
            raise
        self._meter.add(seconds=result.seconds)
        self._meter.record(result)
        return result

    def usage(self, reset: bool = False) -> LLMUsage:
        """Calls, retries, failures, tokens and seconds since construction or the last reset.

        Parameters
        ----------
        reset : bool
            Zero the counters after reading them (atomically: no call is lost).

        Returns
        -------
        LLMUsage
        """
        return self._meter.snapshot(reset)

    # ------------------------------------------------------------------ internals

    def _post_with_retries(self, data: bytes, t0: float, *, top_logprobs: int | None) -> ChatResult:
        attempt = 0
        while True:
            attempt += 1
            try:
                with self._slots:
                    self._meter.enter()
                    try:
                        status, reason, headers, payload = self._post(data)
                    finally:
                        self._meter.leave()
                return self._read(status, reason, headers, payload, t0, top_logprobs)
            except LLMError as error:  # not retryable (a read timeout, a 4xx, a malformed body)
                error.attempts = attempt
                raise
            except _Retryable as failure:
                error = failure.error
                if attempt > self.max_retries:
                    error.attempts = attempt
                    raise error from failure.__cause__
                delay = min(self.max_backoff, self.backoff * 2 ** (attempt - 1)) * (0.5 + 0.5 * self._rng.random())
                if failure.retry_after is not None:
                    delay = min(self.max_backoff, max(delay, failure.retry_after))
                logger.info("LLM request failed (%s); retry %d/%d in %.3f s", error,
                            attempt, self.max_retries, delay)
                self._meter.add(retries=1)
                if delay > 0:
                    time.sleep(delay)

    def _connection(self) -> http.client.HTTPConnection:
        if self._https:
            return http.client.HTTPSConnection(self._host, self._port, timeout=self.connect_timeout,
                                               context=self._ssl)
        return http.client.HTTPConnection(self._host, self._port, timeout=self.connect_timeout)

    def _post(self, data: bytes) -> tuple[int, str, http.client.HTTPMessage, bytes]:
        """One request: (status, reason, headers, body). Raises _Retryable or LLMTimeoutError."""
        conn = self._connection()
        try:
            try:
                conn.connect()
            except (socket.timeout, TimeoutError) as exc:
                raise _Retryable(LLMTimeoutError(f"connect timeout ({self.connect_timeout:g} s)",
                                                 url=self.url)) from exc
            except OSError as exc:  # refused, unreachable, unknown host, TLS failure
                raise _Retryable(LLMConnectionError(f"cannot connect: {type(exc).__name__}: {exc}",
                                                    url=self.url)) from exc
            deadline = time.monotonic() + self.read_timeout

            def left() -> float:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise socket.timeout("read deadline passed")
                return remaining

            try:
                conn.sock.settimeout(left())
                conn.request("POST", self._path, body=data, headers=self._headers)
                conn.sock.settimeout(left())
                resp = conn.getresponse()
                chunks, size = [], 0
                while True:
                    remaining = left()
                    # http.client lets go of conn.sock once a response that closes the connection
                    # has arrived; the socket keeps the timeout set last, which bounds each read.
                    if conn.sock is not None:
                        conn.sock.settimeout(remaining)
                    chunk = resp.read(65536)
                    if not chunk:
                        break
                    size += len(chunk)
                    if size > _MAX_BODY:
                        raise LLMError(f"response body larger than {_MAX_BODY} bytes", status=resp.status,
                                       url=self.url)
                    chunks.append(chunk)
                return resp.status, resp.reason, resp.headers, b"".join(chunks)
            except (socket.timeout, TimeoutError) as exc:
                raise LLMTimeoutError(f"no complete answer within the read timeout ({self.read_timeout:g} s)",
                                      url=self.url) from exc
            except (OSError, http.client.HTTPException) as exc:  # reset, closed early, bad status line
                raise _Retryable(LLMConnectionError(f"connection failed: {type(exc).__name__}: {exc}",
                                                    url=self.url)) from exc
        finally:
            conn.close()

    def _read(self, status: int, reason: str, headers: http.client.HTTPMessage, payload: bytes, t0: float,
              top_logprobs: int | None) -> ChatResult:
        """The ChatResult of a 2xx; else raise LLMError, or _Retryable for 429/5xx."""
        text = payload.decode("utf-8", errors="replace")
        try:
            body = json.loads(text) if text.strip() else None
        except ValueError:
            body = None
        if 200 <= status < 300:
            if body is None:
                raise LLMError(f"malformed response: the body is not JSON ({text[:80]!r})", status=status,
                               url=self.url)
            return parse_chat_response(body, seconds=time.perf_counter() - t0, url=self.url,
                                       top_logprobs=top_logprobs)
        message = _server_message(body) if body is not None else (text.strip()[:500] or None)
        error = LLMError(f"HTTP {status} {reason}".strip(), status=status, server_message=message, url=self.url)
        if status in _RETRY_STATUSES:
            retry_after = None
            value = headers.get("Retry-After")
            if value is not None:
                try:
                    retry_after = max(0.0, float(value))
                except ValueError:
                    retry_after = None  # an HTTP date: use the computed backoff
            raise _Retryable(error, retry_after)
        raise error
