"""OpenAIChatLLM against a tiny local stdlib HTTP server: retries, backoff, errors, timeouts.

The stub answers each POST with the next scripted action (a status and body, a delay, a
dropped connection), records what it received, and counts concurrent requests. No model is
needed; the real llama.cpp server is exercised in test_llm.py.
"""

from __future__ import annotations

import json
import logging
import re
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from rrag_kernels.models import LLM, LLMConnectionError, LLMError, LLMTimeoutError, OpenAIChatLLM

Q = [{"role": "user", "content": "hi"}]


def completion(text="hello", prompt_tokens=3, completion_tokens=2, **extra):
    body = {"id": "x", "object": "chat.completion", "model": "stub",
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens}}
    body.update(extra)
    return body


class Stub:
    """Scripted actions: ("json", status, body[, headers]), ("raw", status, bytes), ("sleep", s), ("drop",)."""

    def __init__(self):
        self.actions = []
        self.default = ("json", 200, completion())
        self.requests = []
        self.lock = threading.Lock()
        self.generation = 0  # bumped by reset(): a request left over from an earlier test is not counted
        self.active = 0
        self.max_active = 0
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def do_POST(self):
                length = int(self.headers.get("Content-Length", 0))
                data = self.rfile.read(length)
                with stub.lock:
                    stub.requests.append({"path": self.path, "headers": dict(self.headers),
                                          "body": json.loads(data)})
                    action = stub.actions.pop(0) if stub.actions else stub.default
                    stub.active += 1
                    stub.max_active = max(stub.max_active, stub.active)
                    self.generation = stub.generation
                self.counted = True
                try:
                    self._act(action)
                except OSError:  # the client gave up (timeout tests)
                    pass
                finally:
                    self._done()

            def _done(self):
                # Before the answer goes out: once the client has it, it may send the next
                # request, which must not find this one still counted.
                if self.counted:
                    self.counted = False
                    with stub.lock:
                        if self.generation == stub.generation:
                            stub.active -= 1

            def _act(self, action):
                kind = action[0]
                if kind == "sleep":
                    time.sleep(action[1])
                    action = ("json", 200, completion())
                    kind = "json"
                self._done()
                if kind == "drop":
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                status = action[1]
                payload = json.dumps(action[2]).encode() if kind == "json" else action[2]
                headers = action[3] if len(action) > 3 else {}
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(payload)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def reset(self, *actions):
        with self.lock:
            self.actions = list(actions)
            self.requests = []
            self.generation += 1
            self.active = 0
            self.max_active = 0

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def stub():
    s = Stub()
    yield s
    s.close()


@pytest.fixture
def client_for(stub):
    def make(*actions, **kwargs):
        stub.reset(*actions)
        kwargs.setdefault("backoff", 0.01)
        kwargs.setdefault("read_timeout", 5.0)
        kwargs.setdefault("api_key_env", None)
        return OpenAIChatLLM(stub.url, **kwargs)
    return make


def retry_delays(caplog):
    return [float(m.group(1)) for r in caplog.records
            if (m := re.search(r"retry \d+/\d+ in ([0-9.]+) s", r.getMessage()))]


def test_a_plain_call_and_what_is_sent(client_for, stub):
    llm = client_for(model="m1", api_key="sk-test")
    assert isinstance(llm, LLM)
    r = llm.chat(Q, max_tokens=5, temperature=0.2, stop="\n", seed=3, response_format={"type": "json_object"},
                 top_logprobs=2)
    assert (r.text, r.prompt_tokens, r.completion_tokens, r.finish_reason, r.model) == ("hello", 3, 2, "stop", "stub")
    assert r.seconds > 0 and r.logprobs is None  # asked for, not returned by this server
    (req,) = stub.requests
    assert req["path"] == "/v1/chat/completions"
    assert req["headers"]["Authorization"] == "Bearer sk-test"
    assert req["body"] == {"model": "m1", "messages": Q, "max_tokens": 5, "temperature": 0.2, "stop": ["\n"],
                           "seed": 3, "response_format": {"type": "json_object"}, "logprobs": True,
                           "top_logprobs": 2, "stream": False}
    assert "sk-test" not in repr(llm)


def test_logprobs_and_timings_are_read(client_for):
    lp = {"content": [{"token": "he", "logprob": -0.5, "top_logprobs": [{"token": "he", "logprob": -0.5},
                                                                        {"token": "hi", "logprob": -1.5}]},
                      {"token": "llo", "logprob": -0.1, "top_logprobs": []}]}
    body = completion("hello", 4, 2, timings={"prompt_n": 3, "prompt_ms": 30.0, "predicted_n": 2,
                                              "predicted_ms": 20.0})
    body["choices"][0]["logprobs"] = lp
    llm = client_for(("json", 200, body))
    r = llm.chat(Q, top_logprobs=2)
    assert [(t.token, t.logprob) for t in r.logprobs] == [("he", -0.5), ("llo", -0.1)]
    assert r.logprobs[0].top == (("he", -0.5), ("hi", -1.5))
    assert r.prefill_tokens == 3 and r.prefill_tok_s == pytest.approx(100.0) and r.decode_tok_s == pytest.approx(100.0)
    u = llm.usage()
    assert u.timed_calls == 1 and u.prefill_tok_s == pytest.approx(100.0) and u.decode_tok_s == pytest.approx(100.0)


