"""LLMJudgeNLI: the NLI protocol on top of an OpenAI-compatible chat endpoint.

Unit tests drive it with a :class:`ScriptedLLM` whose replies carry canned
log-probabilities (the mapping, the floor, the text fallback, the cache, the order under
concurrency, the argument checks), and through the real :class:`OpenAIChatLLM` against a
tiny stdlib HTTP server that answers in the OpenAI format (the JSON path, and the error
naming the server when it sends no log-probabilities). The last tests run the real
SmolLM2-135M on llama.cpp (``EmbeddedServer``) end to end, a few tokens per pair; they skip,
with the reason, when xllamacpp or the model package is not installed.
"""

from __future__ import annotations

import json
import logging
import math
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from helpers import embedded_llm_skip_reason

from rrag_kernels.models import (
    ChatResult,
    EmbeddedServer,
    LLMError,
    NLIScorer,
    OpenAIChatLLM,
    ScriptedLLM,
    TokenLogprob,
    nli,
)
from rrag_kernels.models.nli import LLMJudgeNLI
from rrag_kernels.models.nli.llm_judge import JUDGE_INSTRUCTION, token_label

LN = math.log

_PAIR = re.compile(r"Premise: (.*)\nHypothesis: (.*)\nAnswer", re.S)


def pair_of(messages) -> tuple[str, str]:
    """The (premise, hypothesis) a judge request asks about."""
    m = _PAIR.search(messages[-1]["content"])
    assert m is not None, messages
    return m.group(1), m.group(2)


def reply(text: str, top: list[tuple[str, float]] | None, first: str | None = None,
          lead: list[TokenLogprob] = ()) -> ChatResult:
    """A ChatResult whose first token is ``first`` (default: the best of ``top``) with
    alternatives ``top`` (probabilities); None for ``top`` means no log-probabilities."""
    if top is None:
        return ChatResult(text=text)
    alts = tuple((t, LN(p)) for t, p in top)
    tok = TokenLogprob(first or alts[0][0], alts[0][1] if first is None else LN(0.01), alts)
    return ChatResult(text=text, logprobs=(*lead, tok))


def expected_row(top, floor=1e-4) -> np.ndarray:
    """The definition, in float64: label masses summed, absent labels at min(floor, p_min),
    normalised."""
    mass = np.zeros(3)
    found = np.zeros(3, bool)
    for t, p in top:
        k = token_label(t)
        if k is not None:
            mass[k] += p
            found[k] = True
    mass[~found] = min(floor, min(p for _, p in top))
    return mass / mass.sum()


def assert_rows(probs, expected, n):
    assert isinstance(probs, np.ndarray) and probs.dtype == np.float32 and probs.shape == (n, 3)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, atol=1e-6)
    # float32 rounding of values <= 1: 2 ulp of 1.0.
    np.testing.assert_allclose(probs, expected, rtol=0, atol=2 * np.finfo(np.float32).eps)


# --------------------------------------------------------------------------- the label mapping


@pytest.mark.parametrize("token, label", [
    ("Ent", 0), (" ent", 0), ("En", 0), ("entailment", 0), ("Entailment.", 0), ("**Ent", 0), ("entails", None),
    ("Ne", 1), (" neutral", 1), ("NEU", 1), ("neutrality", 1),
    ("Con", 2), ("contr", 2), (" Contradiction", 2), ("contradiction,", 2),
    ("The", None), ("No", None), ("C", None), ("E", None), ("**", None), (" ", None), ("", None), ("Com", None),
])
def test_token_label(token, label):
    assert token_label(token) == label


def test_probabilities_from_the_first_token_alternatives():
    top = [("Ent", 0.6), ("Ne", 0.2), (" ent", 0.1), ("The", 0.05), ("C", 0.01)]
    judge = LLMJudgeNLI(llm=ScriptedLLM([reply("Entailment", top)]))
    probs = judge.predict_proba(["a"], ["b"])
    # entailment 0.7, neutral 0.2, contradiction absent: floor 1e-4 (< p_min 0.01)
    assert_rows(probs, expected_row(top)[None], 1)
    assert probs[0, 2] == pytest.approx(1e-4 / 0.9001, rel=1e-5)
    assert judge.stats == {"requests": 1, "cache_hits": 0, "from_logprobs": 1, "from_text": 0, "unparseable": 0}


