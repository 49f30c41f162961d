"""Fault injection for the models behind the pipelines (issue 13): NLI scorers, embedders,
retrievers and LLM backends that raise, time out, return the wrong shape, NaN or
out-of-range probabilities, or garbage for structured steps.

What is checked, per pipeline face:

* MIRAGE -- ``defend`` raises a clear error (never a passed gate on garbage scores);
  ``defend_batch`` and the ``defend`` CLI give one result per item, the failing item's
  error recorded and every other item's result unchanged (count in = count out).
* ReliableRAG -- ``answer_batch`` with an LLM that times out / raises / returns garbage:
  per-item errors or recorded fallbacks, count in = count out.
* D2F-ReAG -- ``run_batch`` with an LLM / retriever that raises on one question: a
  ``D2FError`` in its place, the others answered.
* Conformal -- an embedder returning NaN or the wrong shape: a clear ``ValueError`` (or a
  per-item error in a batch), never a silently wrong q-hat.

All doubles are model-free and the inputs tiny (the file runs in a few seconds).
"""

from __future__ import annotations

import json
import re
import zlib

import numpy as np
import pytest

from rrag_kernels.__main__ import main
from rrag_kernels.models import ChatResult, LLMError, LLMTimeoutError, ScriptedLLM, nli
from rrag_kernels.pipelines.conformal import ClaimConformal, ConformalRAG, MultiHopRetriever
from rrag_kernels.pipelines.d2f import D2FError, D2FParams, D2FReAG, build_corpus
from rrag_kernels.pipelines.mirage import MirageDefense
from rrag_kernels.pipelines.reliablerag import ChainParams, answer_batch

# =========================================================================== test doubles

LEXICAL = nli.load("lexical")
TRIGGER = "Zanzibar"  # a fault fires only on calls whose texts contain this word


class FaultyNLI:
    """An NLI scorer that behaves like the lexical one, except on calls that contain
    ``TRIGGER`` (or on every call with ``always=True``), where it misbehaves as ``mode`` says."""

    labels = LEXICAL.labels

    def __init__(self, mode: str, *, always: bool = False, times: int | None = None):
        self.mode, self.always, self.times, self.calls, self.faults = mode, always, times, 0, 0

    def predict_proba(self, premises, hypotheses):
        self.calls += 1
        good = np.asarray(LEXICAL.predict_proba(premises, hypotheses), dtype=np.float32)
        hit = self.always or any(TRIGGER in t for t in list(premises) + list(hypotheses))
        if not hit or (self.times is not None and self.faults >= self.times):
            return good
        self.faults += 1
        n = len(premises)
        m = self.mode
        if m == "raise":
            raise RuntimeError("nli backend crashed")
        if m == "timeout":
            raise TimeoutError("nli backend timed out after 30 s")
        if m == "cols":
            return good[:, :2]
        if m == "rows_short":
            return good[: max(n - 1, 0)]
        if m == "rows_long":
            return np.vstack([good, good[:1]])
        if m == "one_row":  # (1, 3) for n pairs: broadcasts silently into any (n, 3) table
            return good[:1]
        if m == "flat":
            return good.reshape(-1)
        if m == "nan":
            out = good.copy()
            out[0] = np.nan
            return out
        if m == "inf":
            out = good.copy()
            out[:, 0] = np.inf
            return out
        if m == "negative":
            out = good.copy()
            out[:, 2] = -0.5
            return out
        if m == "above_one":
            return good * 3.0
        if m == "unnormalised":  # every entry in [0, 1], rows summing to 2.4
            return np.full((n, 3), 0.8, dtype=np.float32)
        if m == "list":
            return good.tolist()
        if m == "strings":
            return np.full((n, 3), "x", dtype=object)
        raise AssertionError(m)


# Every bad-output mode and the error defend() must raise for it (type, message fragment).
BAD_OUTPUTS = {
    "cols": (ValueError, "shape"),
    "rows_short": (ValueError, "shape"),
    "rows_long": (ValueError, "shape"),
    "one_row": (ValueError, "shape"),
    "flat": (ValueError, "shape"),
    "nan": (ValueError, "finite and in [0, 1]"),
    "inf": (ValueError, "finite and in [0, 1]"),
    "negative": (ValueError, "[0, 1]"),
    "above_one": (ValueError, "[0, 1]"),
    "unnormalised": (ValueError, "sum to 1"),
    "strings": (TypeError, "not a float array"),
}
RAISING = {"raise": (RuntimeError, "crashed"), "timeout": (TimeoutError, "timed out")}


