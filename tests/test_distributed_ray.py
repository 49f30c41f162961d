"""Ray Data scale-out (rrag_kernels.distributed.ray) on a local Ray: every pipeline's rows equal
the single-process results record for record (MIRAGE, conformal scores and the driver's q-hat,
ReliableRAG and D2F-ReAG with scripted LLMs), a failing item is an error row while the others
come back (count in = count out), the model is built once per actor, order is restored by id,
and bad arguments fail before anything is scheduled. Skipped without ray[data] (the tests of
the ImportError and of the pure-Python helpers run anyway)."""

from __future__ import annotations

import functools
import json
import logging
import os
import subprocess
import sys
import threading
from importlib import resources
from pathlib import Path

import numpy as np
import pytest

from rrag_kernels.distributed import (
    D2F_COLUMNS,
    DEFEND_COLUMNS,
    RELIABLERAG_COLUMNS,
    SCORE_COLUMNS,
    calibrate_from_dataset,
    collect_by_id,
    conformal_filter_dataset,
    d2f_dataset,
    defend_dataset,
    failure_summary,
    reliablerag_dataset,
    score_claims_dataset,
)
from rrag_kernels.models import HashingEmbedder, ScriptedLLM
from rrag_kernels.models.nli import LexicalNLI
from rrag_kernels.pipelines.conformal import DEFAULT_SUPPORTED, ClaimConformal, ConformalRAG, MultiHopRetriever, load_sample
from rrag_kernels.pipelines.d2f import D2FParams, D2FReAG, corpus_retriever, scripted_llm
from rrag_kernels.pipelines.mirage import MirageDefense
from rrag_kernels.pipelines.reliablerag import ChainParams, answer_batch

ROOT = Path(__file__).resolve().parents[1]
# Ray Data reads its own deprecated settings when it copies its context: not ours to fix.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:ray.data.context")


def _normal(obj):
    """JSON round trip: NaN == NaN, tuples == lists."""
    return json.loads(json.dumps(obj))


# --------------------------------------------------------------------------- MIRAGE


class FailingNLI:
    """LexicalNLI that raises on any pair mentioning BOOM (a scorer failing on one item)."""

    def __init__(self):
        self.inner = LexicalNLI()
        self.labels = self.inner.labels

    def predict_proba(self, premises, hypotheses):
        if any("BOOM" in t for t in list(premises) + list(hypotheses)):
            raise RuntimeError("scorer down on BOOM")
        return self.inner.predict_proba(premises, hypotheses)


def make_defense(log_path=None):
    """The defense factory: logs the process that built it (one line per construction)."""
    if log_path is not None:
        with open(log_path, "a", encoding="utf-8") as fh:
            fh.write(f"{os.getpid()}\n")
    return MirageDefense(nli=FailingNLI(), mode="corroboration", on_bad_passage="error")  # an error row too


def _mirage_rows():
    sample = json.loads(resources.files("rrag_kernels").joinpath("data/mirage_sample.json").read_text("utf-8"))
    rows = []
    for k in range(8):
        q = sample["questions"][k % 2]
        passages = q["passages"][k % 3: k % 3 + 4 + k % 4]
        rows.append({"id": 100 - 7 * k, "question": q["question"], "passages": passages})
    rows.insert(3, {"id": 7, "question": "Bad passages?", "passages": [{"text": None, "url": "https://a.org"}]})
    boom = [{"text": "The BOOM tower was completed in 1889 in Paris.", "url": "https://a.org"},
            {"text": "The BOOM tower was completed in 1899 in Paris.", "url": "https://b.com"}]
    rows.insert(6, {"id": 13, "question": "When was the BOOM tower completed?", "passages": boom})
    return rows


def _mirage_expected(res):
    rec = res.to_record(dropped=True)
    if "error" not in rec:
        rec["kept"] = [{"contradicted_by": [], **c} for c in rec["kept"]]
        rec["stats"] = {k: v for k, v in rec["stats"].items() if k != "timings"}
    return _normal(rec)


