"""The server's limits and the ASGI middleware that enforces the body limits.

Importable without FastAPI or uvicorn (the ``rrag serve`` parser reads the defaults here).

What bounds what
----------------
=====================  ==========  ==============================================================
limit                  default     enforced by
=====================  ==========  ==============================================================
max_body_bytes         4 MiB       :class:`BodyLimitMiddleware`: a declared ``Content-Length``
                                   over it is answered 413 before a byte of the body is read; a
                                   streamed (chunked) body is cut off with 413 as soon as it
                                   passes it
body_timeout_s         10 s        :class:`BodyLimitMiddleware`: the whole body must arrive
                                   within this time of the headers, else 408 and the connection
                                   is closed (a client trickling bytes cannot hold a request)
header_timeout_s       10 s        the server's HTTP protocol (:mod:`.server`): a connection
                                   that has not sent a request's complete headers this long
                                   after it opened (or after its previous response) is closed
keep_alive_s           5 s         uvicorn's ``timeout_keep_alive``: an idle keep-alive
                                   connection is closed (after min(keep_alive_s,
                                   header_timeout_s), as both run from the last response)
max_items              64          the routes: more ``items`` (``/defend``) or ``responses``
                                   (``/filter``) in one request is 413
max_passages           200         ``/defend``: more passages in one item is 413
max_claims             2000        ``/filter``: more claims in one response is 413
request_timeout_s      30 s        the routes: the work runs in a worker thread; a request whose
                                   work has not finished in this time is answered 504
max_concurrency        4           the routes: requests doing work at once (the worker threads);
                                   one more is answered 503 at once (with ``Retry-After``)
max_connections        100         uvicorn's ``limit_concurrency``: connections or tasks beyond
                                   it are answered 503
=====================  ==========  ==============================================================

A timed-out request's work cannot be stopped (Python cannot kill a thread): it runs to its
end in its worker thread and holds its slot until then, so a stream of slow requests shows as
504s and then 503s, never as an unbounded number of threads.
"""

from __future__ import annotations

import asyncio
import logging
import math
from dataclasses import asdict, dataclass
from typing import Any, Awaitable, Callable

from ..ops import check_int
from ..pipelines import DuplicateKeyError, JSONLimitError, json_text, loads_one_value_per_key

__all__ = ["ServerLimits", "BodyLimitMiddleware", "error_body", "is_json_type"]

logger = logging.getLogger("rrag_kernels.serve")

Scope = dict
Receive = Callable[[], Awaitable[dict]]
Send = Callable[[dict], Awaitable[None]]


@dataclass(frozen=True)
class ServerLimits:
    """Every limit of the server (the table in the module docstring says what each bounds).

    Parameters
    ----------
    max_body_bytes : int >= 1
    max_items, max_passages, max_claims : int >= 1
    request_timeout_s, body_timeout_s, header_timeout_s, keep_alive_s : float > 0, seconds
    max_concurrency, max_connections : int >= 1
    """

    max_body_bytes: int = 4 * 1024 * 1024
    max_items: int = 64
    max_passages: int = 200
    max_claims: int = 2000
    request_timeout_s: float = 30.0
    body_timeout_s: float = 10.0
    header_timeout_s: float = 10.0
    keep_alive_s: float = 5.0
    max_concurrency: int = 4
    max_connections: int = 100

    def validate(self) -> "ServerLimits":
        """Check every field; returns self.

        Raises
        ------
        TypeError, ValueError
            A field of the wrong kind or out of range; the message starts with its name.
        """
        for name in ("max_body_bytes", "max_items", "max_passages", "max_claims", "max_concurrency",
                     "max_connections"):
            check_int(getattr(self, name), name, minimum=1)
        for name in ("request_timeout_s", "body_timeout_s", "header_timeout_s", "keep_alive_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TypeError(f"{name}: expected a number of seconds, got {type(value).__name__}")
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"{name}: must be a finite number of seconds > 0, got {value}")
        return self

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def error_body(status: int, message: str, **extra: Any) -> bytes:
    """The JSON body of every error the server answers: ``{"error": message, "status": status, ...}``."""
    return json_text({"error": message, "status": status, **extra}).encode("utf-8")


async def _send_error(send: Send, status: int, message: str) -> None:
    """An error response that also closes the connection (the request's body may be unread)."""
    body = error_body(status, message)
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": body, "more_body": False})


class _BodyTooLarge(Exception):
    pass


class _ClientGone(Exception):
    pass