def _hash_embed(texts, dim=64):
    out = np.zeros((len(texts), dim), dtype=np.float32)
    for i, text in enumerate(texts):
        for word in re.findall(r"\w+", text.lower()):
            out[i, zlib.crc32(word.encode()) % dim] += 1.0
    norm = np.linalg.norm(out, axis=1, keepdims=True)
    return out / np.where(norm == 0, 1.0, norm)


class FaultyEmbedder:
    """Hashed bag of words; misbehaves as ``mode`` says on calls containing ``TRIGGER``
    (or from call ``after`` on, or always)."""

    def __init__(self, mode: str | None = None, *, always: bool = False, after: int | None = None):
        self.mode, self.always, self.after, self.calls = mode, always, after, 0

    def encode(self, texts):
        self.calls += 1
        good = _hash_embed(list(texts))
        hit = self.always or any(TRIGGER in t for t in texts) or (self.after is not None and self.calls > self.after)
        if self.mode is None or not hit:
            return good
        m = self.mode
        if m == "raise":
            raise RuntimeError("embedder down")
        if m == "timeout":
            raise TimeoutError("embedder timed out")
        if m == "nan":
            out = good.copy()
            out[0, 0] = np.nan
            return out
        if m == "rows_short":
            return good[:-1]
        if m == "flat":
            return good.reshape(-1)
        raise AssertionError(m)


# =========================================================================== MIRAGE

QUESTION = "Where is the Eiffel Tower?"
GOOD = [
    {"text": "The Eiffel Tower is in Paris. It was built in 1889.", "url": "https://en.wikipedia.org/a",
     "retrieval_score": 0.9},
    {"text": "The Eiffel Tower is located in Paris, France. It was completed in 1889.",
     "url": "https://www.britannica.com/b", "retrieval_score": 0.8},
    {"text": "The Eiffel Tower is in Rome. It was built in 1920.", "url": "https://fake-news.example/c",
     "retrieval_score": 0.7},
]
BAD = [dict(p, text=p["text"].replace("Paris", f"Paris near {TRIGGER}")) for p in GOOD]  # triggers the fault


def _items():
    return [{"question": QUESTION, "passages": GOOD}, {"question": QUESTION, "passages": BAD},
            {"question": "When was the Eiffel Tower built?", "passages": GOOD[::-1]}]


def _same(a, b):
    assert a.error is None and b.error is None
    assert (a.gate_passed, a.fallback, a.prompt) == (b.gate_passed, b.fallback, b.prompt)
    assert [(c.text, c.kept, c.score, c.reason) for c in a.claims] == [(c.text, c.kept, c.score, c.reason) for c in b.claims]


def test_mirage_healthy_baseline_has_pairs():
    res = MirageDefense(nli=LEXICAL).defend(QUESTION, BAD)
    assert res.error is None and res.stats["n_pairs"] > 0  # the BAD passages do reach the scorer


@pytest.mark.parametrize("mode", sorted({**BAD_OUTPUTS, **RAISING}))
def test_mirage_defend_raises_clearly(mode):
    exc, fragment = {**BAD_OUTPUTS, **RAISING}[mode]
    with pytest.raises(exc, match=re.escape(fragment)):
        MirageDefense(nli=FaultyNLI(mode)).defend(QUESTION, BAD)


def test_mirage_list_output_is_accepted_and_equal():
    _same(MirageDefense(nli=FaultyNLI("list")).defend(QUESTION, BAD), MirageDefense(nli=LEXICAL).defend(QUESTION, BAD))


@pytest.mark.parametrize("mode", sorted({**BAD_OUTPUTS, **RAISING}))
def test_mirage_defend_batch_isolates_the_failing_item(mode):
    items = _items()
    reference = MirageDefense(nli=LEXICAL).defend_batch(items, progress=False)
    out = MirageDefense(nli=FaultyNLI(mode)).defend_batch(items, progress=False)
    assert len(out) == len(items)
    exc, fragment = {**BAD_OUTPUTS, **RAISING}[mode]
    bad = out[1]
    names = exc if isinstance(exc, tuple) else (exc,)
    assert bad.error is not None and bad.error.split(":")[0] in {e.__name__ for e in names}, bad.error
    assert fragment in bad.error
    assert bad.gate_passed is False and bad.claims == [] and bad.stats["gate_reason"] == "error"
    assert bad.fallback == "parametric" and QUESTION in bad.prompt
    for k in (0, 2):
        _same(out[k], reference[k])