def _mirage_got(row):
    keys = ("error", "gate_passed", "fallback", "prompt") if row["error"] else \
        ("question", "gate_passed", "gate_reason", "fallback", "kept", "dropped", "prompt", "stats")
    out = {k: row[k] for k in keys}
    if "stats" in out:
        out["stats"] = {k: v for k, v in out["stats"].items() if k != "timings"}
    return _normal(out)


def test_defend_dataset_equals_defend_batch(ray_local, tmp_path):
    rows = _mirage_rows()
    log = tmp_path / "built.txt"
    ds = ray_local.data.from_items(rows)
    out = defend_dataset(ds, defense_factory=functools.partial(make_defense, str(log)), dropped=True,
                         num_actors=2, batch_size=3).materialize()
    got = collect_by_id(out, order=[r["id"] for r in rows])            # input order restored by id
    assert [g["id"] for g in got] == [r["id"] for r in rows]           # count in = count out
    assert out.columns() == ["id", *DEFEND_COLUMNS]
    want = make_defense().defend_batch(rows, progress=False)
    for g, w in zip(got, want):
        assert _mirage_got(g) == _mirage_expected(w), g["id"]
    summary = failure_summary(got)
    assert summary["n"] == len(rows) and summary["n_errors"] == 2
    errors = {e["id"]: e["error"] for e in summary["errors"]}
    assert errors[7] == "TypeError: passages[0].text: expected a str, got NoneType"
    assert errors[13] == "RuntimeError: scorer down on BOOM"
    # Subsets of one topic can be a single coordinated voice, which keeps nothing and blocks.
    assert sum(g["gate_passed"] for g in got) >= 4 and sum(bool(g["kept"]) for g in got if not g["error"]) >= 4
    bad = next(g for g in got if g["id"] == 7)
    assert bad["gate_passed"] is False and bad["kept"] is None and bad["question"] == "Bad passages?"
    # the model is built once per actor: 4 batches, at most 2 constructions
    assert 1 <= len(log.read_text().split()) <= 2
    assert [g["id"] for g in collect_by_id(out)] == sorted(r["id"] for r in rows)


def test_to_record_is_the_cli_record():
    """MirageResult.to_record (what a row holds) is the record ``rrag defend`` writes, without line / id."""
    from rrag_kernels.cli.defend import defend_record

    rows = _mirage_rows()
    for n, (row, res) in enumerate(zip(rows, make_defense().defend_batch(rows, progress=False)), 1):
        for dropped in (False, True):
            rec = defend_record(n, row, res, dropped)
            assert rec.pop("line") == n and rec.pop("id") == row["id"]
            assert rec == res.to_record(dropped=dropped)


@pytest.mark.slow  # ~3 s warm; keeps the default file near 40 s on the busy 2-core VM
def test_defend_dataset_by_name_and_params(ray_local):
    rows = [r for r in _mirage_rows() if r["id"] not in (7, 13)][:3]
    out = defend_dataset(ray_local.data.from_items(rows), nli="lexical", params={"mode": "paper", "on_block": "refuse"},
                         num_actors=1, batch_size="auto", keep_columns=["passages"])
    got = collect_by_id(out, order=[r["id"] for r in rows])
    want = MirageDefense(nli="lexical", mode="paper", on_block="refuse").defend_batch(rows, progress=False)
    for g, w in zip(got, want):
        assert g["dropped"] is None and g["error"] is None
        assert _mirage_got({**g, "dropped": w.to_record(dropped=True)["dropped"]}) == _mirage_expected(w)
        assert [p["text"] for p in g["passages"]] == [p["text"] for p in rows[got.index(g)]["passages"]]
    timings = got[0]["stats"]["timings"]
    assert timings["nli_s"] >= 0 and timings["embed_s"] is None


# --------------------------------------------------------------------------- conformal


def make_rag(docs):
    return ConformalRAG(None, MultiHopRetriever(docs, HashingEmbedder(256)))