def test_an_absent_label_gets_at_most_the_smallest_listed_probability():
    top = [("Contr", 0.9), ("The", 0.1 - 2e-6), ("Ne", 1e-6), ("x", 1e-6)]
    judge = LLMJudgeNLI(llm=ScriptedLLM([reply("contradiction", top)]), floor=0.01)
    probs = judge.predict_proba(["a"], ["b"])
    row = np.array([1e-6, 1e-6, 0.9]) / (0.9 + 2e-6)  # entailment absent: min(0.01, 1e-6)
    assert_rows(probs, row[None], 1)
    assert_rows(probs, expected_row(top, floor=0.01)[None], 1)


def test_leading_markdown_tokens_are_skipped_and_the_chosen_token_counts():
    lead = [TokenLogprob("**", LN(0.5), (("**", LN(0.5)), ("Ent", LN(0.3))))]
    top = [("Ne", 0.3), ("Con", 0.2)]  # the generated token "Contr" is not among them
    judge = LLMJudgeNLI(llm=ScriptedLLM([reply("**Contradiction**", top, first="Contr", lead=lead)]))
    probs = judge.predict_proba(["a"], ["b"])
    assert_rows(probs, expected_row(top + [("Contr", 0.01)])[None], 1)


def test_no_label_among_the_alternatives_reads_the_text():
    top = [("The", 0.7), ("It", 0.3)]
    judge = LLMJudgeNLI(llm=ScriptedLLM([reply("The answer is contradiction.", top),
                                         reply("The premise says so.", top)]), text_confidence=0.8)
    with_label = judge.predict_proba(["a"], ["b"])
    assert_rows(with_label, np.array([[0.1, 0.1, 0.8]]), 1)
    unreadable = judge.predict_proba(["c"], ["d"])
    assert_rows(unreadable, np.array([[0.1, 0.8, 0.1]]), 1)
    assert judge.stats["from_text"] == 1 and judge.stats["unparseable"] == 1


def test_requests_are_deterministic_and_short():
    llm = ScriptedLLM([reply("neutral", [("neutral", 0.9)])])
    LLMJudgeNLI(llm=llm, max_tokens=5, top_logprobs=7).predict_proba(["The sky is blue."], ["It is noon."])
    (call,) = llm.calls
    assert call.options["temperature"] == 0.0 and call.options["max_tokens"] == 5
    assert call.options["top_logprobs"] == 7
    assert call.messages[0] == {"role": "system", "content": JUDGE_INSTRUCTION}
    assert "exactly one word" in JUDGE_INSTRUCTION
    assert pair_of(call.messages) == ("The sky is blue.", "It is noon.")


# --------------------------------------------------------------------------- label_from


def test_text_mode_smooths_the_named_label_and_reads_unparseable_as_neutral(caplog):
    replies = {"p0": "Entailment.", "p1": "It contradicts the premise", "p2": " neutral", "p3": "I cannot say"}
    llm = ScriptedLLM(lambda m: reply(replies[pair_of(m)[0]], None))
    judge = LLMJudgeNLI(llm=llm, label_from="text", max_concurrency=1)
    with caplog.at_level(logging.WARNING, logger="rrag_kernels"):
        probs = judge.predict_proba(["p0", "p1", "p2", "p3"], ["h"] * 4)
    hi, lo = 0.9, 0.05
    assert_rows(probs, np.array([[hi, lo, lo], [lo, lo, hi], [lo, hi, lo], [lo, hi, lo]]), 4)
    assert all(c.options["top_logprobs"] is None for c in llm.calls)
    assert judge.stats["from_text"] == 3 and judge.stats["unparseable"] == 1
    assert any("I cannot say" in r.getMessage() and "neutral" in r.getMessage() for r in caplog.records)


def test_logprobs_mode_refuses_a_server_without_them():
    judge = LLMJudgeNLI(llm=ScriptedLLM([reply("entailment", None)]))
    with pytest.raises(LLMError, match=r"no log-probabilities.*label_from='text'"):
        judge.predict_proba(["a"], ["b"])