def test_mirage_transient_fault_is_retried_item_by_item():
    """The documented retry: a failing batched NLI pass is redone item by item, so a scorer
    that fails once (a timeout) loses nothing."""
    scorer = FaultyNLI("timeout", always=True, times=1)
    items = _items()
    out = MirageDefense(nli=scorer).defend_batch(items, progress=False)
    reference = MirageDefense(nli=LEXICAL).defend_batch(items, progress=False)
    assert scorer.faults == 1 and scorer.calls == 1 + len(items)
    for a, b in zip(out, reference):
        _same(a, b)


@pytest.mark.parametrize("mode", ["nan", "rows_short", "negative", "unnormalised", "raise"])
def test_mirage_probe_step_validates_scores(mode):
    """Counter-evidence probing (step 4) scores claims against retrieved hits with the same
    scorer: a bad output there must raise too, not silently drop the penalty."""

    class Probe:
        def search(self, query, k):
            return [{"text": f"The Eiffel Tower is not in Paris but in {TRIGGER}."}]

    defense = MirageDefense(nli=FaultyNLI(mode), retriever=Probe())
    exc, fragment = {**BAD_OUTPUTS, **RAISING}[mode]
    with pytest.raises(exc, match=re.escape(fragment)):
        defense.defend(QUESTION, GOOD)
    out = defense.defend_batch(_items(), progress=False)
    assert len(out) == 3 and all(r.error and fragment in r.error for r in out)  # every item probes


@pytest.mark.parametrize("mode", ["raise", "nan", "rows_short"])
def test_mirage_semantic_pairing_embedder_faults(mode):
    defense = MirageDefense(nli=LEXICAL, embedder=FaultyEmbedder(mode), pairing="hybrid")
    with pytest.raises((RuntimeError, ValueError)):
        defense.defend(QUESTION, BAD)
    out = defense.defend_batch(_items(), progress=False)
    assert len(out) == 3 and out[1].error and out[0].error is None and out[2].error is None


def test_mirage_retriever_fault_in_probe():
    class Down:
        def search(self, query, k):
            raise TimeoutError("search timed out")

    out = MirageDefense(nli=LEXICAL, retriever=Down()).defend_batch(_items(), progress=False)
    assert len(out) == 3 and all(r.error == "TimeoutError: search timed out" for r in out)


# --------------------------------------------------------------------------- the defend CLI


@pytest.mark.parametrize("mode", ["raise", "timeout", "nan", "one_row", "unnormalised"])
def test_cli_defend_writes_an_error_record_per_failing_item(mode, tmp_path, monkeypatch, capsys):
    """The CLI builds its scorer with ``rrag_kernels.models.nli.load(--nli)``: patched here."""
    monkeypatch.setattr(nli, "load", lambda name=None, **kw: FaultyNLI(mode))
    rows = [dict(it, id=f"q{k}") for k, it in enumerate(_items())] + [{"id": "q3", "question": QUESTION,
                                                                        "passages": BAD[::-1]}]
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    out = tmp_path / "out.jsonl"
    assert main(["defend", str(src), str(out), "--nli", "whatever"]) == 0
    recs = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    assert [r["id"] for r in recs] == ["q0", "q1", "q2", "q3"]  # count in = count out, in order
    assert [("error" in r) for r in recs] == [False, True, False, True]
    for r in (recs[1], recs[3]):
        assert r["gate_passed"] is False and r["fallback"] == "parametric" and r["prompt"]
    assert all(r["kept"] for r in (recs[0], recs[2]))
    err = capsys.readouterr().err
    assert "defend: 4 items, 2 errors" in err


# =========================================================================== ReliableRAG

def _passage(label, *triples):
    return {"label": label, "triples": [dict(zip(("head", "relation", "tail", "sentence"), t)) for t in triples]}


