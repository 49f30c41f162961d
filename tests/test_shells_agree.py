"""Every shell returns the method's record (issue 23's method contract, pipelines/_items.py).

The same items go through the Python API (``run_batch`` + ``to_record`` + ``line_record``),
the CLI (``rrag defend`` / ``rrag conformal filter``), the HTTP server (``POST /defend`` /
``POST /filter``) and Ray (``defend_dataset`` / ``conformal_filter_dataset``), and the
records are compared. What may differ, and why:

* ``stats.timings``: wall-clock seconds of each run;
* Ray is a table of one fixed schema, so a field a record leaves out is a column there:
  a kept claim's ``contradicted_by`` is ``[]`` in Ray and absent elsewhere, and the
  conformal filter's per-claim ``kept`` is one ``list<bool>`` column beside the claims
  (``kept_claims`` holds the kept texts) instead of a list of claim objects;
* Ray rows carry the dataset's ``id`` column and no ``line`` (a dataset has no line numbers).
"""

from __future__ import annotations

import json
from importlib import resources

import pytest

from rrag_kernels.__main__ import main
from rrag_kernels.models.nli import LexicalNLI
from rrag_kernels.pipelines import line_record
from rrag_kernels.pipelines.conformal import ClaimConformal, filter_responses, load_sample
from rrag_kernels.pipelines.mirage import MirageDefense

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:ray.data.context")


def _normal(obj):
    """JSON round trip (tuples == lists, NaN as the shells write it)."""
    return json.loads(json.dumps(obj))


def _defend_items() -> list[dict]:
    """Subsets of the packaged MIRAGE sample, with string ids (the CLI echoes them)."""
    sample = json.loads(resources.files("rrag_kernels").joinpath("data/mirage_sample.json").read_text("utf-8"))
    items = []
    for k in range(5):
        q = sample["questions"][k % len(sample["questions"])]
        items.append({"id": f"q{k}", "question": q["question"], "passages": q["passages"][k % 3: k % 3 + 5 + k % 3]})
    return items


def _without_timings(rec: dict) -> dict:
    rec = dict(rec)
    if isinstance(rec.get("stats"), dict):
        rec["stats"] = {k: v for k, v in rec["stats"].items() if k != "timings"}
    rec.pop("line", None)
    return _normal(rec)


def _ray_defend_row(row: dict) -> dict:
    """A Ray row as the record: the columns a record holds, empty ``contradicted_by`` left out."""
    rec = {k: row[k] for k in ("id", "question", "gate_passed", "gate_reason", "fallback", "kept", "dropped",
                               "prompt", "stats")}
    rec["kept"] = [{k: v for k, v in c.items() if not (k == "contradicted_by" and v == [])} for c in rec["kept"]]
    return _without_timings(rec)


@pytest.fixture(scope="module")
def http():
    pytest.importorskip("fastapi", reason="the server extra is not installed (pip install 'rrag_kernels[serve]')")
    pytest.importorskip("httpx")
    from fastapi.testclient import TestClient

    from rrag_kernels.serve import create_app

    cal = ClaimConformal(alpha=0.3)
    sample = load_sample()["data"][:30]
    import numpy as np

    scores = np.array([c["relevance-score"] for r in sample for c in r["claims"]], dtype=np.float64)
    labels = np.array([c["annotation"] in ("Y", "S") for r in sample for c in r["claims"]], dtype=bool)
    offsets = np.r_[0, np.cumsum([len(r["claims"]) for r in sample])].astype(np.int64)
    cal.calibrate(scores, labels, offsets)
    with TestClient(create_app(defense=MirageDefense(nli=LexicalNLI()), conformal=cal)) as client:
        yield client, cal


def test_defend_records_are_equal_in_every_shell(tmp_path, http, ray_local):
    from rrag_kernels.distributed.ray import collect_by_id, defend_dataset

    items = _defend_items()
    api = [line_record(n, item, res.to_record(dropped=True)) for n, (item, res)
           in enumerate(zip(items, MirageDefense(nli=LexicalNLI()).run_batch(items, progress=False)), 1)]
    assert any(r["gate_passed"] for r in api) and all("error" not in r for r in api)
    want = [_without_timings(r) for r in api]

    inp, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    inp.write_text("".join(json.dumps(i) + "\n" for i in items), encoding="utf-8")
    assert main(["defend", str(inp), str(out), "--nli", "lexical", "--dropped", "--quiet"]) == 0
    cli = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [r["line"] for r in cli] == list(range(1, len(items) + 1))
    assert [_without_timings(r) for r in cli] == want

    client, _ = http
    resp = client.post("/defend", json={"items": items, "dropped": True})
    assert resp.status_code == 200, resp.text
    served = resp.json()["results"]
    assert [r["line"] for r in served] == list(range(1, len(items) + 1))
    assert [_without_timings(r) for r in served] == want

    ds = ray_local.data.from_items(items)
    rows = collect_by_id(defend_dataset(ds, nli="lexical", dropped=True, batch_size=2),
                         order=[i["id"] for i in items])
    assert [_ray_defend_row(r) for r in rows] == want


def test_conformal_filter_records_are_equal_in_every_shell(tmp_path, http, ray_local):
    from rrag_kernels.distributed.ray import collect_by_id, conformal_filter_dataset

    client, cal = http
    responses = [{"id": f"r{k}", "prompt": r["prompt"],
                  "claims": [{"text": c["subclaim"], "score": c["relevance-score"]} for c in r["claims"]]}
                 for k, r in enumerate(load_sample()["data"][30:])]
    scored = [{"id": r["id"], "prompt": r["prompt"], "group": None, "texts": [c["text"] for c in r["claims"]],
               "scores": [c["score"] for c in r["claims"]]} for r in responses]
    want = [_normal(line_record(n, r, rec)) for n, (r, rec) in enumerate(zip(scored, filter_responses(cal, scored)), 1)]
    assert any(r["n_kept"] for r in want) and any(r["n_kept"] < r["n_claims"] for r in want)

    cal_path, inp, out = tmp_path / "cal.json", tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    cal.save(cal_path)
    inp.write_text("".join(json.dumps(r) + "\n" for r in responses), encoding="utf-8")
    assert main(["conformal", "filter", str(cal_path), str(inp), str(out), "--quiet"]) == 0
    assert [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()] == want

    resp = client.post("/filter", json={"responses": responses})
    assert resp.status_code == 200, resp.text
    assert resp.json()["results"] == want

    ds = ray_local.data.from_items([{"id": r["id"], "prompt": r["prompt"], "claims": r["texts"],
                                     "scores": r["scores"]} for r in scored])
    rows = collect_by_id(conformal_filter_dataset(ds, cal), order=[r["id"] for r in scored])
    for row, rec in zip(rows, want):
        assert row["error"] is None and row["id"] == rec["id"] and row["q_hat"] == rec["q_hat"]
        assert row["n_kept"] == rec["n_kept"] and row["kept_claims"] == rec["kept"]
        assert [{"text": t, "score": s, "kept": k} for t, s, k in zip(row["claims"], row["scores"], row["kept"])] \
            == rec["claims"]
