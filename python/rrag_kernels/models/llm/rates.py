"""Measured prefill (prompt evaluation) and decode (generation) rates of an LLM."""

from __future__ import annotations

import uuid
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from ...ops import check_int
from .types import ChatResult, logger

if TYPE_CHECKING:
    from ..protocols import LLM

__all__ = ["RateReport", "measure_rates"]

_FILLER = ("Retrieval-augmented generation answers a question from passages that a retriever found; "
           "some passages are reliable and some are not, so each claim is checked against the others. ")


@dataclass(frozen=True)
class RateReport:
    """Prefill and decode rates measured by :func:`measure_rates`.

    Attributes
    ----------
    prefill_tok_s : float or None
        Prompt tokens evaluated per second (None when it could not be measured).
    decode_tok_s : float or None
        Tokens generated per second.
    prompt_tokens : int
        Prompt tokens the rate is over (cache hits excluded, when the server says).
    completion_tokens : int
        Generated tokens the rate is over.
    calls : int
        Chat calls measured.
    source : str
        ``"server timings"`` (the server reported prompt and generation times: llama.cpp)
        or ``"wall clock"`` (estimated from a 1-token call and a long call per round; the
        network and queueing are included, so it reads low).
    """

    prefill_tok_s: float | None
    decode_tok_s: float | None
    prompt_tokens: int
    completion_tokens: int
    calls: int
    source: str

    def __str__(self) -> str:
        def fmt(v: float | None) -> str:
            return "n/a" if v is None else f"{v:.0f} tok/s"
        return (f"prefill {fmt(self.prefill_tok_s)} ({self.prompt_tokens} tokens), decode {fmt(self.decode_tok_s)} "
                f"({self.completion_tokens} tokens); {self.source}, {self.calls} calls")

    def as_dict(self) -> dict[str, Any]:
        """The fields as a JSON-serialisable dict."""
        return asdict(self)


def _messages(prompt_words: int) -> list[dict[str, str]]:
    # A fresh nonce first, so no prompt cache can reuse an earlier call's prompt.
    words = _FILLER.split()
    text = " ".join(words[i % len(words)] for i in range(prompt_words))
    return [{"role": "user", "content": f"[{uuid.uuid4().hex}] {text}\n\nNow count from 1 to 200, "
                                        "separated by spaces."}]


def measure_rates(llm: LLM, *, rounds: int = 3, prompt_words: int = 200, max_tokens: int = 32,
                  warmup: bool = True) -> RateReport:
    """Measure an LLM's prefill and decode rates with a few short calls.

    Parameters
    ----------
    llm : LLM
    rounds : int
        Measured calls (two per round when the server reports no timings).
    prompt_words : int
        Length of each prompt in words (about 1.3 tokens each).
    max_tokens : int
        Tokens to generate per measured call (the prompt asks for a long count, so the model
        rarely stops earlier).
    warmup : bool
        Make one short call first and leave it out.

    Returns
    -------
    RateReport

    Raises
    ------
    LLMError
        A call failed.
    """
    for name, v, lo in (("rounds", rounds, 1), ("prompt_words", prompt_words, 1), ("max_tokens", max_tokens, 2)):
        check_int(v, name, minimum=lo)
    if warmup:
        llm.chat(_messages(8), max_tokens=2, temperature=0.0)
    results: list[ChatResult] = [llm.chat(_messages(prompt_words), max_tokens=max_tokens, temperature=0.0)]
    if results[0].prefill_seconds is not None and results[0].decode_seconds is not None:
        results += [llm.chat(_messages(prompt_words), max_tokens=max_tokens, temperature=0.0)
                    for _ in range(rounds - 1)]
        p_tok = sum(r.prefill_tokens or 0 for r in results)
        p_s = sum(r.prefill_seconds or 0.0 for r in results)
        d_tok = sum(r.completion_tokens for r in results)
        d_s = sum(r.decode_seconds or 0.0 for r in results)
        report = RateReport(p_tok / p_s if p_s > 0 else None, d_tok / d_s if d_s > 0 else None, p_tok, d_tok,
                            len(results), "server timings")
    else:
        longs = results + [llm.chat(_messages(prompt_words), max_tokens=max_tokens, temperature=0.0)
                           for _ in range(rounds - 1)]
        shorts = [llm.chat(_messages(prompt_words), max_tokens=1, temperature=0.0) for _ in range(rounds)]
        p_tok = sum(r.prompt_tokens for r in shorts)
        p_s = sum(r.seconds for r in shorts)
        d_tok = sum(max(r.completion_tokens - 1, 0) for r in longs)
        d_s = sum(r.seconds for r in longs) - p_s
        report = RateReport(p_tok / p_s if p_tok and p_s > 0 else None, d_tok / d_s if d_tok and d_s > 0 else None,
                            p_tok, d_tok, len(longs) + len(shorts), "wall clock")
    logger.info("measured LLM rates: %s", report)
    return report