def test_auto_mode_falls_back_to_the_text_once_logged(caplog):
    llm = ScriptedLLM(lambda m: reply("contradiction", None))
    judge = LLMJudgeNLI(llm=llm, label_from="auto", max_concurrency=1)
    with caplog.at_level(logging.WARNING, logger="rrag_kernels"):
        probs = judge.predict_proba(["a", "b"], ["c", "d"])
    assert_rows(probs, np.array([[0.05, 0.05, 0.9]] * 2), 2)
    assert sum("no log-probabilities" in r.getMessage() for r in caplog.records) == 1
    assert llm.calls[0].options["top_logprobs"] == 20


# --------------------------------------------------------------------------- cache and concurrency


def test_each_pair_is_asked_once():
    llm = ScriptedLLM(lambda m: reply("neutral", [("Ne", 0.8), ("Ent", 0.2)]))
    judge = LLMJudgeNLI(llm=llm)
    first = judge.predict_proba(["a", "b", "a", "a"], ["x", "y", "x", "z"])
    assert len(llm.calls) == 3  # (a, x) twice in the batch: asked once
    second = judge.predict_proba(["b", "a"], ["y", "x"])
    assert len(llm.calls) == 3
    np.testing.assert_array_equal(second, first[[1, 0]])
    assert judge.stats["requests"] == 3 and judge.stats["cache_hits"] == 1 + 2
    judge.clear_cache()
    judge.predict_proba(["a"], ["x"])
    assert len(llm.calls) == 4


def test_the_cache_is_bounded_lru():
    llm = ScriptedLLM(lambda m: reply("neutral", [("Ne", 0.8)]))
    judge = LLMJudgeNLI(llm=llm, cache_size=2, max_concurrency=1)
    judge.predict_proba(["a", "b"], ["x", "x"])
    judge.predict_proba(["a"], ["x"])            # a is now the most recent
    judge.predict_proba(["c"], ["x"])            # evicts b
    judge.predict_proba(["a", "c"], ["x", "x"])  # both cached
    assert len(llm.calls) == 3
    judge.predict_proba(["b"], ["x"])
    assert len(llm.calls) == 4
    uncached = LLMJudgeNLI(llm=llm, cache_size=0)
    uncached.predict_proba(["a", "a"], ["x", "x"])  # still asked once within the call
    uncached.predict_proba(["a"], ["x"])
    assert len(llm.calls) == 6


def test_order_is_kept_under_concurrency():
    n, limit = 23, 4
    lock = threading.Lock()
    active, peak = [0], [0]
    tokens = ["Ent", "Ne", "Contr"]

    def answer(messages):
        k = int(pair_of(messages)[0][1:])
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        time.sleep(0.002 * ((7 * k) % 5))  # later pairs often finish first
        with lock:
            active[0] -= 1
        return reply("", [(tokens[k % 3], 0.5 + 0.01 * k), ("The", 0.1)])

    llm = ScriptedLLM(answer)
    judge = LLMJudgeNLI(llm=llm, max_concurrency=limit)
    probs = judge.predict_proba([f"p{k}" for k in range(n)], [f"h{k}" for k in range(n)])
    expected = np.stack([expected_row([(tokens[k % 3], 0.5 + 0.01 * k), ("The", 0.1)]) for k in range(n)])
    assert_rows(probs, expected, n)
    assert len(llm.calls) == n and 1 < peak[0] <= limit


@pytest.mark.parametrize("max_concurrency", [1, 2])
def test_a_failed_request_is_raised_and_the_answered_rows_stay_cached(max_concurrency):
    def answer(messages):
        if pair_of(messages)[0] == "bad":
            raise LLMError("server broke", status=500)
        return reply("", [("Ent", 0.9)])

    llm = ScriptedLLM(answer)
    judge = LLMJudgeNLI(llm=llm, max_concurrency=max_concurrency)
    with pytest.raises(LLMError, match="server broke"):
        judge.predict_proba(["good", "bad"], ["h", "h"])
    calls = len(llm.calls)
    judge.predict_proba(["good"], ["h"])
    assert len(llm.calls) == calls


# --------------------------------------------------------------------------- arguments


def test_it_is_an_nli_scorer():
    judge = LLMJudgeNLI(llm=ScriptedLLM([]))
    assert isinstance(judge, NLIScorer) and judge.labels == ("entailment", "neutral", "contradiction")
    assert judge.predict_proba([], []).shape == (0, 3) and judge.predict_proba([], []).dtype == np.float32


