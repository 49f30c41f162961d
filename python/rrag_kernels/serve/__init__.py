"""The HTTP server (the face of ``serve/``; ``pip install 'rrag_kernels[serve]'``).

    from rrag_kernels.pipelines.mirage import MirageDefense
    from rrag_kernels.serve import ServerLimits, create_app, run_server

    app = create_app(defense=MirageDefense(nli="lexical"), conformal="cal.json",
                     limits=ServerLimits(max_items=32, request_timeout_s=10))
    run_server(app, host="127.0.0.1", port=8000)        # or: rrag serve --calibration cal.json

:mod:`.app` holds the FastAPI application (``POST /defend``, ``POST /filter``,
``GET /health``; its docstring lists the bodies and the status codes), :mod:`.schema` the
request models, :mod:`.limits` :class:`ServerLimits` and the body-limit middleware (both
usable without FastAPI), :mod:`.server` uvicorn with the connection limits.

FastAPI and uvicorn are imported on first use of :func:`create_app`, :func:`uvicorn_config`,
:func:`bind_socket` or :func:`run_server` (an ImportError naming the extra when missing), so
``rrag`` itself starts without them.
"""

from __future__ import annotations

from typing import Any

from .limits import BodyLimitMiddleware, ServerLimits

__all__ = ["BodyLimitMiddleware", "ServerLimits", "bind_socket", "create_app", "run_server", "uvicorn_config"]

_LAZY = {"create_app": ".app", "uvicorn_config": ".server", "bind_socket": ".server", "run_server": ".server"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        try:
            module = importlib.import_module(_LAZY[name], __name__)
        except ImportError as exc:
            if isinstance(exc, ModuleNotFoundError) and exc.name in ("fastapi", "starlette", "uvicorn", "pydantic"):
                raise ImportError(f"rrag_kernels.serve needs FastAPI and uvicorn ({exc.name} is missing): "
                                  "pip install 'rrag_kernels[serve]'") from exc
            raise
        return getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