def test_conformal_scores_and_q_hat_equal_single_process(ray_local):
    sample = load_sample()
    docs = [d["text"] for d in sample["docs"]]
    rows = [{"id": n, "question": r["prompt"], "claims": [c["subclaim"] for c in r["claims"]],
             "labels": [c["annotation"] in DEFAULT_SUPPORTED for c in r["claims"]]}
            for n, r in enumerate(sample["data"])]
    broken = {"id": len(rows), "question": "No claims here?", "claims": None, "labels": None}
    ds = ray_local.data.from_items(rows + [broken])
    scored = score_claims_dataset(ds, rag_factory=functools.partial(make_rag, docs), num_actors=1, batch_size=16,
                                  keep_columns=["labels"]).materialize()
    got = collect_by_id(scored)
    assert scored.columns() == ["id", *SCORE_COLUMNS, "labels"]
    assert len(got) == len(rows) + 1 and got[-1]["error"].startswith("ValueError: claims:")
    single = make_rag(docs).score_batch(rows, progress=False)
    for g, s in zip(got, single):
        assert g["error"] is None and g["claims"] == [c.text for c in s.claims]
        # The same fused kernel, but on another process of another thread environment (Ray sets
        # OMP_NUM_THREADS=1 for a 1-CPU actor): equal within float32 rounding; on a clean CI
        # machine they differed by one ulp (1.5e-8), here they are bitwise equal.
        np.testing.assert_allclose(g["scores"], [c.score for c in s.claims], rtol=1e-5, atol=1e-6)
    # q-hat on the driver from the collected scores: an error row is refused, then it is left out
    with pytest.raises(ValueError, match="failed upstream"):
        calibrate_from_dataset(scored, alpha=0.2)
    cal = calibrate_from_dataset(scored, alpha=0.2, skip_errors=True)
    flat = np.concatenate([s.scores for s in single])
    labels = np.array([x for r in rows for x in r["labels"]], dtype=bool)
    offsets = np.r_[0, np.cumsum([len(r["claims"]) for r in rows])].astype(np.int64)
    ref = ClaimConformal(alpha=0.2).calibrate(flat, labels, offsets)
    assert cal.n == ref.n == len(rows) and abs(cal.q_hat - ref.q_hat) <= 1e-5
    # exact: the driver's q-hat is ClaimConformal's on the collected scores, in id order
    collected = np.concatenate([np.asarray(g["scores"], dtype=np.float64) for g in got[:-1]])
    exact = ClaimConformal(alpha=0.2).calibrate(collected, labels, offsets)
    assert cal.q_hat == exact.q_hat and cal.data_hash == exact.data_hash
    # ... and the filter with it
    filtered = collect_by_id(conformal_filter_dataset(scored, cal))
    keep = exact.filter(collected, offsets)
    for n, f in enumerate(filtered[:-1]):
        assert f["kept"] == keep[offsets[n]:offsets[n + 1]].tolist() and f["q_hat"] == exact.q_hat
        assert f["kept_claims"] == [c for c, k in zip(f["claims"], f["kept"]) if k] and f["n_kept"] == sum(f["kept"])
    assert filtered[-1]["kept"] is None and filtered[-1]["error"].startswith("ValueError: claims:")


def test_conformal_filter_rows_that_cannot_be_filtered_are_their_own_errors(ray_local):
    # one ragged filter (ClaimConformal.filter_lists): a NaN score or an unknown group is that
    # row's error, named by the dataset's column; the other rows are filtered as alone
    cal = ClaimConformal(alpha=0.3).calibrate(np.array([0.1, 0.5, 0.9, 0.3, 0.7, 0.2]),
                                              np.array([0, 1, 1, 0, 1, 1], dtype=bool),
                                              np.array([0, 2, 4, 6]), ["a", "b", "a"])
    rows = [{"id": 0, "scores": [0.95, 0.05], "group": "a"},
            {"id": 1, "scores": [0.5, float("nan")], "group": "a"},
            {"id": 2, "scores": [0.8], "group": "zzz"},
            {"id": 3, "scores": [], "group": "b"},
            {"id": 4, "scores": [0.6, 0.99], "group": "b"}]
    got = collect_by_id(conformal_filter_dataset(ray_local.data.from_items(rows), cal, claims_column=None,
                                                 group_column="group"))
    for k in (0, 3, 4):
        want = cal.filter(np.array(rows[k]["scores"]), np.array([0, len(rows[k]["scores"])]), [rows[k]["group"]])
        assert got[k]["error"] is None and got[k]["kept"] == want.tolist()
        assert got[k]["q_hat"] == cal.q_hat[rows[k]["group"]]
    assert got[1]["kept"] is None and got[1]["error"].startswith("ValueError: scores: claim 1 has score nan")
    assert got[2]["kept"] is None and got[2]["error"].startswith("ValueError: group: no threshold for group 'zzz'")