class BodyLimitMiddleware:
    """Pure-ASGI middleware: bounded request bodies, read within a deadline.

    For each HTTP request, before the app sees it:

    * a ``Content-Length`` that is not a non-negative integer is answered 400;
    * a declared ``Content-Length`` over ``max_body_bytes`` is answered 413 without reading
      the body (a client sending ``Expect: 100-continue`` is never told to continue);
    * the body is read (streamed or not) and cut off with 413 as soon as it passes
      ``max_body_bytes``;
    * a body that has not fully arrived ``body_timeout_s`` after the request started is
      answered 408;
    * a JSON body (``Content-Type`` application/json or ``+json``) that opens with a
      byte-order mark, is not UTF-8 (UTF-16, say), or holds one key twice in an object is
      answered 400 (:func:`_body_problem`: JSON over HTTP is UTF-8, RFC 8259, and a parser
      that keeps the last of two keys would let a request say two things at once);

    every such answer is a JSON error (:func:`error_body`) with ``Connection: close``. The app
    then receives the whole body as one message (and the client's disconnect after it).

    Parameters
    ----------
    app : ASGI application
    max_body_bytes : int >= 1
    body_timeout_s : float > 0
    """

    def __init__(self, app: Callable[..., Awaitable[None]], *, max_body_bytes: int, body_timeout_s: float) -> None:
        self.app = app
        self.max_body_bytes = check_int(max_body_bytes, "max_body_bytes", minimum=1)
        if not (isinstance(body_timeout_s, (int, float)) and math.isfinite(body_timeout_s) and body_timeout_s > 0):
            raise ValueError(f"body_timeout_s: must be a finite number of seconds > 0, got {body_timeout_s!r}")
        self.body_timeout_s = float(body_timeout_s)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = [v for k, v in scope.get("headers", ()) if k == b"content-length"]
        if declared:
            text = declared[0].decode("latin-1").strip()
            if not text.isdigit():
                await _send_error(send, 400, f"Content-Length: not a non-negative integer ({text[:40]!r})")
                return
            if int(text) > self.max_body_bytes:
                logger.info("serve: refused a %s-byte body (limit %d)", text, self.max_body_bytes)
                await _send_error(send, 413, f"request body of {int(text)} bytes is over the limit of "
                                             f"{self.max_body_bytes} bytes")
                return
        try:
            body = await asyncio.wait_for(self._read(receive), self.body_timeout_s)
        except _BodyTooLarge:
            logger.info("serve: cut off a streamed body over %d bytes", self.max_body_bytes)
            await _send_error(send, 413, f"request body is over the limit of {self.max_body_bytes} bytes")
            return
        except asyncio.TimeoutError:
            logger.info("serve: request body not received within %g s", self.body_timeout_s)
            await _send_error(send, 408, f"request body not received within {self.body_timeout_s:g} s")
            return
        except _ClientGone:
            return
        why = _body_problem(body, scope)
        if why is not None:
            await _send_error(send, 400, why)
            return
        replayed = False

        async def replay() -> dict:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _read(self, receive: Receive) -> bytes:
        parts: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise _ClientGone
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                raise _BodyTooLarge
            parts.append(chunk)
            if not message.get("more_body", False):
                return b"".join(parts)


def is_json_type(content_type: str | None) -> bool:
    """Whether a ``Content-Type`` is JSON: ``application/json`` or ``application/*+json``
    (parameters such as ``charset`` ignored). The one rule of the routes and the middleware."""
    kind = (content_type or "").split(";", 1)[0].strip().lower()
    return kind == "application/json" or (kind.startswith("application/") and kind.endswith("+json"))


def _body_problem(body: bytes, scope: Scope) -> str | None:
    """Why a JSON request body is refused before the app parses it, or None.

    Only bodies the app would read as JSON are looked at. A body that JSON cannot parse is
    left to the app (its 400 names the position); this catches what a lenient parser would
    accept: a byte-order mark, another encoding than UTF-8, a key given twice in one object.
    The duplicate-key parse costs one ``json.loads`` of the body (~10 ms at the 4 MiB limit).
    """
    if not body:
        return None
    declared = next((v for k, v in scope.get("headers", ()) if k == b"content-type"), b"")
    if not is_json_type(declared.decode("latin-1")):
        return None
    if body.startswith((b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff")):
        return "malformed JSON: the body starts with a byte-order mark; send UTF-8 without one"
    if b"\x00" in body:  # JSON text never holds a raw NUL; UTF-16 / UTF-32 text always does
        at = body.index(0)
        return f"malformed JSON: a NUL byte at {at} (UTF-16 or UTF-32?); send UTF-8"
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"malformed JSON: not UTF-8 (byte {exc.start}); JSON over HTTP is UTF-8"
    try:
        loads_one_value_per_key(text)
    except DuplicateKeyError as exc:
        return f"malformed JSON: the key {str(exc.args[0])[:80]!r} appears twice in one object"
    except JSONLimitError as exc:  # JSON, but beyond what an input may be (pipelines._records)
        return f"malformed JSON: {exc}"
    except ValueError:  # not JSON: the app answers with the position
        return None
    return None
