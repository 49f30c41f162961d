"""``rrag serve``: the MIRAGE defense and the conformal claim filter over HTTP.

Endpoints (bodies and records as in ``rrag defend`` / ``rrag conformal filter``):

    POST /defend   {"items": [{"id"?, "question", "passages": [{"text", "url"?, ...}]}], "dropped"?}
    POST /filter   {"responses": [{"id"?, "prompt"?, "group"?, "claims": [{"text", "score"}]}]}
                   (needs --calibration)
    GET  /health   status, version, what is loaded, the limits

POST bodies are JSON with ``Content-Type: application/json`` (``curl --json``).

Listens on 127.0.0.1 by default; put a reverse proxy in front for TLS, authentication and
rate limits. Needs ``pip install 'rrag_kernels[serve]'`` (FastAPI + uvicorn).
"""

from __future__ import annotations

import argparse
import math
from typing import Any, Callable

from ..serve import ServerLimits  # the face; FastAPI and uvicorn load only when run() serves
from .common import UsageError, existing_file, int_at_least
from .defend import add_defense_options, defense_from_args

_DEFAULTS = ServerLimits()


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number in 0..65535, got {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port number in 0..65535 (0: any free port), got {value}")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds > 0, got {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a number of seconds > 0, got {text}")
    return value


def _shown(value: float) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


_seconds.__name__ = "seconds"
_port.__name__ = "port"

#: (flag, ServerLimits field, argument type, help) of the limit options.
_LIMITS: list[tuple[str, str, Callable[[str], Any], str]] = [
    ("--max-body-bytes", "max_body_bytes", int_at_least(1), "largest request body; more is 413"),
    ("--max-items", "max_items", int_at_least(1),
     "most items (/defend) or responses (/filter) per request; more is 413"),
    ("--max-passages", "max_passages", int_at_least(1), "most passages per /defend item; more is 413"),
    ("--max-claims", "max_claims", int_at_least(1), "most claims per /filter response; more is 413"),
    ("--timeout", "request_timeout_s", _seconds, "seconds a request's work may take; longer is 504"),
    ("--body-timeout", "body_timeout_s", _seconds, "seconds to receive a request body; longer is 408"),
    ("--header-timeout", "header_timeout_s", _seconds,
     "seconds to receive a request's headers; longer closes the connection"),
    ("--keep-alive", "keep_alive_s", _seconds, "seconds an idle keep-alive connection stays open"),
    ("--max-concurrency", "max_concurrency", int_at_least(1), "requests doing work at once; one more is 503"),
    ("--max-connections", "max_connections", int_at_least(1), "open connections; more are answered 503"),
]


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p = sub.add_parser("serve", help="HTTP server: POST /defend, POST /filter, GET /health (FastAPI + uvicorn)",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=_port, default=8000, help="port to listen on (default 8000; 0: any free port)")
    add_defense_options(p)
    p.add_argument("--no-defense", action="store_true", help="serve no defense (/defend answers 503; no NLI loaded)")
    p.add_argument("--calibration", type=existing_file, default=None, metavar="FILE",
                   help="calibration JSON of 'rrag conformal calibrate': serves /filter (without it /filter is 503)")
    limits = p.add_argument_group("limits")
    for flag, field, kind, text in _LIMITS:
        metavar = "SECONDS" if kind is _seconds else ("BYTES" if field == "max_body_bytes" else "N")
        limits.add_argument(flag, dest=field, type=kind, default=getattr(_DEFAULTS, field), metavar=metavar,
                            help=f"{text} (default {_shown(getattr(_DEFAULTS, field))})")
    p.add_argument("--log-level", default="info", choices=("critical", "error", "warning", "info", "debug"),
                   help="uvicorn's and the server's log level (default info)")
    p.set_defaults(func=run)
    return p


def _limits(args: argparse.Namespace) -> ServerLimits:
    try:
        return ServerLimits(**{field: getattr(args, field) for _, field, _, _ in _LIMITS}).validate()
    except (TypeError, ValueError) as exc:
        raise UsageError(str(exc)) from exc


def _calibration(args: argparse.Namespace) -> Any:
    if args.calibration is None:
        return None
    from ..pipelines.conformal import ClaimConformal

    try:
        return ClaimConformal.load(args.calibration)
    except (OSError, ValueError) as exc:
        raise UsageError(f"--calibration: {exc}") from exc


def _defense(args: argparse.Namespace) -> Any:
    return None if args.no_defense else defense_from_args(args)


def run(args: argparse.Namespace) -> int:
    """Check everything a user can get wrong (usage errors, exit 2) before the model loads and
    the server starts: the extra, the limits, the calibration, the address; then serve."""
    import logging

    if args.no_defense and args.calibration is None:
        raise UsageError("--no-defense: without --calibration the server would serve nothing")
    try:
        from ..serve import bind_socket, create_app, run_server  # the ImportError names the extra
    except ImportError as exc:
        raise UsageError(str(exc)) from exc
    limits = _limits(args)
    conformal = _calibration(args)
    try:
        sock = bind_socket(args.host, args.port)
    except OSError as exc:
        raise UsageError(f"--host/--port: cannot listen on {args.host}:{args.port}: {exc.strerror or exc}") from exc
    try:
        app = create_app(defense=_defense(args), conformal=conformal, limits=limits)
    except BaseException:
        sock.close()
        raise
    logger = logging.getLogger("rrag_kernels")
    logger.setLevel(args.log_level.upper())
    if not logger.handlers:  # uvicorn configures only its own loggers
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(levelname)s:     %(message)s"))  # as uvicorn writes
        logger.addHandler(handler)
    import signal
    import threading

    if threading.current_thread() is threading.main_thread():
        # uvicorn shuts down gracefully on SIGTERM and then re-raises it to the handler it found:
        # the default one, not the batch commands' (which would turn a clean stop into exit 130)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    run_server(app, sock=sock, limits=limits, log_level=args.log_level)
    return 0