# --------------------------------------------------------------------------- the LLM pipelines

RAG_PASSAGES = [
    {"title": "Pan's Labyrinth", "text": "Pan's Labyrinth is directed by Guillermo del Toro.", "label": "gold",
     "triples": [{"head": "Pan's Labyrinth", "relation": "directed by", "tail": "Guillermo del Toro", "sentence": 0}]},
    {"title": "Guillermo del Toro", "text": "Guillermo del Toro was born in Mexico.", "label": "gold",
     "triples": [{"head": "Guillermo del Toro", "relation": "born in", "tail": "Mexico", "sentence": 0}]},
    {"title": "Rumour", "text": "Guillermo del Toro was born in Spain.", "label": "injected",
     "triples": [{"head": "Guillermo del Toro", "relation": "born in", "tail": "Spain", "sentence": 0}]},
]
SMALL = ChainParams(k=5, beams=2, max_chains=3, max_hops=2)


def make_router_llm():
    """Scripted LLM: credibility by the passage's wording, the reader answers from its context."""

    def reply(msgs):
        system, user = msgs[0]["content"], msgs[-1]["content"]
        if system.startswith("Answer"):
            return "Answer: Mexico." if "Mexico" in user else "Answer: unknown"
        return "Credibility Score: 2" if "Spain" in user else "Credibility Score: 9"
    return ScriptedLLM(reply)


def test_reliablerag_dataset_equals_answer_batch(ray_local):
    questions = ["In which country was the director of Pan's Labyrinth born?", "Who directed Pan's Labyrinth?",
                 "Where was Guillermo del Toro born?"]
    rows = [{"id": f"q{n}", "question": q, "passages": RAG_PASSAGES[: 2 + n % 2]} for n, q in enumerate(questions)]
    rows.insert(1, {"id": "bad", "question": "No passages?", "passages": None})
    options = {"credibility": "llm", "selector": "reliability", "params": SMALL}
    out = reliablerag_dataset(ray_local.data.from_items(rows), llm_factory=make_router_llm,
                              embedder_factory=functools.partial(HashingEmbedder, 256), num_actors=1, batch_size=2,
                              **options)
    got = collect_by_id(out, order=[r["id"] for r in rows])
    assert list(got[0]) == ["id", *RELIABLERAG_COLUMNS]
    want = answer_batch(rows, llm=make_router_llm(), embedder=HashingEmbedder(256), **options)
    for g, w, row in zip(got, want, rows):
        if row["id"] == "bad":
            assert g["error"].startswith("TypeError: passages:") and w.error and g["answer"] is None
            continue
        assert g["error"] is None and w.error is None
        assert (g["answer"], g["context"], g["context_passages"], g["context_kind"]) == \
            (w.answer, w.context, w.context_passages, w.context_kind)
        # chains exact; their scores within float32 rounding (see the conformal test)
        assert [(c["triples"], c["finished"]) for c in g["chains"]] == \
            [([w.triples[t].text for t in c.triples], c.finished) for c in w.chains]
        np.testing.assert_allclose([c["score"] for c in g["chains"]], [c.score for c in w.chains], rtol=1e-5, atol=1e-6)
        assert g["credibility"] == w.credibility.tolist()
        assert (g["llm_calls"], g["prompt_tokens"], g["completion_tokens"]) == \
            (w.llm_calls, w.prompt_tokens, w.completion_tokens)
        assert json.loads(g["fallbacks"]) == _normal(w.fallbacks) and set(g["seconds"]) == set(w.seconds)
    assert got[0]["answer"] == "Mexico"