RR_Q = "In which country was the director of Pan's Labyrinth born?"
RR_PASSAGES = [
    _passage("gold", ("Pan's Labyrinth", "directed by", "Guillermo del Toro", 0)),
    _passage("gold", ("Guillermo del Toro", "born in", "Mexico", 0)),
    _passage("injected", ("Guillermo del Toro", "born in", "Spain", 0)),
]
SMALL = ChainParams(k=3, beams=2, max_chains=2, max_hops=2)


def _router(reader="Mexico", selector=" B", cred="Credibility Score: 8", extract='{"triples": []}', fail=None):
    """A scripted LLM answering by the step its system prompt names; ``fail(step, messages)``
    may return an exception to raise or a str to reply instead."""

    def reply(msgs):
        system = msgs[0]["content"]
        step = ("selector" if system.startswith("Select") else "reader" if system.startswith("Answer")
                else "extraction" if system.startswith("Extract") else "credibility")
        if fail is not None:
            got = fail(step, msgs)
            if isinstance(got, BaseException):
                raise got
            if got is not None:
                return got
        return {"selector": selector, "reader": reader, "extraction": extract, "credibility": cred}[step]

    return ScriptedLLM(reply)


def _rr_rows():
    return [{"question": RR_Q, "passages": RR_PASSAGES},
            {"question": f"{TRIGGER}: " + RR_Q, "passages": RR_PASSAGES},
            {"question": RR_Q, "passages": RR_PASSAGES[::-1]}]


def _only_trigger(exc_or_text, step=None):
    def fail(s, msgs):
        if (step is None or s == step) and any(TRIGGER in m["content"] for m in msgs):
            return exc_or_text
        return None
    return fail


def test_reliablerag_healthy_baseline():
    out = answer_batch(_rr_rows(), llm=_router(), embedder=FaultyEmbedder(), params=SMALL)
    assert [r.answer for r in out] == ["Mexico"] * 3 and all(r.error is None and not r.fallbacks for r in out)


@pytest.mark.parametrize("exc", [LLMTimeoutError("read timed out"), LLMError("HTTP 500")], ids=["timeout", "error"])
def test_reliablerag_reader_backend_failure_is_a_recorded_fallback(exc):
    """The reader's failure is retried once and then recorded as a fallback ("" answer);
    the other rows are untouched."""
    out = answer_batch(_rr_rows(), llm=_router(fail=_only_trigger(exc, "reader")), embedder=FaultyEmbedder(),
                       params=SMALL)
    assert len(out) == 3 and out[0].answer == out[2].answer == "Mexico"
    assert out[1].answer == "" and out[1].fallbacks and out[1].fallbacks[-1]["step"] == "reader"
    assert out[0].fallbacks == [] and out[2].fallbacks == []


@pytest.mark.parametrize("exc", [LLMTimeoutError("read timed out"), LLMError("HTTP 500"), RuntimeError("boom")],
                         ids=["timeout", "error", "runtime"])
def test_reliablerag_every_call_failing_falls_back_at_every_step(exc):
    out = answer_batch(_rr_rows(), llm=_router(fail=_only_trigger(exc)), embedder=FaultyEmbedder(),
                       params=SMALL, credibility="llm")
    assert len(out) == 3 and out[0].answer == out[2].answer == "Mexico" and out[0].error is None
    bad = out[1]  # every step falls back (credibility per passage, selector per hop, the reader): no raise
    assert bad.error is None and bad.answer == ""
    steps = [f["step"] for f in bad.fallbacks]
    assert steps.count("credibility") == len(RR_PASSAGES) and "selector" in steps and steps[-1] == "reader"


@pytest.mark.parametrize("garbage", ["", "{not json", "\x00\x01 ###", "Credibility Score: eleven", "null"])
def test_reliablerag_garbage_structured_replies_fall_back(garbage):
    """Garbage for credibility (a 0-10 score), the selector (a letter) and extraction (JSON):
    each step falls back and records it; the answer still comes from the reader."""
    rows = [{"question": RR_Q, "passages": [{"text": "Guillermo del Toro was born in Mexico."}] + RR_PASSAGES}] \
        + _rr_rows()
    llm = _router(cred=garbage, selector=garbage, extract=garbage)
    out = answer_batch(rows, llm=llm, embedder=FaultyEmbedder(), params=SMALL, credibility="llm")
    assert len(out) == len(rows)
    for r in out:
        assert r.error is None
        steps = {f["step"] for f in r.fallbacks}
        assert "credibility" in steps and "selector" in steps, steps
    assert "extraction" in {f["step"] for f in out[0].fallbacks}  # the passage without triples