def test_500_then_200_is_retried_with_backoff(client_for, stub, caplog):
    caplog.set_level(logging.INFO, logger="rrag_kernels.llm")
    llm = client_for(("json", 500, {"error": {"message": "hiccup"}}), ("json", 502, {}), backoff=0.02)
    assert llm.chat(Q).text == "hello"
    assert len(stub.requests) == 3
    u = llm.usage()
    assert (u.calls, u.retries, u.failures, u.prompt_tokens, u.completion_tokens) == (1, 2, 0, 3, 2)
    d1, d2 = retry_delays(caplog)
    assert 0.01 <= d1 <= 0.02 and 0.02 <= d2 <= 0.04  # backoff * 2**k times a factor in [0.5, 1]
    assert "hiccup" in caplog.records[0].getMessage()


def test_429_is_retried_then_fails_with_the_status(client_for, stub, caplog):
    caplog.set_level(logging.INFO, logger="rrag_kernels.llm")
    busy = ("json", 429, {"error": {"message": "rate limited", "type": "rate_limit"}}, {"Retry-After": "0.05"})
    llm = client_for(busy, busy, busy, max_retries=2, backoff=0.0)
    with pytest.raises(LLMError) as info:
        llm.chat(Q)
    err = info.value
    assert (err.status, err.attempts, err.server_message) == (429, 3, "rate limited")
    assert "status 429" in str(err) and "rate limited" in str(err) and "after 3 attempts" in str(err)
    assert len(stub.requests) == 3
    assert retry_delays(caplog) == [0.05, 0.05]  # Retry-After honoured over a zero backoff
    u = llm.usage()
    assert (u.calls, u.retries, u.failures) == (1, 2, 1)


def test_400_is_not_retried(client_for, stub):
    llm = client_for(("json", 400, {"error": {"code": 400, "message": "Expected 'messages' to be an array"}}))
    with pytest.raises(LLMError, match="Expected 'messages' to be an array") as info:
        llm.chat(Q)
    assert info.value.status == 400 and info.value.attempts == 1
    assert not isinstance(info.value, (LLMTimeoutError, LLMConnectionError))
    assert len(stub.requests) == 1 and llm.usage().retries == 0


def test_an_error_body_that_is_not_json_is_quoted(client_for):
    llm = client_for(("raw", 503, b"<html>Service Unavailable</html>"), max_retries=0)
    with pytest.raises(LLMError, match="Service Unavailable") as info:
        llm.chat(Q)
    assert info.value.status == 503


@pytest.mark.parametrize("action, match", [
    (("raw", 200, b'{"choices": [{"message": '), "malformed response: the body is not JSON"),
    (("json", 200, {"object": "something else"}), "malformed response"),
    (("json", 200, {"choices": []}), "malformed response"),
    (("json", 200, {"error": {"message": "model not loaded", "code": 503}}), "model not loaded"),
])
def test_malformed_bodies_raise_llm_error_without_retry(client_for, stub, action, match):
    llm = client_for(action)
    with pytest.raises(LLMError, match=match):
        llm.chat(Q)
    assert len(stub.requests) == 1 and llm.usage().failures == 1


def test_slow_response_times_out_and_is_not_retried(client_for, stub):
    llm = client_for(("sleep", 2.0), read_timeout=0.2, max_retries=3)
    with pytest.raises(LLMTimeoutError, match="read timeout") as info:
        llm.chat(Q)
    assert isinstance(info.value, LLMError) and info.value.status is None
    assert len(stub.requests) == 1
    u = llm.usage()
    assert (u.calls, u.retries, u.failures) == (1, 0, 1)


def test_dropped_connection_is_retried(client_for, stub):
    llm = client_for(("drop",), ("drop",))
    assert llm.chat(Q).text == "hello"
    assert len(stub.requests) == 3 and llm.usage().retries == 2
    llm = client_for(("drop",), ("drop",), max_retries=1)
    with pytest.raises(LLMConnectionError, match="connection failed") as info:
        llm.chat(Q)
    assert info.value.attempts == 2


def test_refused_connection_raises_after_retries():
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    llm = OpenAIChatLLM(f"http://127.0.0.1:{port}", max_retries=2, backoff=0.01, connect_timeout=2.0,
                        api_key_env=None)
    with pytest.raises(LLMConnectionError, match="cannot connect") as info:
        llm.chat(Q)
    assert info.value.attempts == 3 and f"127.0.0.1:{port}" in str(info.value)
    u = llm.usage()
    assert (u.calls, u.retries, u.failures, u.prompt_tokens) == (1, 2, 1, 0)


