"""measure_rates on fake LLMs whose costs are known (the real model is measured in test_llm.py)."""

from __future__ import annotations

import pytest

from rrag_kernels.models import ChatResult, RateReport, measure_rates


class CostModel:
    """An LLM whose call costs 0.1 s + 0.01 s per generated token; with ``timings`` it also
    reports 50 evaluated prompt tokens in 0.1 s and the generation time."""

    def __init__(self, timings: bool):
        self.timings = timings
        self.calls = []

    def chat(self, messages, *, max_tokens=256, temperature=0.0, **kwargs):
        self.calls.append((messages[0]["content"], max_tokens))
        extra = dict(prefill_tokens=50, prefill_seconds=0.1, decode_seconds=0.01 * max_tokens) if self.timings else {}
        return ChatResult("1 2 3", prompt_tokens=100, completion_tokens=max_tokens,
                          seconds=0.1 + 0.01 * max_tokens, **extra)


def test_rates_from_server_timings():
    llm = CostModel(timings=True)
    report = measure_rates(llm, rounds=3, prompt_words=20, max_tokens=16)
    assert isinstance(report, RateReport) and report.source == "server timings"
    assert report.prefill_tok_s == pytest.approx(500.0) and report.decode_tok_s == pytest.approx(100.0)
    assert (report.calls, report.prompt_tokens, report.completion_tokens) == (3, 150, 48)
    assert len(llm.calls) == 4  # the warm-up call is left out
    prompts = [p for p, _ in llm.calls]
    assert len(set(prompts)) == 4  # a fresh prompt each call: no prompt cache can help


def test_rates_from_the_wall_clock_without_timings():
    llm = CostModel(timings=False)
    report = measure_rates(llm, rounds=2, max_tokens=32, warmup=False)
    assert report.source == "wall clock" and report.calls == 4
    # prefill: 100 prompt tokens in the 0.11 s of a 1-token call; decode: 31 more tokens in 0.31 s more
    assert report.prefill_tok_s == pytest.approx(100 / 0.11)
    assert report.decode_tok_s == pytest.approx(100.0)
    assert "tok/s" in str(report) and report.as_dict()["source"] == "wall clock"


def test_rates_argument_checks():
    with pytest.raises(ValueError, match="max_tokens"):
        measure_rates(CostModel(True), max_tokens=1)
    with pytest.raises(TypeError, match="rounds"):
        measure_rates(CostModel(True), rounds=1.5)