@pytest.mark.parametrize("mode,message", [
    ("raise", "RuntimeError: embedder down"), ("timeout", "TimeoutError: embedder timed out"),
    ("nan", "ValueError: query_emb: contains NaN"), ("rows_short", "ValueError: embedder: encode returned shape"),
    ("flat", "ValueError: embedder: encode returned shape")])
def test_reliablerag_embedder_faults_are_per_item_errors(mode, message):
    out = answer_batch(_rr_rows(), llm=_router(), embedder=FaultyEmbedder(mode, after=0), params=SMALL)
    assert len(out) == 3 and all(r.error and message in r.error for r in out), [r.error for r in out]
    emb = FaultyEmbedder(mode)  # only the row whose question has the trigger
    out = answer_batch(_rr_rows(), llm=_router(), embedder=emb, params=SMALL)
    assert [r.error is None for r in out] == [True, False, True], [r.error for r in out]
    assert message in out[1].error and out[0].answer == out[2].answer == "Mexico"


# =========================================================================== D2F-ReAG

D2F_PASSAGES = [
    {"pid": "a", "title": "Pan's Labyrinth", "text": "Pan's Labyrinth is a 2006 film directed by Guillermo del Toro."},
    {"pid": "b", "title": "Guillermo del Toro", "text": "Guillermo del Toro was born in Guadalajara, Mexico."},
]


class WordRetriever:
    def __init__(self, fail_on: str | None = None, exc: Exception | None = None):
        self.passages, self.fail_on, self.exc = build_corpus(D2F_PASSAGES), fail_on, exc

    def search(self, query, k):
        if self.fail_on and self.fail_on in query:
            raise self.exc
        return [dict(p) for p in self.passages[:k]]


def _d2f_llm(fail=None, judge="9", decompose='{"sub_questions": ["Who directed it?"]}'):
    def reply(msgs):
        system = msgs[0]["content"]
        if fail is not None and any(TRIGGER in m["content"] for m in msgs):
            got = fail(system)
            if isinstance(got, BaseException):
                raise got
            if got is not None:
                return got
        if system.startswith("You evaluate"):
            return judge
        if system.startswith("You break"):
            return decompose
        if system.startswith("Give only"):
            return "Mexico"
        if "picks" in system:
            return '{"picks": []}'
        return "Reasoning.\nAnswer: Mexico"
    return ScriptedLLM(reply)


QUESTIONS = ["Where was the director of Pan's Labyrinth born?", f"Where is {TRIGGER}?", "Who directed Cronos?"]


@pytest.mark.parametrize("exc", [LLMTimeoutError("timed out"), LLMError("HTTP 503"), RuntimeError("segfault-ish")],
                         ids=["timeout", "error", "runtime"])
def test_d2f_llm_failure_becomes_a_d2ferror(exc):
    out = D2FReAG(_d2f_llm(fail=lambda s: exc), WordRetriever(), D2FParams(k=2)).run_batch(QUESTIONS)
    assert len(out) == 3 and out[0].ok and out[2].ok and out[0].answer == out[2].answer == "Mexico"
    err = out[1]
    assert isinstance(err, D2FError) and err.index == 1 and err.question == QUESTIONS[1]
    assert err.error_type == type(exc).__name__ and err.message == str(exc)
    assert err.to_dict()["ok"] is False and [r.index for r in out] == [0, 1, 2]


@pytest.mark.parametrize("garbage", ["", "{not json", "\x00\x01", "ten out of ten"])
def test_d2f_garbage_structured_replies_fall_back(garbage):
    """Judge and decomposition replies that are not what was asked: re-asked, then the
    documented fallbacks (score 0, no sub-questions); the question is still answered."""
    method = D2FReAG(_d2f_llm(fail=lambda s: garbage if not s.startswith(("Give only", "You answer")) else None),
                     WordRetriever(), D2FParams(k=2))
    out = method.run_batch(QUESTIONS)
    assert len(out) == 3 and all(r.ok for r in out)
    bad = out[1]
    assert bad.answer == "Mexico" and bad.fallbacks >= 1
    assert bad.root.score == 0 and bad.root.judge[-1]["fallback_used"]
    assert out[0].fallbacks == 0 and out[2].fallbacks == 0