D2F_ROWS = [
    {"question": "In which country was the director of Pan's Labyrinth born?",
     "sub_questions": ["Who directed Pan's Labyrinth?", "Where was Guillermo del Toro born?"]},
    {"question": "Who directed Cronos?", "sub_questions": []},
    {"question": "When was Cronos released?", "sub_questions": []},
]
D2F_CORPUS = [{"pid": f"p{n}", "title": p["title"], "text": p["text"]} for n, p in enumerate(RAG_PASSAGES)] + [
    {"pid": "c", "title": "Cronos", "text": "Cronos is a 1993 horror film directed by Guillermo del Toro."}]
_TIMES = ("retrieval_seconds", "llm_seconds", "total_seconds", "index")


def test_d2f_dataset_equals_run_batch(ray_local):
    rows = [{"id": n, "question": r["question"]} for n, r in enumerate(D2F_ROWS)] + [{"id": 3, "question": None}]
    params = D2FParams(max_calls=20)
    out = d2f_dataset(ray_local.data.from_items(rows), llm_factory=functools.partial(scripted_llm, D2F_ROWS),
                      retriever_factory=functools.partial(corpus_retriever, D2F_CORPUS, HashingEmbedder(256)),
                      params={"max_calls": 20}, num_actors=1, batch_size=2)
    got = collect_by_id(out)
    assert list(got[0]) == ["id", *D2F_COLUMNS]
    method = D2FReAG(scripted_llm(D2F_ROWS), corpus_retriever(D2F_CORPUS, HashingEmbedder(256)), params)
    want = method.run_batch([r["question"] for r in rows])
    assert [g["id"] for g in got] == [0, 1, 2, 3]
    for g, w in zip(got[:3], want[:3]):
        assert g["error"] is None and w.ok
        trace = {k: v for k, v in json.loads(g["trace"]).items() if k not in _TIMES}
        assert trace == _normal({k: v for k, v in w.to_dict().items() if k not in _TIMES})
        assert (g["answer"], g["stop_reason"], g["llm_calls"], g["decomposed"], g["max_level"]) == \
            (w.answer, w.stop_reason, w.llm_calls, w.decomposed, w.max_level)
    assert got[0]["decomposed"] and got[3]["error_type"] == "TypeError" and not want[3].ok
    assert got[3]["error"] == f"TypeError: {want[3].message}" and got[3]["answer"] is None


# --------------------------------------------------------------------------- arguments


