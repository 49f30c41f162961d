"""A scripted LLM: a test double for the control flow of pipelines (no model, no server)."""

from __future__ import annotations

import copy
import threading
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping, Sequence, Union

from .types import ChatResult, LLMError, LLMUsage, UsageMeter, chat_request

__all__ = ["ScriptedCall", "ScriptedLLM"]

Reply = Union[str, ChatResult, BaseException]


@dataclass(frozen=True)
class ScriptedCall:
    """One call a :class:`ScriptedLLM` received.

    Attributes
    ----------
    messages : list of dict
        A deep copy of the messages, as validated.
    options : dict
        ``max_tokens``, ``temperature``, ``stop``, ``seed``, ``response_format``,
        ``top_logprobs`` as passed.
    reply : str or None
        The text returned (None when the call raised).
    """

    messages: list[dict[str, Any]]
    options: dict[str, Any] = field(default_factory=dict)
    reply: str | None = None


def _words(text: str | None) -> int:
    return len(text.split()) if text else 0


class ScriptedLLM:
    """Test double: an :class:`~rrag_kernels.models.LLM` that returns canned replies.

    Not a model. Pipelines' control-flow tests use it to decide exactly what "the LLM" says
    and to check what it was asked.

    Parameters
    ----------
    replies : sequence or callable
        A sequence: the replies of successive calls, in order; each a str, a
        :class:`ChatResult` (returned with ``seconds`` and token counts as given), or an
        exception instance (raised by that call, e.g. ``LLMTimeoutError("...")``). A call
        beyond the end raises :class:`LLMError` ("script exhausted").
        A callable ``replies(messages) -> str | ChatResult``: called with the validated
        messages (list of dict) of every call; it may raise.

    Attributes
    ----------
    calls : list of ScriptedCall
        Every call so far, in order (a copy).

    Notes
    -----
    Arguments are validated exactly as the real clients validate them, so a pipeline that
    passes bad messages fails here too. ``stop`` is applied (the reply is cut before the
    first stop string, ``finish_reason="stop"``); ``max_tokens`` is recorded, not applied.
    Token counts are whitespace word counts. Log-probabilities are returned only when a
    scripted :class:`ChatResult` carries them. Thread-safe (calls are numbered in arrival
    order).
    """

    def __init__(self, replies: Sequence[Reply] | Callable[[list[dict[str, Any]]], str | ChatResult]):
        if callable(replies):
            self._fn, self._script = replies, None
        elif isinstance(replies, (str, bytes)) or not isinstance(replies, Sequence):
            raise TypeError(f"replies must be a sequence of replies or a callable, got {type(replies).__name__}")
        else:
            for i, r in enumerate(replies):
                if not isinstance(r, (str, ChatResult, BaseException)):
                    raise TypeError(f"replies[{i}] must be a str, a ChatResult or an exception, got {type(r).__name__}")
            self._fn, self._script = None, list(replies)
        self._lock = threading.Lock()
        self._calls: list[ScriptedCall] = []
        self._meter = UsageMeter()

    @property
    def calls(self) -> list[ScriptedCall]:
        """Every call so far, in order."""
        with self._lock:
            return list(self._calls)

    @property
    def remaining(self) -> int | None:
        """Replies left in the script (None for a callable script)."""
        with self._lock:
            return None if self._script is None else len(self._script) - len(self._calls)

    def chat(self, messages: Sequence[Mapping[str, Any]], *, max_tokens: int = 256, temperature: float = 0.0,
             stop: str | Sequence[str] | None = None, seed: int | None = None,
             response_format: Mapping[str, Any] | None = None, top_logprobs: int | None = None) -> ChatResult:
        """The next scripted reply; see :meth:`rrag_kernels.models.LLM.chat`.

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
            Invalid arguments.
        LLMError
            The script is exhausted.
        BaseException
            Whatever the script says to raise.
        """
        body = chat_request(messages, max_tokens=max_tokens, temperature=temperature, stop=stop, seed=seed,
                            response_format=response_format, top_logprobs=top_logprobs)
        msgs = copy.deepcopy(body["messages"])
        options = {"max_tokens": max_tokens, "temperature": temperature, "stop": stop, "seed": seed,
                   "response_format": response_format, "top_logprobs": top_logprobs}
        self._meter.add(calls=1)
        with self._lock:
            index = len(self._calls)
            self._calls.append(ScriptedCall(msgs, options))
        try:
            if self._fn is not None:
                reply = self._fn(copy.deepcopy(msgs))
                if not isinstance(reply, (str, ChatResult)):
                    raise TypeError(f"the replies callable returned {type(reply).__name__}, not str or ChatResult")
            elif index < len(self._script):
                reply = self._script[index]
            else:
                raise LLMError(f"ScriptedLLM: script exhausted (it has {len(self._script)} replies, "
                               f"this is call {index + 1})")
            if isinstance(reply, BaseException):
                raise reply
            stops = [stop] if isinstance(stop, str) else list(stop or ())
            text = reply if isinstance(reply, str) else reply.text
            cuts = [text.find(s) for s in stops if s in text]
            if cuts:
                text = text[:min(cuts)]
            if isinstance(reply, str):
                reply = ChatResult(text=text, finish_reason="stop",
                                   prompt_tokens=sum(_words(m.get("content")) for m in msgs),
                                   completion_tokens=_words(text))
            elif cuts:
                reply = replace(reply, text=text, finish_reason="stop")
        except BaseException:
            self._meter.add(failures=1)
            raise
        with self._lock:
            self._calls[index] = replace(self._calls[index], reply=reply.text)
        self._meter.record(reply)
        self._meter.add(seconds=reply.seconds)
        return reply

    def usage(self, reset: bool = False) -> LLMUsage:
        """Calls, failures and (word-count) tokens so far.

        Parameters
        ----------
        reset : bool
            Zero the counters after reading them (the recorded ``calls`` stay).

        Returns
        -------
        LLMUsage
        """
        return self._meter.snapshot(reset)