@pytest.mark.parametrize("exc", [TimeoutError("search timed out"), RuntimeError("index corrupt")])
def test_d2f_retriever_failure_becomes_a_d2ferror(exc):
    out = D2FReAG(_d2f_llm(), WordRetriever(fail_on=TRIGGER, exc=exc), D2FParams(k=2)).run_batch(QUESTIONS)
    assert len(out) == 3 and out[0].ok and out[2].ok
    assert isinstance(out[1], D2FError) and out[1].error_type == type(exc).__name__


def test_d2f_final_answer_timeout_is_a_d2ferror():
    """Even the last call (the short answer, which has no fallback) failing loses one item only."""
    fail = lambda s: LLMTimeoutError("answer timed out") if s.startswith("Give only") else None  # noqa: E731
    out = D2FReAG(_d2f_llm(fail=fail), WordRetriever(), D2FParams(k=2)).run_batch(QUESTIONS)
    assert [r.ok for r in out] == [True, False, True] and out[1].error_type == "LLMTimeoutError"


# =========================================================================== Conformal

CORPUS = ["Paris is the capital of France.", "The Eiffel Tower is in Paris.", "Berlin is in Germany.",
          "Mexico City is the capital of Mexico.", f"{TRIGGER} is an archipelago."]


def _cal_items():
    return [{"question": "What is the capital of France?", "claims": ["Paris is the capital.", "Berlin is big."],
             "labels": [True, False]},
            {"question": "Where is the Eiffel Tower?", "claims": ["It is in Paris.", "It is in Mexico."],
             "labels": [True, False]},
            {"question": "What is Mexico's capital?", "claims": ["Mexico City.", f"{TRIGGER} island."],
             "labels": [True, False]}]


def test_conformal_healthy_baseline():
    rag = ConformalRAG(ClaimConformal(alpha=0.3), MultiHopRetriever(CORPUS, FaultyEmbedder(), hops=1, k=3,
                                                                     sim_threshold=0.0))
    rag.calibrate(_cal_items(), progress=False)
    assert np.isfinite(rag.calibrator.q_hat)


@pytest.mark.parametrize("mode", ["nan", "rows_short", "flat"])
def test_conformal_bad_embeddings_raise_clearly(mode):
    retriever = MultiHopRetriever(CORPUS, FaultyEmbedder(), hops=1, k=3, sim_threshold=0.0)
    rag = ConformalRAG(ClaimConformal(alpha=0.3), retriever, embedder=FaultyEmbedder(mode))
    with pytest.raises(ValueError):
        rag.score_claims("Where is it?", [f"{TRIGGER} island.", "Paris."])
    scored = rag.score_batch(_cal_items(), progress=False)
    assert len(scored) == 3 and scored[2].error and "ValueError" in scored[2].error
    assert scored[0].error is None and scored[1].error is None
    assert all(np.isfinite(s.scores).all() for s in scored[:2])
    with pytest.raises(ValueError, match="item 2 failed"):  # never a q-hat from an incomplete set
        rag.calibrate(_cal_items(), progress=False)
    assert rag.calibrator.q_hat is None


@pytest.mark.parametrize("mode", ["nan", "rows_short", "raise"])
def test_conformal_bad_corpus_embeddings_raise_at_build(mode):
    """The retriever embeds the corpus when built: a bad embedder fails there, loudly."""
    with pytest.raises((ValueError, RuntimeError)):
        MultiHopRetriever(CORPUS, FaultyEmbedder(mode, always=True), hops=1, k=3)


def test_conformal_query_embedding_nan_is_a_per_item_error():
    """A NaN query embedding (retrieval) fails that item only; scoring never sees it."""
    emb = FaultyEmbedder("nan", after=1)  # call 1: the corpus; later calls: queries and claims
    retriever = MultiHopRetriever(CORPUS[:-1], emb, hops=1, k=3, sim_threshold=0.0)  # no TRIGGER in the corpus
    rag = ConformalRAG(ClaimConformal(alpha=0.3), retriever, embedder=FaultyEmbedder())
    items = [dict(it, claims=it["claims"][:1]) for it in _cal_items()]
    scored = rag.score_batch(items, progress=False)
    assert len(scored) == 3 and all(s.error and "ValueError" in s.error for s in scored)
