"""Running the application on uvicorn with the server's connection limits.

uvicorn bounds an idle keep-alive connection (``timeout_keep_alive``) but not the time a
client may take to send a request's headers: a client that opens a connection and sends its
headers a byte at a time holds it for as long as it likes. :func:`uvicorn_config` therefore
runs uvicorn's h11 protocol with one addition, a header deadline (``header_timeout_s``): a
connection that has not delivered a request's complete headers that long after it opened, or
after its previous response, is closed. The body has its own deadline
(:class:`~rrag_kernels.serve.limits.BodyLimitMiddleware`), the work its own timeout (the
routes), so no phase of a request waits on a client without a bound.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from typing import Any

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from .limits import ServerLimits

__all__ = ["uvicorn_config", "bind_socket", "run_server"]

logger = logging.getLogger("rrag_kernels.serve")


def _deadline_protocol(header_timeout_s: float) -> type:
    """uvicorn's h11 protocol with a deadline for each request's headers."""

    class HeaderDeadlineH11Protocol(H11Protocol):
        _header_timer: asyncio.TimerHandle | None = None

        def _arm_header_deadline(self) -> None:
            self._disarm_header_deadline()
            self._header_timer = self.loop.call_later(header_timeout_s, self._header_deadline_passed)

        def _disarm_header_deadline(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def _header_deadline_passed(self) -> None:
            self._header_timer = None
            if not self.transport.is_closing():
                logger.info("serve: closed a connection that sent no complete request headers within %g s",
                            header_timeout_s)
                self.transport.close()

        def connection_made(self, transport: Any) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm_header_deadline()

        def handle_events(self) -> None:
            cycle = self.cycle
            super().handle_events()
            if self.cycle is not cycle:  # a request's headers arrived: its body and work have their own bounds
                self._disarm_header_deadline()

        def on_response_complete(self) -> None:
            self._arm_header_deadline()  # from now on the next request's headers are awaited ...
            super().on_response_complete()  # ... unless a pipelined one is already here (disarms)

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm_header_deadline()
            super().connection_lost(exc)

    return HeaderDeadlineH11Protocol


def uvicorn_config(app: Any, *, host: str = "127.0.0.1", port: int = 8000, limits: ServerLimits | None = None,
                   log_level: str = "info", **kwargs: Any) -> uvicorn.Config:
    """A ``uvicorn.Config`` for ``app`` with the server's connection limits.

    Parameters
    ----------
    app : ASGI application (from :func:`~rrag_kernels.serve.create_app`)
    host, port : where to listen (``port=0``: an ephemeral port)
    limits : ServerLimits, optional
        Default: the limits the app was created with (``app.state.limits``), else the
        defaults. Applies ``header_timeout_s`` (the h11 protocol above), ``keep_alive_s``
        (``timeout_keep_alive``) and ``max_connections`` (``limit_concurrency``).
    log_level : str
    **kwargs
        Passed to ``uvicorn.Config`` (they override the above).
    """
    if limits is None:
        limits = getattr(getattr(app, "state", None), "limits", None) or ServerLimits()
    limits.validate()
    options: dict[str, Any] = dict(
        host=host, port=port, log_level=log_level, http=_deadline_protocol(limits.header_timeout_s), ws="none",
        lifespan="on", timeout_keep_alive=limits.keep_alive_s, limit_concurrency=limits.max_connections,
        timeout_graceful_shutdown=max(1, int(limits.request_timeout_s)),
    )
    options.update(kwargs)
    return uvicorn.Config(app, **options)


def bind_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host:port`` (IPv4 or IPv6, as ``host`` resolves).

    Raises
    ------
    OSError
        The address cannot be resolved or bound (in use, not this machine's, no permission).
    """
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    family, _, _, _, address = infos[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def run_server(app: Any, *, host: str = "127.0.0.1", port: int = 8000, sock: socket.socket | None = None,
               limits: ServerLimits | None = None, log_level: str = "info") -> None:
    """Serve ``app`` until interrupted (Ctrl-C / SIGTERM: a graceful shutdown).

    Parameters
    ----------
    app : ASGI application
    host, port : where to listen, unless ``sock`` is given
    sock : socket.socket, optional
        An already bound socket (:func:`bind_socket`), so that a bind error can be reported
        before anything starts.
    limits : ServerLimits, optional
        See :func:`uvicorn_config`.
    log_level : str
    """
    if sock is None:
        sock = bind_socket(host, port)
    host, port = sock.getsockname()[:2]
    config = uvicorn_config(app, host=host, port=port, limits=limits, log_level=log_level)
    shown = f"[{host}]" if ":" in host else host
    # uvicorn says where it listens only for sockets it bound itself.
    logger.info("serve: listening on http://%s:%d (Ctrl-C to stop)", shown, port)
    uvicorn.Server(config).run(sockets=[sock])