def test_concurrency_limit_is_shared_by_threads(client_for, stub):
    llm = client_for(*[("sleep", 0.15)] * 6, max_concurrency=2)
    results, errors = [], []

    def worker():
        try:
            results.append(llm.chat(Q).text)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert not errors and results == ["hello"] * 6
    assert 1 <= stub.max_active <= 2
    u = llm.usage()
    assert u.calls == 6 and 1 <= u.max_in_flight <= 2


def test_api_key_from_the_environment(client_for, stub, monkeypatch):
    monkeypatch.setenv("RRAG_TEST_LLM_KEY", "env-key")
    client_for(api_key="arg-key", api_key_env="RRAG_TEST_LLM_KEY").chat(Q)
    assert stub.requests[0]["headers"]["Authorization"] == "Bearer arg-key"
    client_for(api_key_env=None).chat(Q)
    assert "Authorization" not in stub.requests[0]["headers"]
    monkeypatch.setenv("OPENAI_API_KEY", "default-env")
    stub.reset()
    OpenAIChatLLM(stub.url).chat(Q)
    assert stub.requests[0]["headers"]["Authorization"] == "Bearer default-env"


def test_env_key_is_sent(client_for, stub, monkeypatch):
    monkeypatch.setenv("RRAG_TEST_LLM_KEY", "env-key")
    client_for(api_key_env="RRAG_TEST_LLM_KEY").chat(Q)
    assert stub.requests[0]["headers"]["Authorization"] == "Bearer env-key"


def test_usage_reads_and_resets(client_for):
    llm = client_for()
    llm.chat(Q)
    llm.chat(Q)
    u = llm.usage(reset=True)
    assert (u.calls, u.prompt_tokens, u.completion_tokens, u.timed_calls) == (2, 6, 4, 0)
    assert u.seconds > 0 and u.decode_tok_s is None
    assert llm.usage().calls == 0 and llm.usage().seconds == 0.0
    assert set(u.as_dict()) >= {"calls", "retries", "failures", "prompt_tokens", "completion_tokens", "seconds",
                                "prefill_tok_s", "decode_tok_s"}


@pytest.mark.parametrize("base, url", [
    ("http://127.0.0.1:8000", "http://127.0.0.1:8000/v1/chat/completions"),
    ("http://127.0.0.1:8000/", "http://127.0.0.1:8000/v1/chat/completions"),
    ("http://127.0.0.1:8000/v1/", "http://127.0.0.1:8000/v1/chat/completions"),
    ("https://api.example.com/openai/v1", "https://api.example.com/openai/v1/chat/completions"),
])
def test_base_url_forms(base, url):
    assert OpenAIChatLLM(base, api_key_env=None).url == url


@pytest.mark.parametrize("kwargs, exc, match", [
    ({"base_url": "ftp://x"}, ValueError, "base_url must start with http"),
    ({"base_url": "http://"}, ValueError, "base_url has no host"),
    ({"base_url": 5}, TypeError, "base_url"),
    ({"read_timeout": 0}, ValueError, "read_timeout"),
    ({"connect_timeout": "1"}, TypeError, "connect_timeout"),
    ({"max_retries": -1}, ValueError, "max_retries"),
    ({"max_concurrency": 0}, ValueError, "max_concurrency"),
    ({"backoff": -1.0}, ValueError, "backoff"),
    ({"headers": {"X": 1}}, TypeError, "headers"),
])
def test_constructor_checks(kwargs, exc, match):
    kwargs = {"base_url": "http://127.0.0.1:1", **kwargs}
    with pytest.raises(exc, match=match):
        OpenAIChatLLM(**kwargs)


@pytest.mark.parametrize("kwargs, exc, match", [
    ({"messages": []}, ValueError, "messages"),
    ({"messages": [{"role": "user", "content": 3}]}, TypeError, r"messages\[0\]\['content'\]"),
    ({"max_tokens": 0}, ValueError, "max_tokens"),
    ({"max_tokens": 2.0}, TypeError, "max_tokens"),
    ({"temperature": float("nan")}, ValueError, "temperature"),
    ({"temperature": -0.1}, ValueError, "temperature"),
    ({"stop": [""]}, ValueError, r"stop\[0\]"),
    ({"stop": 3}, TypeError, "stop"),
    ({"seed": -1}, ValueError, "seed"),
    ({"seed": True}, TypeError, "seed"),
    ({"response_format": {"type": "yaml"}}, ValueError, r"response_format\['type'\]"),
    ({"response_format": "json"}, TypeError, "response_format"),
    ({"top_logprobs": 21}, ValueError, "top_logprobs"),
    ({"top_logprobs": 1.0}, TypeError, "top_logprobs"),
])
def test_bad_chat_arguments_send_nothing(client_for, stub, kwargs, exc, match):
    llm = client_for()
    kwargs = {"messages": Q, **kwargs}
    with pytest.raises(exc, match=match):
        llm.chat(kwargs.pop("messages"), **kwargs)
    assert stub.requests == [] and llm.usage().calls == 0