def test_input_errors_name_the_argument():
    judge = LLMJudgeNLI(llm=ScriptedLLM([]))
    with pytest.raises(ValueError, match="^hypotheses: expected 2 items"):
        judge.predict_proba(["a", "b"], ["c"])
    with pytest.raises(TypeError, match="^premises"):
        judge.predict_proba("a", ["c"])
    with pytest.raises(TypeError, match="^hypotheses"):
        judge.predict_proba(["a"], [3])
    assert judge.stats["requests"] == 0


def test_texts_are_cleaned_before_they_are_sent():
    llm = ScriptedLLM(lambda m: reply("", [("Ent", 0.9)]))
    judge = LLMJudgeNLI(llm=llm)
    judge.predict_proba(["bad \ud800 text\x07"], ["ok"])
    premise, _ = pair_of(llm.calls[0].messages)
    assert premise == "bad \ufffd text "
    json.dumps(llm.calls[0].messages).encode("utf-8")


@pytest.mark.parametrize("kwargs, error, match", [
    ({}, TypeError, "^base_url"),
    ({"base_url": "http://127.0.0.1:9/v1", "llm": ScriptedLLM([])}, TypeError, "^llm"),
    ({"llm": object()}, TypeError, "^llm"),
    ({"llm": ScriptedLLM([]), "label_from": "probs"}, ValueError, "^label_from"),
    ({"llm": ScriptedLLM([]), "max_concurrency": 0}, ValueError, "max_concurrency"),
    ({"llm": ScriptedLLM([]), "cache_size": -1}, ValueError, "cache_size"),
    ({"llm": ScriptedLLM([]), "top_logprobs": 21}, ValueError, "top_logprobs"),
    ({"llm": ScriptedLLM([]), "floor": 0.0}, ValueError, "^floor"),
    ({"llm": ScriptedLLM([]), "text_confidence": 0.2}, ValueError, "^text_confidence"),
    ({"base_url": "ftp://host"}, ValueError, "base_url"),
])
def test_constructor_errors(kwargs, error, match):
    with pytest.raises(error, match=match):
        LLMJudgeNLI(**kwargs)


def test_built_from_a_url_or_by_load_without_connecting():
    judge = LLMJudgeNLI("http://127.0.0.1:9/v1", model="m", api_key="k", max_concurrency=3, read_timeout=5.0)
    assert isinstance(judge.llm, OpenAIChatLLM) and judge.llm.model == "m"
    assert judge.llm.max_concurrency == 3 and judge.llm.read_timeout == 5.0
    loaded = nli.load(" LLM:http://127.0.0.1:9/v1 ", model="m", label_from="text")
    assert isinstance(loaded, LLMJudgeNLI) and loaded.label_from == "text"
    assert loaded.llm.url == "http://127.0.0.1:9/v1/chat/completions"
    with pytest.raises(ValueError, match="^name: .*base URL"):
        nli.load("llm:")


# --------------------------------------------------------------------------- over HTTP (a stub server)


