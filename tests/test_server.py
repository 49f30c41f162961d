"""The HTTP server (``rrag_kernels.serve``, ``rrag serve``) over real HTTP on 127.0.0.1.

Each server is uvicorn in a background thread on an ephemeral port, configured by
:func:`rrag_kernels.serve.uvicorn_config` exactly as ``rrag serve`` runs it; clients are
httpx and, where the wire matters (declared lengths, chunked bodies, trickling clients),
raw sockets. Checked:

* ``/defend`` answers the records of :meth:`MirageDefense.defend_batch` in process and of
  ``rrag defend`` (timings aside); an item on which the scorer fails is an error record and
  the other items' results are unchanged (count in = count out, a failure summary);
* ``/filter`` keeps what :meth:`ClaimConformal.filter` keeps and writes what ``rrag conformal
  filter`` writes; an unknown group is an error record; no calibration is 503;
* malformed JSON 400, a non-JSON Content-Type 415, the wrong shape or types 422, a declared
  body over the limit 413 before the body is read, a streamed body over it 413, too many
  items / passages / claims 413, each a JSON error;
* no phase waits on a client without a bound: a trickled body is 408 within the body
  deadline, trickled headers and idle connections are closed within the header / keep-alive
  deadlines, and other clients are served meanwhile;
* work that overruns the request timeout is 504, a saturated server 503, and the event loop
  keeps answering while a defense runs;
* ``rrag serve`` with bad arguments exits 2 with a usage message, and really serves.

Model-free throughout (the lexical NLI scorer); the file runs in well under 30 s.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from importlib import resources
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("fastapi")
uvicorn = pytest.importorskip("uvicorn")
httpx = pytest.importorskip("httpx")

import rrag_kernels  # noqa: E402
from rrag_kernels.__main__ import main  # noqa: E402
from rrag_kernels.cli.common import jsonable  # noqa: E402
from rrag_kernels.cli.defend import defend_record  # noqa: E402
from rrag_kernels.models import nli  # noqa: E402
from rrag_kernels.pipelines.conformal import ClaimConformal  # noqa: E402
from rrag_kernels.pipelines.mirage import MirageDefense  # noqa: E402
from rrag_kernels.serve import ServerLimits, create_app, uvicorn_config  # noqa: E402

LEXICAL = nli.load("lexical")
TRIGGER = "Zanzibar"  # the faulty scorer raises on any call whose texts contain it
#: Small limits, so that every one of them is reached quickly.
LIMITS = ServerLimits(max_body_bytes=64 * 1024, max_items=8, max_passages=12, max_claims=20, request_timeout_s=20,
                      body_timeout_s=1.0, header_timeout_s=1.0, keep_alive_s=1.0, max_concurrency=2)
#: Every wait on the server is bounded by this (a hung server fails the test, never the run).
WAIT = 5.0


class FaultyNLI:
    """The lexical scorer, except that a call with ``TRIGGER`` in its texts raises."""

    labels = LEXICAL.labels

    def predict_proba(self, premises, hypotheses):
        if any(TRIGGER in t for t in list(premises) + list(hypotheses)):
            raise RuntimeError("nli backend crashed")
        return LEXICAL.predict_proba(premises, hypotheses)


class BlockingNLI:
    """The lexical scorer, held until ``release`` is set (or WAIT passes): slow work on demand."""

    labels = LEXICAL.labels

    def __init__(self) -> None:
        self.release = threading.Event()
        self.entered = threading.Event()

    def predict_proba(self, premises, hypotheses):
        self.entered.set()
        self.release.wait(WAIT)
        return LEXICAL.predict_proba(premises, hypotheses)


# =========================================================================== data


def _sample_items() -> list[dict]:
    sample = json.loads(resources.files("rrag_kernels").joinpath("data/mirage_sample.json").read_text())
    items = []
    for n, q in enumerate(sample["questions"]):
        passages = [{k: p[k] for k in ("text", "url", "title", "retrieval_score")} for p in q["passages"]]
        items.append({"id": f"q{n}", "question": q["question"], "passages": passages})
    return items


ITEMS = _sample_items()
FAULTY_ITEM = {"id": "bad", "question": "Where is Zanzibar?",
               "passages": [{"text": "Zanzibar is an archipelago off Tanzania.", "url": "https://a.example.org/z",
                             "retrieval_score": 0.9},
                            {"text": "Zanzibar is an archipelago in the Indian Ocean.",
                             "url": "https://b.example.com/z",
                             "retrieval_score": 0.8}]}


def _calibrated(seed: int = 0, groups: list[str] | None = None) -> ClaimConformal:
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 6, size=40)
    offsets = np.r_[0, np.cumsum(sizes)]
    scores = rng.random(offsets[-1])
    labels = rng.random(offsets[-1]) < scores  # higher scores more often supported
    return ClaimConformal(alpha=0.2).calibrate(scores, labels, offsets, groups=groups)


def _responses(seed: int = 1, n: int = 5) -> list[dict]:
    rng = np.random.default_rng(seed)
    out = []
    for r in range(n):
        claims = [{"text": f"claim {r}.{c}", "score": float(rng.random())} for c in range(int(rng.integers(0, 6)))]
        out.append({"id": r, "prompt": f"prompt {r}", "claims": claims})
    return out


def _no_timings(rec: dict) -> dict:
    rec = json.loads(json.dumps(rec))
    rec.get("stats", {}).pop("timings", None)
    return rec


# =========================================================================== servers


@contextlib.contextmanager
def running(app):
    """``app`` on uvicorn in a thread, on an ephemeral port of 127.0.0.1: yields the base URL."""
    server = uvicorn.Server(uvicorn_config(app, host="127.0.0.1", port=0, log_level="warning", log_config=None))
    thread = threading.Thread(target=server.run, name="uvicorn-test", daemon=True)
    thread.start()
    deadline = time.monotonic() + WAIT
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(WAIT)
        assert not thread.is_alive(), "the server did not stop"


@pytest.fixture(scope="module")
def calibration(tmp_path_factory) -> tuple[ClaimConformal, Path]:
    cc = _calibrated()
    path = tmp_path_factory.mktemp("cal") / "cal.json"
    cc.save(path)
    return cc, path


@pytest.fixture(scope="module")
def defense() -> MirageDefense:
    return MirageDefense(nli=FaultyNLI())


@pytest.fixture(scope="module")
def url(defense, calibration):
    """The main server: a defense (lexical, faulty on TRIGGER), a calibration loaded from its
    file, the small LIMITS."""
    with running(create_app(defense=defense, conformal=calibration[1], limits=LIMITS)) as base:
        yield base


@pytest.fixture(scope="module")
def client(url):
    with httpx.Client(base_url=url, timeout=WAIT) as c:
        yield c


@contextlib.contextmanager
def raw(url: str, timeout: float = 0.2):
    host, port = url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=WAIT)
    sock.settimeout(timeout)
    try:
        yield sock
    finally:
        sock.close()


def _read_until_closed(sock: socket.socket, limit_s: float = WAIT) -> tuple[bytes, float, bool]:
    """(everything received, seconds until the server closed, whether it closed) within limit_s."""
    t0 = time.monotonic()
    data = b""
    while time.monotonic() - t0 < limit_s:
        try:
            chunk = sock.recv(65536)
        except socket.timeout:
            continue
        except ConnectionResetError:
            return data, time.monotonic() - t0, True
        if not chunk:
            return data, time.monotonic() - t0, True
        data += chunk
    return data, time.monotonic() - t0, False


def _status(response: bytes) -> int:
    m = re.match(rb"HTTP/1\.1 (\d{3}) ", response)
    assert m, response[:200]
    return int(m.group(1))


def _json_body(response: bytes) -> dict:
    return json.loads(response.split(b"\r\n\r\n", 1)[1])


# =========================================================================== health


def test_health_reports_version_what_is_loaded_and_limits(client, calibration):
    r = client.get("/health")
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    h = r.json()
    assert h["status"] == "ok" and h["version"] == rrag_kernels.__version__
    assert h["defense"]["nli"] == "FaultyNLI" and h["defense"]["params"]["mode"] == "corroboration"
    assert h["conformal"] == json.loads(calibration[1].read_text())  # the file, as loaded
    assert h["limits"] == LIMITS.as_dict() and h["busy"] == 0


# =========================================================================== /defend


def test_defend_equals_defend_batch_in_process(client, defense):
    r = client.post("/defend", json={"items": ITEMS, "dropped": True})
    assert r.status_code == 200
    body = r.json()
    expected = [defend_record(n, row, res, True)
                for n, (row, res) in enumerate(zip(ITEMS, defense.defend_batch(ITEMS, progress=False)), 1)]
    assert [_no_timings(x) for x in body["results"]] == [_no_timings(jsonable(x)) for x in expected]
    assert any(x["dropped"] for x in body["results"]) and any(x["kept"] for x in body["results"])
    assert body["summary"]["n"] == len(ITEMS) and body["summary"]["n_failed"] == 0
    assert body["summary"]["errors"] == []
    assert body["summary"]["n_gate_passed"] == sum(x["gate_passed"] for x in body["results"])
    without = client.post("/defend", json={"items": ITEMS}).json()["results"]  # dropped defaults to false
    assert all("dropped" not in x for x in without)
    assert [x["kept"] for x in without] == [x["kept"] for x in body["results"]]


def test_defend_equals_the_defend_command(client, tmp_path, capsys):
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    src.write_text("".join(json.dumps(x) + "\n" for x in ITEMS))
    assert main(["defend", str(src), str(out), "--nli", "lexical", "--dropped", "--quiet"]) == 0
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    served = client.post("/defend", json={"items": ITEMS, "dropped": True}).json()["results"]
    assert [_no_timings(x) for x in served] == [_no_timings(x) for x in lines]


def test_a_failing_item_is_an_error_record_and_the_others_come_back(client, defense):
    items = [ITEMS[0], FAULTY_ITEM, ITEMS[1]]
    r = client.post("/defend", json={"items": items})
    assert r.status_code == 200
    body = r.json()
    assert len(body["results"]) == 3  # count in = count out
    bad = body["results"][1]
    assert bad["line"] == 2 and bad["id"] == "bad" and bad["error"] == "RuntimeError: nli backend crashed"
    assert bad["gate_passed"] is False and bad["fallback"] == "parametric" and "Where is Zanzibar?" in bad["prompt"]
    alone = client.post("/defend", json={"items": [ITEMS[0], ITEMS[1]]}).json()["results"]
    for got, want in zip([body["results"][0], body["results"][2]], alone):
        want = {**want, "line": got["line"]}
        assert _no_timings(got) == _no_timings(want)  # unchanged by the failing neighbour
    assert body["summary"] == {**body["summary"], "n": 3, "n_failed": 1,
                               "errors": [{"line": 2, "id": "bad", "error": "RuntimeError: nli backend crashed"}]}


def test_defend_accepts_no_items_and_ignores_unknown_item_keys(client):
    assert client.post("/defend", json={"items": []}).json()["summary"]["n"] == 0
    passages = [{**p, "label": "clean", "pid": 3} for p in ITEMS[0]["passages"]]
    extra = [{**ITEMS[0], "answers": ["x"], "passages": passages}]
    a = client.post("/defend", json={"items": extra}).json()["results"]
    b = client.post("/defend", json={"items": ITEMS[:1]}).json()["results"]
    assert [_no_timings(x) for x in a] == [_no_timings(x) for x in b]


# =========================================================================== /filter


def test_filter_equals_claimconformal_filter(client, calibration):
    cc = calibration[0]
    responses = _responses()
    r = client.post("/filter", json={"responses": responses})
    assert r.status_code == 200
    body = r.json()
    sizes = [len(x["claims"]) for x in responses]
    scores = np.array([c["score"] for x in responses for c in x["claims"]])
    keep = cc.filter(scores, np.r_[0, np.cumsum(sizes)])
    assert [c["kept"] for rec in body["results"] for c in rec["claims"]] == keep.tolist()
    assert 0 < keep.sum() < len(keep)  # the threshold cuts somewhere in this data
    assert all(rec["q_hat"] == cc.q_hat for rec in body["results"]) and body["summary"]["q_hat"] == cc.q_hat
    assert [rec["id"] for rec in body["results"]] == [x["id"] for x in responses]
    assert [rec["kept"] for rec in body["results"]] == [[c["text"] for c in rec["claims"] if c["kept"]]
                                                       for rec in body["results"]]
    assert body["summary"]["n"] == len(responses) and body["summary"]["n_failed"] == 0


def test_filter_equals_the_conformal_filter_command(client, calibration, tmp_path):
    src, out = tmp_path / "r.jsonl", tmp_path / "kept.jsonl"
    responses = _responses(seed=7)
    src.write_text("".join(json.dumps(x) + "\n" for x in responses))
    assert main(["conformal", "filter", str(calibration[1]), str(src), str(out), "--quiet"]) == 0
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert client.post("/filter", json={"responses": responses}).json()["results"] == lines


def test_lone_surrogates_in_echoed_fields_are_returned_not_a_500(client):
    # issue 26: a valid JSON escape that UTF-8 cannot encode used to fail the response encoder
    item = dict(ITEMS[0], id="q\ud800")
    r = client.post("/defend", content=json.dumps({"items": [item, ITEMS[1]]}),
                    headers={"content-type": "application/json"})
    assert r.status_code == 200 and r.content.isascii()
    assert [x["id"] for x in r.json()["results"]] == ["q\ud800", ITEMS[1].get("id")]
    responses = _responses()[:2]
    responses[0]["id"] = "r\ud800"
    responses[1]["prompt"] = "p\udfff"
    r = client.post("/filter", content=json.dumps({"responses": responses}),
                    headers={"content-type": "application/json"})
    assert r.status_code == 200
    assert r.json()["results"][0]["id"] == "r\ud800" and r.json()["results"][1]["prompt"] == "p\udfff"
    assert client.get("/health").status_code == 200


def test_filter_unknown_group_is_an_error_record_and_no_defense_is_503():
    groups = ["news" if k % 2 else "bio" for k in range(40)]
    cc = _calibrated(groups=groups)
    app = create_app(conformal=cc, limits=LIMITS)  # no defense
    with running(app) as base, httpx.Client(base_url=base, timeout=WAIT) as c:
        responses = [{"group": "bio", "claims": [{"text": "a", "score": 0.9}]},
                     {"group": "sports", "claims": [{"text": "b", "score": 0.9}]},
                     {"claims": [{"subclaim": "c", "score": 0.1}]}]  # no group: an error record too
        body = c.post("/filter", json={"responses": responses}).json()
        assert len(body["results"]) == 3 and body["summary"]["n_failed"] == 2
        assert body["results"][0]["q_hat"] == cc.q_hat["bio"]
        assert body["results"][0]["kept"] == (["a"] if 0.9 >= cc.q_hat["bio"] else [])
        assert "'sports' is not a group of the calibration" in body["results"][1]["error"]
        assert body["results"][2]["line"] == 3 and "error" in body["results"][2]
        r = c.post("/defend", json={"items": ITEMS})
        assert r.status_code == 503 and "no MIRAGE defense" in r.json()["error"]


# =========================================================================== malformed requests


@pytest.mark.parametrize("body", [b'{"items": [', b"not json", b'{"items": [] ]', b"\xff\xfe{}"])
def test_malformed_json_is_400_with_a_json_error(client, body):
    r = client.post("/defend", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json()["status"] == 400
    assert r.json()["error"].startswith("malformed JSON")


def test_a_non_json_content_type_is_415(client):
    r = client.post("/defend", content=json.dumps({"items": ITEMS}), headers={"content-type": "text/plain"})
    assert r.status_code == 415 and "application/json" in r.json()["error"]
    r = client.post("/defend", content=json.dumps({"items": []}))  # no Content-Type at all
    assert r.status_code == 415 and r.json()["error"] == "Content-Type: expected application/json, got none"
    r = client.post("/defend", content=json.dumps({"items": []}),
                    headers={"content-type": "application/json; charset=utf-8"})
    assert r.status_code == 200


@pytest.mark.parametrize("path, body, field", [
    ("/defend", {"itemz": []}, "items"),
    ("/defend", {"items": {"question": "q"}}, "items"),
    ("/defend", {"items": [{"passages": []}]}, "items.0.question"),
    ("/defend", {"items": [{"question": 3, "passages": []}]}, "items.0.question"),
    ("/defend", {"items": [{"question": "  ", "passages": []}]}, "items.0.question"),
    ("/defend", {"items": [{"question": "q", "passages": "text"}]}, "items.0.passages"),
    ("/defend", {"items": [{"question": "q", "passages": [{"url": "x"}]}]}, "items.0.passages.0.text"),
    ("/defend", {"items": [{"question": "q", "passages": [{"text": "a", "retrieval_score": "0.9"}]}]},
     "items.0.passages.0.retrieval_score"),
    ("/defend", {"items": [{"question": "q", "passages": [{"text": "a", "retrieval_score": True}]}]},
     "items.0.passages.0.retrieval_score"),
    ("/defend", {"items": [], "dropped": "yes"}, "dropped"),
    ("/defend", {"items": [], "extra": 1}, "extra"),
    ("/filter", {"responses": [{"claims": [{"text": "a"}]}]}, "responses.0.claims.0.score"),
    ("/filter", {"responses": [{"claims": [{"text": "a", "score": False}]}]}, "responses.0.claims.0.score"),
    ("/filter", {"responses": [{"claims": [{"score": 0.5}]}]}, "responses.0.claims.0.text"),
    ("/filter", [], "body"),
])
def test_the_wrong_shape_or_types_are_422_naming_the_field(client, path, body, field):
    r = client.post(path, json=body)
    assert r.status_code == 422, r.text
    err = r.json()
    assert err["status"] == 422 and err["error"].startswith(field + ":"), err["error"]
    assert err["detail"] and all("input" not in d for d in err["detail"])  # the input is never echoed


def test_nan_is_422_not_a_score(client):
    body = b'{"items": [{"question": "q", "passages": [{"text": "a", "retrieval_score": NaN}]}]}'
    r = client.post("/defend", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 422 and "finite" in r.json()["error"]
    body = b'{"responses": [{"claims": [{"text": "a", "score": Infinity}]}]}'
    assert client.post("/filter", content=body, headers={"content-type": "application/json"}).status_code == 422


@pytest.mark.parametrize("body, why", [
    ('{"items": []}'.encode("utf-16"), "byte-order mark"),  # with its BOM
    ('{"items": []}'.encode("utf-16-le"), "UTF-16 or UTF-32"),
    (b'{"items": [{"question": "\xff", "passages": []}]}', "not UTF-8"),
    (b"\xef\xbb\xbf" + b'{"items": []}', "byte-order mark"),
    (b'{"items": [], "items": [{"question": "q", "passages": []}]}', "'items' appears twice"),
    (b'{"items": [{"question": "q", "question": "r", "passages": []}]}', "'question' appears twice"),
])
def test_bodies_that_say_two_things_or_are_not_utf8_are_400(client, body, why):
    r = client.post("/defend", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 400 and why in r.json()["error"], r.text
    # the same keys in different objects are no duplicate
    ok = b'{"items": [{"question": "q", "passages": []}, {"question": "r", "passages": []}]}'
    assert client.post("/defend", content=ok, headers={"content-type": "application/json"}).status_code == 200


def test_health_answers_head(client):
    r = client.head("/health")
    assert r.status_code == 200 and r.headers["content-type"] == "application/json" and r.content == b""


def test_unknown_paths_and_methods_are_json_errors(client):
    assert client.get("/nope").status_code == 404 and client.get("/nope").json()["status"] == 404
    assert client.get("/defend").status_code == 405 and "error" in client.get("/defend").json()


# =========================================================================== limits


def test_a_declared_body_over_the_limit_is_413_before_it_is_read(url):
    with raw(url) as sock:  # a gigabyte is declared, not a byte is sent: answered at once
        t0 = time.monotonic()
        sock.sendall(b"POST /defend HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
                     b"Expect: 100-continue\r\nContent-Length: 1000000000\r\n\r\n")
        data, elapsed, closed = _read_until_closed(sock)
    assert _status(data) == 413 and closed and elapsed < 1.0  # well inside the 1 s body deadline
    assert b"100 Continue" not in data and b"connection: close" in data.lower()
    assert "over the limit of 65536 bytes" in _json_body(data)["error"]


def test_a_streamed_body_over_the_limit_is_413(url):
    with raw(url) as sock:
        sock.sendall(b"POST /defend HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
                     b"Transfer-Encoding: chunked\r\n\r\n")
        chunk = b"x" * 8192
        for _ in range(LIMITS.max_body_bytes // len(chunk) + 1):  # one chunk past the limit, no end chunk
            sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        data, elapsed, closed = _read_until_closed(sock)
    assert _status(data) == 413 and closed and elapsed < 1.0
    assert _json_body(data)["error"] == "request body is over the limit of 65536 bytes"


def test_a_streamed_body_within_the_limit_is_served(url):
    body = json.dumps({"items": ITEMS[:1]}).encode()
    with httpx.Client(base_url=url, timeout=WAIT) as c:  # a generator body: chunked, no Content-Length
        r = c.post("/defend", content=iter([body[:100], body[100:]]), headers={"content-type": "application/json"})
    assert r.status_code == 200 and r.json()["summary"]["n"] == 1


def test_a_bad_content_length_is_400(url):
    with raw(url) as sock:
        sock.sendall(b"POST /defend HTTP/1.1\r\nHost: t\r\nContent-Length: -5\r\n\r\n")
        data, _, _ = _read_until_closed(sock)
    assert _status(data) == 400  # refused by the HTTP parser or by the middleware, never read


def test_too_many_items_passages_or_claims_is_413(client):
    r = client.post("/defend", json={"items": [ITEMS[0]] * (LIMITS.max_items + 1)})
    assert r.status_code == 413 and r.json()["error"] == "items: 9 is over the limit of 8 (max_items)"
    item = {"question": "q", "passages": [{"text": f"p{k}."} for k in range(LIMITS.max_passages + 1)]}
    r = client.post("/defend", json={"items": [ITEMS[0], item]})
    assert r.status_code == 413 and r.json()["error"].startswith("items[1].passages: 13 is over the limit")
    r = client.post("/filter", json={"responses": [{"claims": [{"text": "c", "score": 0.5}] * 21}]})
    assert r.status_code == 413 and "max_claims" in r.json()["error"]
    r = client.post("/filter", json={"responses": [{"claims": []}] * 9})
    assert r.status_code == 413 and "responses: 9" in r.json()["error"]
    assert client.post("/defend", json={"items": [ITEMS[0]] * LIMITS.max_items}).status_code == 200


# =========================================================================== slow clients


def test_a_stalled_body_is_408_within_the_body_deadline(url, client):
    with raw(url) as sock:
        t0 = time.monotonic()
        sock.sendall(b"POST /defend HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 1000\r\n\r\n{\"items\": [")  # 11 of 1000 bytes, then nothing
        data, elapsed, closed = _read_until_closed(sock)
    assert _status(data) == 408 and closed and LIMITS.body_timeout_s <= elapsed + 0.05 < LIMITS.body_timeout_s + 1.0
    assert _json_body(data)["error"] == "request body not received within 1 s"
    assert client.get("/health").status_code == 200


def test_a_trickled_body_is_cut_off_within_the_body_deadline(url, client):
    """5 bytes every 0.2 s: the server answers 408 and closes at the deadline (the client,
    still sending, may see the close as a reset before it reads the 408)."""
    with raw(url) as sock:
        t0 = time.monotonic()
        sock.sendall(b"POST /defend HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 1000\r\n\r\n")
        data, closed = b"", False
        while time.monotonic() - t0 < WAIT and not closed:  # bounded: at most WAIT seconds
            try:
                sock.sendall(b'{"ite')
                chunk = sock.recv(65536)
                data += chunk
                closed = not chunk
            except socket.timeout:
                pass
            except OSError:  # reset / broken pipe: the server closed the connection
                closed = True
        elapsed = time.monotonic() - t0
    assert closed and elapsed < LIMITS.body_timeout_s + 1.0
    assert not data or _status(data) == 408
    assert client.get("/health").status_code == 200


def test_trickled_headers_and_idle_connections_are_closed_and_others_served(url, client):
    with raw(url) as idle, raw(url) as slow:
        t0 = time.monotonic()
        slow.sendall(b"POST /defend HTTP/1.1\r\n")
        served = []
        closed = {"idle": None, "slow": None}
        while time.monotonic() - t0 < WAIT and None in closed.values():
            try:
                slow.sendall(b"X")  # a header byte every 0.1 s: never a complete request
            except OSError:
                closed["slow"] = closed["slow"] or time.monotonic() - t0
            for name, sock in (("idle", idle), ("slow", slow)):
                if closed[name] is None:
                    sock.settimeout(0.05)
                    try:
                        if sock.recv(1024) == b"":
                            closed[name] = time.monotonic() - t0
                    except socket.timeout:
                        pass
                    except ConnectionResetError:
                        closed[name] = time.monotonic() - t0
            served.append(client.get("/health").status_code)  # meanwhile, others are served
    assert closed["idle"] is not None and closed["idle"] < LIMITS.header_timeout_s + 1.0, closed
    assert closed["slow"] is not None and closed["slow"] < LIMITS.header_timeout_s + 1.0, closed
    assert served and set(served) == {200}


def test_an_idle_keep_alive_connection_is_closed(url):
    with raw(url) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: t\r\n\r\n")
        data, elapsed, closed = _read_until_closed(sock)
    assert _status(data) == 200 and closed and elapsed < LIMITS.keep_alive_s + 1.0


# =========================================================================== timeouts and concurrency


def test_request_timeout_is_504_the_slot_is_held_and_the_loop_stays_free():
    scorer = BlockingNLI()
    limits = ServerLimits(request_timeout_s=0.4, max_concurrency=1)
    with running(create_app(defense=MirageDefense(nli=scorer), limits=limits)) as base, \
            httpx.Client(base_url=base, timeout=WAIT) as c:
        t0 = time.monotonic()
        r = c.post("/defend", json={"items": ITEMS[:1]})
        assert r.status_code == 504 and time.monotonic() - t0 < 0.4 + 1.0
        assert r.json()["error"] == "the defense of 1 item(s) did not finish within the request timeout of 0.4 s"
        assert scorer.entered.is_set()
        t1 = time.monotonic()
        h = c.get("/health")  # the event loop answers while the defense still runs in its thread
        assert h.status_code == 200 and h.json()["busy"] == 1 and time.monotonic() - t1 < 2.0
        busy = c.post("/defend", json={"items": ITEMS[:1]})  # its slot is still held: 503 at once
        assert busy.status_code == 503 and busy.headers["retry-after"] == "1" and "busy" in busy.json()["error"]
        assert c.post("/filter", json={"responses": []}).status_code == 503  # no calibration loaded
        scorer.release.set()
        deadline = time.monotonic() + WAIT
        while c.get("/health").json()["busy"] and time.monotonic() < deadline:
            time.sleep(0.02)
        r = c.post("/defend", json={"items": ITEMS[:1]})
        assert r.status_code == 200 and r.json()["summary"]["n_failed"] == 0


# =========================================================================== the command line


@pytest.mark.parametrize("args, message", [
    (["--port", "-1"], "argument --port: expected a port number in 0..65535"),
    (["--port", "http"], "argument --port"),
    (["--timeout", "0"], "argument --timeout: expected a number of seconds > 0"),
    (["--body-timeout", "nan"], "argument --body-timeout"),
    (["--max-items", "0"], "argument --max-items: expected an integer >= 1"),
    (["--calibration", "no/such.json"], "argument --calibration: no such file"),
    (["--nli", "no-such-scorer", "--port", "0"], "--nli:"),
    (["--mode", "fast"], "argument --mode: invalid choice"),
    (["--no-defense"], "--no-defense: without --calibration the server would serve nothing"),
])
def test_serve_usage_errors_exit_2(capsys, args, message):
    with pytest.raises(SystemExit) as exc:
        main(["serve", *args])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: rrag serve") and message in err and "Traceback" not in err


def test_serve_bad_calibration_and_a_port_in_use_exit_2(capsys, tmp_path, calibration):
    bad = tmp_path / "cal.json"
    bad.write_text('{"format": "rrag_kernels.ClaimConformal"}')
    with pytest.raises(SystemExit) as exc:
        main(["serve", "--calibration", str(bad), "--no-defense"])
    assert exc.value.code == 2 and "--calibration: format_version: missing" in capsys.readouterr().err
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(SystemExit) as exc:
            main(["serve", "--calibration", str(calibration[1]), "--no-defense", "--port", str(taken.getsockname()[1])])
    assert exc.value.code == 2 and "cannot listen on 127.0.0.1:" in capsys.readouterr().err


def test_serve_without_fastapi_is_a_usage_error_naming_the_extra(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "fastapi", None)  # "not installed"
    monkeypatch.delitem(sys.modules, "rrag_kernels.serve.app", raising=False)
    with pytest.raises(SystemExit) as exc:
        main(["serve", "--nli", "lexical"])
    assert exc.value.code == 2 and "pip install 'rrag_kernels[serve]'" in capsys.readouterr().err


def test_rrag_serve_serves_over_http(calibration):
    """The real command in a subprocess: it binds, logs the port, answers, and stops on SIGTERM."""
    env = {**os.environ, "PYTHONPATH": str(Path(rrag_kernels.__file__).parents[1])}
    cmd = [sys.executable, "-m", "rrag_kernels", "serve", "--port", "0", "--nli", "lexical", "--calibration",
           str(calibration[1]), "--max-items", "3", "--log-level", "info"]
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, env=env)
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(x) for x in proc.stderr], daemon=True).start()
    try:
        port, seen = None, []
        deadline = time.monotonic() + 60  # the import of the package on a loaded machine
        while port is None and time.monotonic() < deadline and proc.poll() is None:
            try:
                seen.append(lines.get(timeout=0.5))
            except queue.Empty:
                continue
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", seen[-1])
            port = int(m.group(1)) if m else None
        assert port, "".join(seen)
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=WAIT) as c:
            h = c.get("/health").json()
            assert h["defense"]["nli"] == "LexicalNLI" and h["limits"]["max_items"] == 3
            assert h["conformal"]["q_hat"] == calibration[0].q_hat
            assert c.post("/defend", json={"items": ITEMS}).json()["summary"]["n"] == len(ITEMS)
            assert c.post("/defend", json={"items": ITEMS * 2}).status_code == 413
    finally:
        proc.terminate()  # SIGTERM: uvicorn shuts down gracefully, then re-raises the signal
        rc = proc.wait(WAIT * 2)
    deadline = time.monotonic() + WAIT
    while not any("Application shutdown complete" in x for x in seen) and time.monotonic() < deadline:
        with contextlib.suppress(queue.Empty):
            seen.append(lines.get(timeout=0.2))
    assert rc in (0, -signal.SIGTERM) and any("Application shutdown complete" in x for x in seen), "".join(seen)