def test_argument_errors_before_anything_runs(ray_local, caplog):
    ds = ray_local.data.from_items([{"id": 0, "question": "q?", "passages": []}])
    with caplog.at_level(logging.WARNING, logger="rrag_kernels"):
        lazy = defend_dataset(ds, nli="lexical", num_actors=3)  # nothing runs until the result is read
    assert "3 actors x 1 CPU = 3, but the cluster has 2 CPU" in caplog.text and lazy.columns(fetch_if_missing=False) is None
    with pytest.raises(ValueError, match="num_actors: must be >= 1"):
        defend_dataset(ds, nli="lexical", num_actors=0)
    with pytest.raises(TypeError, match="num_actors: expected an int"):
        defend_dataset(ds, nli="lexical", num_actors=1.5)
    for bs in (None, "auto"):
        with pytest.raises(ValueError, match="batch_size: must be an int when num_gpus > 0"):
            defend_dataset(ds, nli="lexical", num_gpus=1, batch_size=bs)
    with pytest.raises(ValueError, match="batch_size: must be >= 1"):
        defend_dataset(ds, nli="lexical", batch_size=0)
    with pytest.raises(ValueError, match="num_gpus: must be finite"):
        defend_dataset(ds, nli="lexical", num_gpus=-1)
    with pytest.raises(ValueError, match="ds: no column 'passages'"):
        defend_dataset(ds.drop_columns(["passages"]), nli="lexical")
    with pytest.raises(ValueError, match="ds: no column 'qid'"):
        defend_dataset(ds, nli="lexical", id_column="qid")
    with pytest.raises(ValueError, match="id_column: 'question' is a column defend_dataset writes"):
        defend_dataset(ds, nli="lexical", id_column="question")
    with pytest.raises(ValueError, match="keep_columns: 'question'"):
        defend_dataset(ds, nli="lexical", keep_columns=["question"])
    with pytest.raises(TypeError, match="ds: expected a ray.data.Dataset"):
        defend_dataset([{"id": 0}], nli="lexical")
    with pytest.raises(ValueError, match="tau: must be in"):
        defend_dataset(ds, nli="lexical", params={"tau": 2.0})
    with pytest.raises(TypeError, match="params: 'taux' is not a MirageParams field"):
        defend_dataset(ds, params={"taux": 0.5})
    with pytest.raises(TypeError, match="either defense_factory or nli"):
        defend_dataset(ds, nli="lexical", defense_factory=make_defense)
    with pytest.raises(TypeError, match="defense_factory: expected a zero-argument callable"):
        defend_dataset(ds, defense_factory=MirageDefense(nli="lexical"))
    lock = threading.Lock()
    with pytest.raises(TypeError, match="defense_factory: cannot be pickled"):
        defend_dataset(ds, defense_factory=lambda: lock)
    with pytest.raises(ValueError, match="map_kwargs: 'concurrency' is set by this function"):
        defend_dataset(ds, nli="lexical", map_kwargs={"concurrency": 2})
    with pytest.raises(ValueError, match="ds: no column of \\['claims', 'response'\\]"):
        score_claims_dataset(ds, rag_factory=make_rag)
    with pytest.raises(TypeError, match="contxt: not an option"):
        reliablerag_dataset(ds, llm_factory=make_router_llm, embedder_factory=HashingEmbedder, contxt="tbs")
    with pytest.raises(ValueError, match="context: expected one of"):
        reliablerag_dataset(ds, llm_factory=make_router_llm, embedder_factory=HashingEmbedder, context="xyz")
    with pytest.raises(ValueError, match="max_calls"):
        d2f_dataset(ds, llm_factory=make_router_llm, retriever_factory=make_router_llm, params={"max_calls": 0})
    with pytest.raises(ValueError, match="calibrator: not calibrated"):
        conformal_filter_dataset(ds, ClaimConformal())
    with pytest.raises(TypeError, match="alpha: give alpha or a calibrator"):
        calibrate_from_dataset(ds, ClaimConformal(), alpha=0.1)


def test_without_ray_the_import_works_and_calls_name_the_extra(monkeypatch):
    env = {**os.environ, "PYTHONPATH": str(ROOT / "python")}
    code = "import sys; sys.modules['ray'] = None; import rrag_kernels.distributed as d; print(d.defend_dataset.__name__)"
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and res.stdout.strip() == "defend_dataset", res.stderr
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(ImportError, match=r'pip install "rrag_kernels\[ray\]"'):
        defend_dataset(object(), nli="lexical")
    with pytest.raises(ValueError, match="num_actors"):  # argument rules come first, ray or not
        defend_dataset(object(), nli="lexical", num_actors=0)


def test_collect_by_id_checks_count_in_equals_count_out():
    rows = [{"id": 3, "error": None}, {"id": 1, "error": "ValueError: x"}, {"id": 2, "error": None}]
    assert [r["id"] for r in collect_by_id(rows)] == [1, 2, 3]
    assert [r["id"] for r in collect_by_id(rows, order=[2, 3, 1])] == [2, 3, 1]
    with pytest.raises(ValueError, match="missing \\[4\\]"):
        collect_by_id(rows, order=[1, 2, 3, 4])
    with pytest.raises(ValueError, match="unexpected \\[3\\]"):
        collect_by_id(rows, order=[1, 2])
    with pytest.raises(ValueError, match="id 1 appears more than once"):
        collect_by_id(rows + [{"id": 1}])
    with pytest.raises(ValueError, match="cannot be sorted"):
        collect_by_id([{"id": 1}, {"id": "a"}])
    assert failure_summary(rows) == {"n": 3, "n_ok": 2, "n_errors": 1, "errors": [{"id": 1, "error": "ValueError: x"}]}