class OpenAIStub:
    """Answers every chat completion with ``answer(premise) -> (text, top or None)`` in the
    OpenAI format; counts the requests."""

    def __init__(self, answer):
        self.requests = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                stub.requests.append(body)
                text, top = answer(pair_of(body["messages"])[0])
                choice = {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}
                if top is not None and body.get("logprobs"):
                    alts = [{"token": t, "logprob": LN(p), "bytes": None} for t, p in top]
                    choice["logprobs"] = {"content": [{"token": top[0][0], "logprob": LN(top[0][1]),
                                                       "top_logprobs": alts[: body["top_logprobs"]]}]}
                payload = json.dumps({"object": "chat.completion", "model": "stub", "choices": [choice],
                                      "usage": {"prompt_tokens": 9, "completion_tokens": 1}}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def stub_server(request):
    stubs = []

    def make(answer):
        stubs.append(OpenAIStub(answer))
        return stubs[-1]

    yield make
    for s in stubs:
        s.close()


def test_over_http_the_logprobs_are_read_from_the_json(stub_server):
    tops = {"a": [("Contr", 0.7), ("Ne", 0.2), ("Ent", 0.05)], "b": [("Ent", 0.5), ("The", 0.3)]}
    stub = stub_server(lambda p: ("x", tops[p]))
    judge = LLMJudgeNLI(stub.url, model="judge", api_key="secret")
    probs = judge.predict_proba(["a", "b", "a"], ["h", "h", "h"])
    assert_rows(probs, np.stack([expected_row(tops["a"]), expected_row(tops["b"]), expected_row(tops["a"])]), 3)
    assert len(stub.requests) == 2
    body = stub.requests[0]
    assert body["model"] == "judge" and body["temperature"] == 0.0 and body["logprobs"] is True
    assert body["top_logprobs"] == 20 and body["max_tokens"] == 8
    judge.predict_proba(["b"], ["h"])
    assert len(stub.requests) == 2 and judge.llm.usage().calls == 2


def test_over_http_a_server_without_logprobs_is_named(stub_server):
    stub = stub_server(lambda p: ("entailment", None))
    judge = LLMJudgeNLI(stub.url, api_key_env=None, max_retries=0)
    with pytest.raises(LLMError) as info:
        judge.predict_proba(["a", "b"], ["h", "h"])
    message = str(info.value)
    assert stub.url in message and "no log-probabilities" in message and "label_from='text'" in message
    text_judge = LLMJudgeNLI(stub.url, api_key_env=None, label_from="text")
    assert_rows(text_judge.predict_proba(["a"], ["h"]), np.array([[0.9, 0.05, 0.05]]), 1)
    assert "logprobs" not in stub.requests[-1]


# --------------------------------------------------------------------------- the real SmolLM2


SKIP = embedded_llm_skip_reason()


@pytest.fixture(scope="module")
def smollm2():
    if SKIP is not None:
        pytest.skip(f"embedded LLM unavailable: {SKIP}")
    with EmbeddedServer(n_ctx=1024, n_threads=1, n_parallel=2) as srv:
        yield srv


@pytest.mark.parametrize("label_from", ["logprobs", "text"])
def test_real_server_end_to_end(smollm2, label_from):
    judge = LLMJudgeNLI(llm=smollm2.client(api_key_env=None, read_timeout=120.0), label_from=label_from,
                        max_tokens=4, max_concurrency=2)
    premises = ["The cat sat on the mat.", "Paris is the capital of France.", "The meeting is on Monday."]
    hypotheses = ["A cat is on the mat.", "Paris is the capital of Spain.", "It will rain tomorrow."]
    probs = judge.predict_proba(premises, hypotheses)
    assert probs.dtype == np.float32 and probs.shape == (3, 3)
    assert np.isfinite(probs).all() and (probs > 0).all()
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, atol=1e-6)
    stats = judge.stats
    assert stats["requests"] == 3 and stats["from_logprobs"] + stats["from_text"] + stats["unparseable"] == 3
    if label_from == "logprobs":  # llama.cpp returns log-probabilities
        assert stats["from_logprobs"] >= 1
    calls = judge.llm.usage().calls
    again = judge.predict_proba(premises[::-1], hypotheses[::-1])
    np.testing.assert_array_equal(again, probs[::-1])
    assert judge.llm.usage().calls == calls and judge.stats["cache_hits"] == 3


def test_real_server_judges_a_mirage_defense(smollm2):
    """The defense with the LLM as its judge, over HTTP, by name: every pair the defense scores
    goes through the server once (the protocol, not the quality of a 135M model)."""
    from rrag_kernels.pipelines.mirage import MirageDefense

    defense = MirageDefense(nli=f"llm:{smollm2.base_url}", units="domain")
    assert type(defense.nli).__name__ == "LLMJudgeNLI"
    passages = [{"text": "The bridge opened in 1932 after six years of work.", "url": "https://a.org/x"},
                {"text": "The bridge opened in 1932 after six years of building.", "url": "https://b.org/y"},
                {"text": "The bridge opened in 1923 after six years of work.", "url": "https://c.org/z"}]
    result = defense.defend("When did the bridge open?", passages)
    assert result.error is None and len(result.claims) == 3 and result.stats["n_pairs"] >= 1
    assert defense.nli.stats["requests"] == 2 * result.stats["n_pairs"]
