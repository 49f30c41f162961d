"""The FastAPI application: ``POST /defend``, ``POST /filter``, ``GET /health``.

Endpoints
---------
``POST /defend``
    Body ``{"items": [{"id"?, "question", "passages": [{"text", "url"?, "title"?,
    "retrieval_score"?}]}], "dropped"?: false}``. The items run through
    :meth:`MirageDefense.defend_batch` (one NLI pass, a failing item isolated) and come back
    in order, one record each, the records ``rrag defend`` writes
    (:func:`rrag_kernels.pipelines.line_record` of :meth:`MirageResult.to_record`; ``line`` is
    the item's 1-based position in ``items``)::

        {"results": [{"line", "id"?, "question", "gate_passed", "gate_reason", "fallback",
                      "kept": [...], "dropped"?: [...], "prompt", "stats"} | error record],
         "summary": {"n", "n_failed", "n_gate_passed", "errors": [{"line", "id"?, "error"}],
                     "elapsed_s"}}

    Count in = count out: an item on which the defense fails is an error record
    ``{"line", "id"?, "error", "gate_passed": false, "fallback", "prompt"}`` and every other
    item's result comes back unchanged; the request itself is 200.
``POST /filter``
    Body ``{"responses": [{"id"?, "prompt"?, "group"?, "claims": [{"text", "score"}]}]}``:
    each claim is kept iff its score >= the loaded calibration's q̂ (its group's, for a
    group-conditional calibration), as :meth:`ClaimConformal.filter` decides; the records are
    those of ``rrag conformal filter``::

        {"results": [{"line", "id"?, "prompt", "q_hat", "n_claims", "n_kept",
                      "claims": [{"text", "score", "kept"}], "kept": [text, ...]} | error record],
         "summary": {"n", "n_failed", "errors", "alpha", "q_hat"}}

    A response whose ``group`` the calibration does not have is an error record. The scores
    are the caller's (the score the calibration was made with, ``score_name`` in
    ``/health``): the server does not embed or score claims.
``GET /health``
    ``{"status": "ok", "version", "defense": {"nli", "params"} | null,
    "conformal": <the calibration's JSON> | null, "limits": {...}, "busy"}``.

Every error the application answers is JSON ``{"error": message, "status": code}`` (422
adds ``detail``, the validation errors without the offending input; uvicorn's own answers to
a request that is not valid HTTP, and beyond ``max_connections``, are plain text).

Status codes
------------
=====  ==================================================================================
200    done (per-item failures are error records in ``results``, counted in ``summary``)
400    malformed JSON, or a bad ``Content-Length``
404    unknown path; 405: unknown method
408    the body did not arrive within ``body_timeout_s``
413    body over ``max_body_bytes``; more items / passages / claims than the limits allow
415    a ``Content-Type`` that is not JSON, or none
422    a body of the wrong shape or types (the message names the first bad field)
503    nothing loaded for the endpoint (``/defend`` without a defense, ``/filter`` without a
       calibration), or every worker slot busy (``Retry-After: 1``)
504    the work did not finish within ``request_timeout_s``
500    a bug (logged with its traceback; the message says nothing more)
=====  ==================================================================================

The work (defense, filter, building and encoding the records) runs in a worker thread, never
on the event loop (the kernels release the GIL), so ``/health`` and other connections are
served while a defense runs.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator, Callable

try:
    from fastapi import FastAPI, Request
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import Response
    from starlette.exceptions import HTTPException
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError("rrag_kernels.serve needs FastAPI and uvicorn: pip install 'rrag_kernels[serve]'") from exc

from .. import __version__
from ..pipelines import json_text, line_record
from ..pipelines.conformal import ClaimConformal, filter_responses
from ..pipelines.mirage import MirageDefense, params_dict
from .limits import BodyLimitMiddleware, ServerLimits, error_body, is_json_type
from .schema import DefendRequest, FilterRequest, ScoredResponse

__all__ = ["create_app"]

logger = logging.getLogger("rrag_kernels.serve")

_JSON = "application/json"


class _Worker:
    """At most ``slots`` pieces of work at once, each in its own thread; one more is 503.

    A slot is held until the work's thread returns, even when the request has already been
    answered 504: the number of threads doing work is bounded whatever the clients do.
    """

    def __init__(self, slots: int) -> None:
        self.slots = slots
        self._lock = threading.Lock()
        self._busy = 0
        self._pool = ThreadPoolExecutor(max_workers=slots, thread_name_prefix="rrag-serve")

    @property
    def busy(self) -> int:
        with self._lock:
            return self._busy

    def _release(self, _: Future) -> None:
        with self._lock:
            self._busy -= 1

    async def run(self, fn: Callable[[], bytes], timeout_s: float, what: str) -> bytes:
        with self._lock:
            if self._busy >= self.slots:
                raise HTTPException(503, f"server busy: {self.slots} request(s) already running; retry later",
                                    headers={"Retry-After": "1"})
            self._busy += 1
        try:
            fut = self._pool.submit(fn)
        except BaseException:
            self._release(None)  # type: ignore[arg-type]
            raise
        fut.add_done_callback(self._release)
        try:
            return await asyncio.wait_for(asyncio.wrap_future(fut), timeout_s)
        except asyncio.TimeoutError:
            logger.warning("serve: %s did not finish within %g s (its thread runs on to its end)", what, timeout_s)
            raise HTTPException(504, f"{what} did not finish within the request timeout of {timeout_s:g} s") from None

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def _encode(payload: Any) -> bytes:
    """JSON bytes of a payload, as the CLI writes a record (``pipelines.json_text``)."""
    return json_text(payload).encode("utf-8")


def _summary(records: list[dict]) -> dict[str, Any]:
    errors = [{k: r[k] for k in ("line", "id", "error") if k in r} for r in records if "error" in r]
    return {"n": len(records), "n_failed": len(errors), "errors": errors}


def _defend_payload(defense: MirageDefense, rows: list[dict], dropped: bool) -> bytes:
    t0 = time.perf_counter()
    results = defense.run_batch(rows, progress=False)
    if len(results) != len(rows):  # the method contract: one result per item
        raise RuntimeError(f"run_batch returned {len(results)} results for {len(rows)} items")
    records = [line_record(n, row, res.to_record(dropped=dropped)) for n, (row, res) in enumerate(zip(rows, results), 1)]
    summary = _summary(records)
    summary["n_gate_passed"] = sum(bool(r.get("gate_passed")) for r in records)
    summary["elapsed_s"] = time.perf_counter() - t0
    return _encode({"results": records, "summary": summary})


def _filter_payload(cc: ClaimConformal, responses: list[ScoredResponse]) -> bytes:
    scored = [{"id": r.id, "prompt": r.prompt, "group": r.group, "texts": [c.text for c in r.claims],
               "scores": [c.score for c in r.claims]} for r in responses]
    records = [line_record(k, r, rec) for k, (r, rec) in enumerate(zip(scored, filter_responses(cc, scored)), 1)]
    summary = _summary(records)
    summary.update(alpha=cc.alpha, q_hat=cc.q_hat)
    return _encode({"results": records, "summary": summary})


def _check_count(n: int, limit: int, what: str, limit_name: str) -> None:
    if n > limit:
        raise HTTPException(413, f"{what}: {n} is over the limit of {limit} ({limit_name})")


def _unsupported_type(request: Request) -> Response:
    ctype = request.headers.get("content-type")
    got = "none" if ctype is None else repr(ctype[:60])
    return Response(error_body(415, f"Content-Type: expected application/json, got {got}"), status_code=415,
                    media_type=_JSON)


def _validation_error(exc: RequestValidationError) -> Response:
    """400 for a body that is not JSON, 422 for JSON of the wrong shape (the input itself is
    never echoed: it may be megabytes)."""
    errors = exc.errors()
    for err in errors:
        if err.get("type") == "json_invalid":
            where = err.get("loc", ())
            pos = f" at position {where[-1]}" if len(where) > 1 and isinstance(where[-1], int) else ""
            reason = (err.get("ctx") or {}).get("error", "")
            return Response(error_body(400, f"malformed JSON{pos}" + (f": {reason}" if reason else "")),
                            status_code=400, media_type=_JSON)
    detail = [{"loc": list(e.get("loc", ())), "msg": e.get("msg", ""), "type": e.get("type", "")} for e in errors]
    first = detail[0] if detail else {"loc": [], "msg": "invalid request"}
    where = ".".join(str(p) for p in first["loc"] if p != "body") or "body"
    return Response(error_body(422, f"{where}: {first['msg']}", detail=detail), status_code=422, media_type=_JSON)


def create_app(defense: MirageDefense | None = None, conformal: ClaimConformal | str | os.PathLike | None = None,
               limits: ServerLimits | None = None) -> FastAPI:
    """The HTTP server's ASGI application.

    Parameters
    ----------
    defense : MirageDefense or None
        Serves ``POST /defend``; None: that endpoint answers 503.
    conformal : ClaimConformal, path or None
        A calibrated :class:`ClaimConformal`, or the path of a calibration it saved (loaded
        and checked now); serves ``POST /filter``. None: that endpoint answers 503.
    limits : ServerLimits, optional
        Body, count, time and concurrency limits (defaults: :class:`ServerLimits`).

    Returns
    -------
    fastapi.FastAPI
        Run it with :func:`rrag_kernels.serve.run_server` (or any ASGI server; only
        :func:`rrag_kernels.serve.uvicorn_config` applies the header and keep-alive limits).

    Raises
    ------
    TypeError
        ``defense`` is not a MirageDefense, ``limits`` not a ServerLimits.
    ValueError, OSError
        The calibration file cannot be read or is malformed (``ClaimConformal.load``), or the
        calibrator was never calibrated.
    """
    limits = ServerLimits() if limits is None else limits
    if not isinstance(limits, ServerLimits):
        raise TypeError(f"limits: expected a ServerLimits, got {type(limits).__name__}")
    limits.validate()
    if defense is not None and not isinstance(defense, MirageDefense):
        raise TypeError(f"defense: expected a MirageDefense or None, got {type(defense).__name__}")
    if isinstance(conformal, (str, os.PathLike)):
        conformal = ClaimConformal.load(conformal)
    if conformal is not None:
        if not isinstance(conformal, ClaimConformal):
            raise TypeError(f"conformal: expected a ClaimConformal, a calibration path or None, "
                            f"got {type(conformal).__name__}")
        if conformal.q_hat is None:
            raise ValueError("conformal: not calibrated; call calibrate() or load a saved calibration")
    worker = _Worker(limits.max_concurrency)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        worker.close()

    app = FastAPI(title="rrag_kernels", version=__version__, lifespan=lifespan,
                  description="MIRAGE defense and conformal claim filter over HTTP")
    app.state.limits = limits
    app.state.defense = defense
    app.state.conformal = conformal

    @app.exception_handler(RequestValidationError)
    async def _on_invalid(request: Request, exc: RequestValidationError) -> Response:
        if not is_json_type(request.headers.get("content-type")):  # FastAPI then hands the model the raw bytes
            return _unsupported_type(request)
        return _validation_error(exc)

    @app.exception_handler(HTTPException)
    async def _on_http(_: Request, exc: HTTPException) -> Response:
        return Response(error_body(exc.status_code, str(exc.detail)), status_code=exc.status_code,
                        media_type=_JSON, headers=exc.headers)

    @app.exception_handler(Exception)
    async def _on_bug(request: Request, exc: Exception) -> Response:
        logger.error("serve: %s %s failed", request.method, request.url.path, exc_info=exc)
        return Response(error_body(500, "internal server error (logged on the server)"), status_code=500,
                        media_type=_JSON)

    @app.api_route("/health", methods=["GET", "HEAD"], summary="status, version, what is loaded, limits")
    async def health() -> Response:
        cc = app.state.conformal
        d = app.state.defense
        payload = {
            "status": "ok",
            "version": __version__,
            "defense": None if d is None else {"nli": type(d.nli).__name__, "params": params_dict(d.params)},
            "conformal": None if cc is None else cc.to_dict(),
            "limits": limits.as_dict(),
            "busy": worker.busy,
        }
        return Response(_encode(payload), media_type=_JSON)

    @app.post("/defend", summary="MIRAGE defense of each item's passages (the records of `rrag defend`)")
    async def defend(body: DefendRequest, request: Request) -> Response:
        if not is_json_type(request.headers.get("content-type")):  # older FastAPI reads a body without one as JSON
            return _unsupported_type(request)
        d = app.state.defense
        if d is None:
            raise HTTPException(503, "no MIRAGE defense loaded on this server (create_app(defense=...))")
        _check_count(len(body.items), limits.max_items, "items", "max_items")
        for k, item in enumerate(body.items):
            _check_count(len(item.passages), limits.max_passages, f"items[{k}].passages", "max_passages")
        rows = [item.row() for item in body.items]
        dropped = body.dropped
        payload = await worker.run(lambda: _defend_payload(d, rows, dropped), limits.request_timeout_s,
                                   f"the defense of {len(rows)} item(s)")
        return Response(payload, media_type=_JSON)

    @app.post("/filter", summary="conformal claim filter with the loaded calibration (scores in, kept out)")
    async def filter_claims(body: FilterRequest, request: Request) -> Response:
        if not is_json_type(request.headers.get("content-type")):
            return _unsupported_type(request)
        cc = app.state.conformal
        if cc is None:
            raise HTTPException(503, "no conformal calibration loaded on this server (rrag serve --calibration "
                                     "FILE, or create_app(conformal=...))")
        _check_count(len(body.responses), limits.max_items, "responses", "max_items")
        for k, resp in enumerate(body.responses):
            _check_count(len(resp.claims), limits.max_claims, f"responses[{k}].claims", "max_claims")
        responses = body.responses
        payload = await worker.run(lambda: _filter_payload(cc, responses), limits.request_timeout_s,
                                   f"the filter of {len(responses)} response(s)")
        return Response(payload, media_type=_JSON)

    app.add_middleware(BodyLimitMiddleware, max_body_bytes=limits.max_body_bytes,
                       body_timeout_s=limits.body_timeout_s)
    return app
