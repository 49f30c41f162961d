"""The ``rrag`` command line (``python -m rrag_kernels``): every batch command on JSONL written
here, count in = count out with error records, ``--quiet``, and argparse errors (exit 2, a
message, no traceback) for user mistakes.

Model-free throughout (``--nli lexical``, the scripted LLM, the hashing embedder), so the
file runs in a few seconds.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import rrag_kernels.cli.reliablerag as rr_cli
from rrag_kernels.__main__ import main
from rrag_kernels.models import ScriptedLLM
from rrag_kernels.pipelines.conformal import ClaimConformal, load_sample

ROOT = Path(__file__).resolve().parents[1]

QUESTION = "When did the Berlin Wall fall?"
PASSAGES = [
    {"text": "The Berlin Wall fell on 9 November 1989. Crowds crossed the border that night.",
     "url": "https://en.wikipedia.org/wiki/Berlin_Wall", "title": "Berlin Wall", "retrieval_score": 0.9},
    {"text": "On 9 November 1989 the Berlin Wall fell. Germany was reunified in 1990.",
     "url": "https://www.britannica.com/topic/Berlin-Wall", "title": "Berlin Wall | Britannica",
     "retrieval_score": 0.8},
    {"text": "The Berlin Wall fell on 9 November 1991. It was a secret plan.",
     "url": "https://conspiracy.example.net/wall", "title": "The truth", "retrieval_score": 0.7},
]


def _write(path: Path, lines: list) -> Path:
    path.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines), encoding="utf-8")
    return path


def _read(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture
def defend_input(tmp_path):
    """Two good questions, a line that is not JSON, a blank line (skipped), a row without a
    question and one whose only passage has no text (left out: nothing to defend)."""
    return _write(tmp_path / "in.jsonl", [
        {"id": "q1", "question": QUESTION, "passages": PASSAGES},
        "{not json",
        "",
        {"id": "q3", "passages": PASSAGES},
        {"question": QUESTION, "passages": PASSAGES[::-1]},
        {"id": "q5", "question": QUESTION, "passages": [{"title": "no text"}]},
    ])


def _usage_error(argv, capsys) -> str:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2, err
    assert "Traceback" not in err and "error:" in err
    return err


# --------------------------------------------------------------------------- entry points


def test_console_scripts_are_declared():
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]
    assert scripts["rrag"] == scripts["rrag-kernels"] == "rrag_kernels.__main__:main"


def test_module_form_runs_defend(defend_input, tmp_path):
    """``python -m rrag_kernels`` is the same CLI; --quiet leaves stderr empty."""
    out = tmp_path / "out.jsonl"
    proc = subprocess.run([sys.executable, "-m", "rrag_kernels", "defend", str(defend_input), str(out),
                           "--nli", "lexical", "--quiet"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "" and proc.stdout == ""
    assert len(_read(out)) == 5


def test_module_form_usage_error_has_no_traceback():
    proc = subprocess.run([sys.executable, "-m", "rrag_kernels", "conformal", "calibrate", "--alpha", "1.5",
                           "-o", "unused.json"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "usage: rrag conformal calibrate" in proc.stderr and "--alpha: expected a number in (0, 1)" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_installed_rrag_script_runs():
    script = Path(sys.executable).parent / "rrag"
    if not script.exists():
        pytest.skip("the rrag console script is not installed next to this interpreter")
    proc = subprocess.run([str(script), "--help"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage: rrag ") and all(c in proc.stdout for c in ("defend", "conformal", "bench"))


@pytest.mark.parametrize("option, argv", [
    ("--nli", ["defend", "{inp}", "{out}", "--nli", "someone/uncached-model"]),
    ("--judge", ["reliablerag", "{inp}", "-o", "{out}", "--credibility", "agreement", "--judge", "someone/uncached-model"]),
])
def test_a_judge_that_cannot_be_fetched_is_a_usage_error(tmp_path, capsys, monkeypatch, option, argv):
    # a hub id neither cached nor downloadable ends in an OSError inside the hub client: one
    # line naming the option, exit 2, never a traceback (issue 24)
    from rrag_kernels.models import nli

    def unreachable(name):
        raise OSError(f"We couldn't connect to 'https://huggingface.co' to load {name}")

    monkeypatch.setattr(nli, "load", unreachable)
    inp = tmp_path / "in.jsonl"
    inp.write_text('{"question": "q?", "passages": [{"text": "a."}]}\n')
    argv = [a.format(inp=inp, out=tmp_path / "out.jsonl") for a in argv]
    err = _usage_error(argv, capsys)
    assert f"{option}: We couldn't connect" in err and "Traceback" not in err


def test_a_jsonl_line_with_a_key_given_twice_is_an_error_record(tmp_path, capsys):
    # issue 26: json.loads keeps the last of two keys; a line must not say two things at once
    inp = tmp_path / "in.jsonl"
    inp.write_text('{"id": 1, "question": "q?", "question": "r?", "passages": []}\n'
                   '{"id": 2, "question": "q?", "passages": [{"text": "a.", "text": "b."}]}\n'
                   '{"id": 3, "question": "q?", "passages": [{"text": "a."}, {"text": "b."}]}\n')
    out = tmp_path / "out.jsonl"
    assert main(["defend", str(inp), str(out), "--nli", "lexical", "--quiet"]) == 0
    recs = _read(out)
    assert "'question' appears twice" in recs[0]["error"] and "'text' appears twice" in recs[1]["error"]
    assert "error" not in recs[2]


def test_a_batch_in_which_every_item_failed_exits_1(tmp_path, capsys):
    inp = tmp_path / "in.jsonl"
    inp.write_text('{"question": " ", "passages": []}\n"not an object"\n')
    out = tmp_path / "out.jsonl"
    assert main(["defend", str(inp), str(out), "--nli", "lexical", "--quiet"]) == 1
    assert "defend: every item failed (2 of 2)" in capsys.readouterr().err  # said even with --quiet
    assert [r["line"] for r in _read(out)] == [1, 2]  # the error records are written all the same
    inp.write_text('{"question": " ", "passages": []}\n{"question": "q?", "passages": [{"text": "a."}]}\n')
    assert main(["defend", str(inp), str(out), "--nli", "lexical", "--quiet"]) == 0
    assert capsys.readouterr().err == ""


def test_info_and_bench(capsys):
    assert main(["info", "--json"]) == 0
    assert "simd_level" in json.loads(capsys.readouterr().out)
    assert main(["bench", "--quick", "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    for kernel in ("cosine_matrix", "topk_cosine", "segmented_cosine", "conformal_sweep"):
        assert kernel in out
    assert "median ms" in out and "pairs/s" in out


# --------------------------------------------------------------------------- defend


def test_defend_count_in_equals_count_out(defend_input, tmp_path, capsys):
    out = tmp_path / "out.jsonl"
    assert main(["defend", str(defend_input), str(out), "--nli", "lexical", "--dropped"]) == 0
    recs = _read(out)
    assert [r["line"] for r in recs] == [1, 2, 4, 5, 6]  # the blank line 3 is not an item
    ok, not_json, no_question, no_id, failed = recs
    assert ok["id"] == "q1" and isinstance(ok["gate_passed"], bool) and ok["prompt"] and ok["stats"]["n_claims"] > 0
    assert ok["kept"] and {"text", "source", "score", "domain"} <= set(ok["kept"][0])
    assert all(c["reason"] for c in ok["dropped"])
    assert len(ok["kept"]) + len(ok["dropped"]) == ok["stats"]["n_claims"] == ok["stats"]["n_kept"] + len(ok["dropped"])
    assert "not JSON" in not_json["error"] and "id" not in not_json
    assert no_question["id"] == "q3" and "question" in no_question["error"]
    assert "error" not in no_id and "id" not in no_id and no_id["kept"]
    # a passage without text is left out (on_bad_passage="skip"), said in the record; here it
    # was the only one, so nothing is left to defend and the gate blocks with its fallback
    assert failed["id"] == "q5" and "error" not in failed and failed["stats"]["skipped_passages"] == \
        [{"passage": 0, "error": "TypeError: passages[0].text: expected a str, got NoneType"}]
    assert failed["gate_passed"] is False and failed["prompt"] and failed["kept"] == []
    err = capsys.readouterr().err
    assert "defend: 5 items, 2 errors, gate passed" in err


def test_defend_param_sets_a_defense_field(defend_input, tmp_path, capsys):
    """--param reaches MirageParams: asking every specific claim for two corroborating sources
    keeps no more claims than the default, and the records say which were dropped for it."""
    plain, strict = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    assert main(["defend", str(defend_input), str(plain), "--nli", "lexical", "--quiet", "--dropped"]) == 0
    assert main(["defend", str(defend_input), str(strict), "--nli", "lexical", "--quiet", "--dropped",
                 "--param", "min_sources=2", "--param", "tau_slot=0.25"]) == 0
    a, b = _read(plain)[0], _read(strict)[0]
    assert len(b["kept"]) < len(a["kept"])
    assert any(c["reason"] == "uncorroborated specific" for c in b["dropped"])


def test_defend_batches_do_not_change_results(defend_input, tmp_path, capsys):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    assert main(["defend", str(defend_input), str(a), "--nli", "lexical", "--quiet"]) == 0
    assert main(["defend", str(defend_input), str(b), "--nli", "lexical", "--quiet", "--batch-size", "1",
                 "--mode", "corroboration"]) == 0
    for ra, rb in zip(_read(a), _read(b), strict=True):
        ra.get("stats", {}).pop("timings", None)
        rb.get("stats", {}).pop("timings", None)
        assert ra == rb
    assert "dropped" not in _read(a)[0]


def test_defend_quiet_prints_nothing_and_stdout_output(defend_input, capsys):
    assert main(["defend", str(defend_input), "-", "--nli", "lexical", "--quiet", "--on-block", "refuse"]) == 0
    cap = capsys.readouterr()
    assert cap.err == ""
    assert len([json.loads(x) for x in cap.out.splitlines()]) == 5


def test_defend_shows_progress_unless_quiet(defend_input, tmp_path, capsys):
    pytest.importorskip("tqdm")
    assert main(["defend", str(defend_input), str(tmp_path / "o.jsonl"), "--nli", "lexical"]) == 0
    err = capsys.readouterr().err
    assert "5/5" in err and "defend: 5 items" in err  # the bar, then the summary
    assert main(["defend", str(defend_input), str(tmp_path / "o.jsonl"), "--nli", "lexical", "--quiet"]) == 0
    assert capsys.readouterr().err == ""


# --------------------------------------------------------------------------- conformal


def _labelled_responses(n: int = 34) -> list[dict]:
    return load_sample()["data"][:n]


def test_conformal_calibrate_sample_and_files_agree(tmp_path, capsys):
    """The packaged sample, the same responses as a released JSON document and as JSONL
    calibrate to the same q_hat; the file loads as a ClaimConformal."""
    cal = [tmp_path / f"cal{k}.json" for k in range(3)]
    doc = tmp_path / "claims.json"
    doc.write_text(json.dumps({"data": _labelled_responses()}, indent=1), encoding="utf-8")
    jsonl = _write(tmp_path / "claims.jsonl", _labelled_responses())
    assert main(["conformal", "calibrate", "--alpha", "0.2", "-o", str(cal[0])]) == 0
    assert "q_hat" in capsys.readouterr().out
    assert main(["conformal", "calibrate", str(doc), "--alpha", "0.2", "-o", str(cal[1]), "--quiet"]) == 0
    assert main(["conformal", "calibrate", str(jsonl), "--alpha", "0.2", "-o", str(cal[2]), "--quiet"]) == 0
    assert capsys.readouterr().out == ""
    loaded = [ClaimConformal.load(p) for p in cal]
    assert loaded[0].alpha == 0.2 and loaded[0].n == 34 and loaded[0].score_name == "relevance"
    assert loaded[0].q_hat == loaded[1].q_hat == loaded[2].q_hat
    assert loaded[0].data_hash == loaded[1].data_hash == loaded[2].data_hash


def test_conformal_filter_jsonl(tmp_path, capsys):
    cal = tmp_path / "cal.json"
    assert main(["conformal", "calibrate", "--alpha", "0.3", "-o", str(cal), "--quiet"]) == 0
    q_hat = ClaimConformal.load(cal).q_hat
    rows = [{"id": r["id"], "prompt": r["prompt"],
             "claims": [{"text": c["subclaim"], "score": c["relevance-score"]} for c in r["claims"]]}
            for r in _labelled_responses(3)]
    inp = _write(tmp_path / "resp.jsonl", [rows[0], "garbage", {"id": "z", "claims": [{"text": "no score"}]},
                                           rows[1], {"claims": []}, rows[2]])
    out = tmp_path / "out.jsonl"
    assert main(["conformal", "filter", str(cal), str(inp), str(out)]) == 0
    recs = _read(out)
    assert [r["line"] for r in recs] == [1, 2, 3, 4, 5, 6]
    assert "not JSON" in recs[1]["error"] and recs[2]["id"] == "z" and "score" in recs[2]["error"]
    for rec, row in zip([recs[0], recs[3], recs[5]], rows):
        assert rec["id"] == row["id"] and rec["q_hat"] == q_hat and rec["n_claims"] == len(row["claims"])
        assert [c["kept"] for c in rec["claims"]] == [c["score"] >= q_hat for c in row["claims"]]
        assert rec["kept"] == [c["text"] for c in row["claims"] if c["score"] >= q_hat]
    assert recs[4]["n_claims"] == 0 and recs[4]["kept"] == []
    assert "conformal filter: 6 responses, 2 errors" in capsys.readouterr().err


LONE = "\ud800"  # a valid JSON escape (json and pydantic accept it) that UTF-8 cannot encode


def test_lone_surrogates_in_echoed_fields_never_lose_a_line(tmp_path, capsys):
    # issue 26: one such line used to end the batch with a traceback, every later line lost
    rows = [{"id": f"q{k}", "question": QUESTION, "passages": json.loads(json.dumps(PASSAGES))} for k in range(4)]
    rows[1]["id"] = f"q{LONE}"
    rows[2]["question"] += LONE
    rows[2]["passages"][0]["text"] += LONE
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="ascii")  # escapes as given
    for out in (tmp_path / "o.jsonl", "-"):
        assert main(["defend", str(src), str(out), "--nli", "lexical", "--quiet"]) == 0
        text = out.read_text(encoding="utf-8") if out != "-" else capsys.readouterr().out
        recs = [json.loads(line) for line in text.splitlines()]
        assert len(recs) == len(rows) and all("error" not in r for r in recs)
        assert recs[1]["id"] == f"q{LONE}"  # echoed exactly as it came in
        assert recs[0]["id"] == rows[0]["id"] and "\\ud800" not in text.splitlines()[0]

    cal = tmp_path / "cal.json"
    assert main(["conformal", "calibrate", "--alpha", "0.3", "-o", str(cal), "--quiet"]) == 0
    resp = [{"id": f"r{k}", "prompt": f"p{k}", "claims": [{"text": f"claim {k}", "score": 0.1 * k}]} for k in range(4)]
    resp[1]["id"] += LONE
    resp[2]["prompt"] += LONE
    resp[3]["claims"][0]["text"] += LONE
    src = tmp_path / "resp.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in resp), encoding="ascii")
    out = tmp_path / "kept.jsonl"
    assert main(["conformal", "filter", str(cal), str(src), str(out), "--quiet"]) == 0
    recs = _read(out)
    assert [r["id"] for r in recs] == [r["id"] for r in resp] and all("error" not in r for r in recs)
    assert recs[2]["prompt"] == resp[2]["prompt"] and recs[3]["claims"][0]["text"] == resp[3]["claims"][0]["text"]


@pytest.mark.parametrize("how", ["ctrl-c", "sigterm"])
def test_an_interrupted_run_keeps_the_previous_output(how, tmp_path, capsys, monkeypatch):
    # issue 26: OUT used to be truncated at the start, so a killed rerun destroyed a complete result
    import os
    import signal

    from rrag_kernels.pipelines.mirage import MirageDefense

    src = _write(tmp_path / "in.jsonl", [{"id": f"q{k}", "question": QUESTION, "passages": PASSAGES} for k in range(3)])
    out = tmp_path / "out.jsonl"
    assert main(["defend", str(src), str(out), "--nli", "lexical", "--quiet"]) == 0
    complete = out.read_text(encoding="utf-8")
    assert len(complete.splitlines()) == 3 and not (tmp_path / "out.jsonl.partial").exists()
    real = MirageDefense.defend_batch
    calls = []

    def stop_on_second_batch(self, items, **kw):
        calls.append(1)
        if len(calls) == 2:
            if how == "sigterm":
                os.kill(os.getpid(), signal.SIGTERM)
            raise KeyboardInterrupt
        return real(self, items, **kw)

    monkeypatch.setattr(MirageDefense, "defend_batch", stop_on_second_batch)
    assert main(["defend", str(src), str(out), "--nli", "lexical", "--quiet", "--batch-size", "1"]) == 130
    assert out.read_text(encoding="utf-8") == complete  # the previous result survives
    partial = (tmp_path / "out.jsonl.partial").read_text(encoding="utf-8")
    assert [json.loads(x)["id"] for x in partial.splitlines()] == ["q0"]  # whole lines
    err = capsys.readouterr().err
    assert "1 records written to" in err and "left as it was" in err and "interrupted" in err
    monkeypatch.setattr(MirageDefense, "defend_batch", real)
    assert main(["defend", str(src), str(out), "--nli", "lexical", "--quiet"]) == 0  # a rerun completes it
    assert not (tmp_path / "out.jsonl.partial").exists() and len(out.read_text().splitlines()) == 3
    assert main(["defend", str(src), "/dev/null", "--nli", "lexical", "--quiet"]) == 0  # not renamed over


def test_resume_continues_an_interrupted_run_to_the_same_output(tmp_path, capsys, monkeypatch):
    # issue 26: --resume keeps the records of OUT.partial (a line torn by a kill is dropped),
    # runs only the input lines it lacks, and renames: the same file as an uninterrupted run
    from rrag_kernels.pipelines.mirage import MirageDefense

    rows = [{"id": f"q{k}", "question": QUESTION, "passages": PASSAGES} for k in range(5)]
    src = _write(tmp_path / "in.jsonl", rows[:2] + ["not an object"] + rows[2:])
    whole = tmp_path / "whole.jsonl"
    assert main(["defend", str(src), str(whole), "--nli", "lexical", "--quiet", "--batch-size", "2"]) == 0
    out = tmp_path / "out.jsonl"
    real = MirageDefense.defend_batch
    seen = []

    def stop_on_third_batch(self, items, **kw):
        seen.append(len(items))
        if len(seen) == 3:
            raise KeyboardInterrupt
        return real(self, items, **kw)

    monkeypatch.setattr(MirageDefense, "defend_batch", stop_on_third_batch)
    assert main(["defend", str(src), str(out), "--nli", "lexical", "--quiet", "--batch-size", "2"]) == 130
    partial = tmp_path / "out.jsonl.partial"
    assert len(partial.read_text().splitlines()) == 4 and not out.exists()
    with open(partial, "a", encoding="utf-8") as fh:  # a kill in the middle of a line
        fh.write('{"line": 5, "id": "q')
    monkeypatch.setattr(MirageDefense, "defend_batch", real)
    seen.clear()
    assert main(["defend", str(src), str(out), "--nli", "lexical", "--batch-size", "2", "--resume"]) == 0
    assert "resuming after 4 of 6 records" in capsys.readouterr().err
    strip = [{k: v for k, v in json.loads(x).items() if k != "stats"} for x in out.read_text().splitlines()]
    want = [{k: v for k, v in json.loads(x).items() if k != "stats"} for x in whole.read_text().splitlines()]
    assert strip == want and not partial.exists()
    # nothing to resume: a plain run; a partial file of another input: a usage error
    assert main(["defend", str(src), str(out), "--nli", "lexical", "--quiet", "--resume"]) == 0
    partial.write_text('{"line": 3, "error": "x"}\n')
    assert "does not hold the first 1 lines" in _usage_error(
        ["defend", str(src), str(out), "--nli", "lexical", "--quiet", "--resume"], capsys)
    partial.write_text("garbage\n")
    assert "line 1 of" in _usage_error(["defend", str(src), str(out), "--nli", "lexical", "--resume"], capsys)
    assert "needs an output file" in _usage_error(["defend", str(src), "-", "--nli", "lexical", "--resume"], capsys)


def test_conformal_filter_resumes_from_a_partial_output(tmp_path, capsys):
    # issue 26: the same --resume as the other batch commands (the first lines kept, the rest run)
    cal = tmp_path / "cal.json"
    assert main(["conformal", "calibrate", "--alpha", "0.3", "-o", str(cal), "--quiet"]) == 0
    rows = [{"id": r["id"], "prompt": r["prompt"],
             "claims": [{"text": c["subclaim"], "score": c["relevance-score"]} for c in r["claims"]]}
            for r in _labelled_responses(5)]
    inp = _write(tmp_path / "resp.jsonl", rows[:2] + ["garbage"] + rows[2:])
    whole, out = tmp_path / "whole.jsonl", tmp_path / "out.jsonl"
    assert main(["conformal", "filter", str(cal), str(inp), str(whole), "--quiet"]) == 0
    kept = whole.read_text(encoding="utf-8").splitlines()[:3]
    (tmp_path / "out.jsonl.partial").write_text("\n".join(kept) + '\n{"line": 4, "id"', encoding="utf-8")
    assert main(["conformal", "filter", str(cal), str(inp), str(out), "--resume"]) == 0
    assert "resuming after 3 of 6 records" in capsys.readouterr().err
    assert out.read_text(encoding="utf-8") == whole.read_text(encoding="utf-8")
    assert not (tmp_path / "out.jsonl.partial").exists()


def test_conformal_sweep_table_and_csv(tmp_path, capsys):
    csv_path = tmp_path / "sweep.csv"
    assert main(["conformal", "sweep", "--alphas", "0.1", "0.3", "--splits", "20", "--csv", str(csv_path)]) == 0
    out = capsys.readouterr().out
    assert "fully supported" in out and "20 splits" in out
    lines = csv_path.read_text().splitlines()
    assert lines[0].startswith("alpha,target,fully_supported_mean") and len(lines) == 3
    assert lines[1].startswith("0.1,0.9")


def test_conformal_plot_png(tmp_path, capsys):
    if importlib.util.find_spec("matplotlib") is None:
        pytest.skip("matplotlib not installed")
    png = tmp_path / "tradeoff.png"
    assert main(["conformal", "plot", "--splits", "10", "-o", str(png), "--title", "sample"]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000
    assert "wrote" in capsys.readouterr().out


# --------------------------------------------------------------------------- mirage-eval, reliablerag


def test_mirage_eval_refuses_unlabelled_data(tmp_path, capsys):
    """Passages without 'label' would make NaN rows: a clear usage error pointing at defend."""
    data = _write(tmp_path / "u.jsonl", [{"id": f"u{k}", "question": QUESTION, "passages": PASSAGES} for k in range(3)])
    err = _usage_error(["mirage-eval", str(data), "--nli", "lexical", "--no-progress"], capsys)
    assert "no question has labelled passages" in err and "rrag defend" in err and "nan" not in err
    labelled = [{**p, "label": "clean", "false_sentences": []} for p in PASSAGES]
    _write(data, [{"id": "l", "question": QUESTION, "passages": labelled}, {"id": "u", "question": QUESTION,
                                                                          "passages": PASSAGES}])
    err = _usage_error(["mirage-eval", str(data), "--nli", "lexical", "--no-progress"], capsys)
    assert "1 of 2 questions (first: question 2)" in err


def _router(msgs):
    system = msgs[0]["content"]
    if system.startswith("Select"):
        return " B"
    if system.startswith("Answer"):
        return "Answer: Mexico."
    if system.startswith("Extract"):
        return '{"triples": []}'
    return "Credibility Score: 8"


RR_PASSAGES = [
    {"title": "Pan's Labyrinth", "text": "Pan's Labyrinth was directed by Guillermo del Toro.",
     "triples": [{"head": "Pan's Labyrinth", "relation": "directed by", "tail": "Guillermo del Toro", "sentence": 0}]},
    {"title": "Guillermo del Toro", "text": "Guillermo del Toro was born in Mexico.",
     "triples": [{"head": "Guillermo del Toro", "relation": "born in", "tail": "Mexico", "sentence": 0}]},
]


def test_reliablerag_jsonl_with_scripted_llm(tmp_path, monkeypatch, capsys):
    llm = ScriptedLLM(_router)
    monkeypatch.setattr(rr_cli, "make_llm", lambda args: llm)
    q = "In which country was the director of Pan's Labyrinth born?"
    inp = _write(tmp_path / "in.jsonl", [{"id": "a", "question": q, "passages": RR_PASSAGES}, "nope",
                                         {"id": "c", "question": q, "passages": RR_PASSAGES}, {"id": "d"}])
    out = tmp_path / "out.jsonl"
    assert main(["reliablerag", str(inp), "-o", str(out), "--embedder", "hashing", "--quiet"]) == 0
    assert capsys.readouterr().err == ""
    recs = _read(out)
    assert [r["line"] for r in recs] == [1, 2, 3, 4]
    assert recs[0]["id"] == "a" and recs[0]["answer"] == "Mexico" and recs[0]["chains"] and recs[0]["context"]
    assert recs[0]["credibility"] == [8.0, 8.0] and recs[0]["llm_calls"] >= 3
    assert recs[2]["answer"] == "Mexico" and "not JSON" in recs[1]["error"] and "question" in recs[3]["error"]
    # the oracle on passages without labels: an error record for that item, not a lost line;
    # every item failed, so the exit status says so (issue 24: it was 0)
    assert main(["reliablerag", str(inp), "-o", str(out), "--embedder", "hashing", "--credibility", "oracle",
                 "--selector", "reliability"]) == 1
    recs = _read(out)
    assert len(recs) == 4 and "label" in recs[0]["error"]
    err = capsys.readouterr().err
    assert "reliablerag: 4 items, 4 errors" in err and "every item failed (4 of 4)" in err


# --------------------------------------------------------------------------- usage errors


@pytest.mark.parametrize("argv, says", [
    (["conformal", "calibrate", "--alpha", "1.5", "-o", "{tmp}/c.json"], "--alpha: expected a number in (0, 1)"),
    (["conformal", "calibrate", "--alpha", "nan", "-o", "{tmp}/c.json"], "--alpha"),
    (["conformal", "calibrate", "{unlabelled}", "-o", "{tmp}/c.json"], "no 'claims'"),
    (["conformal", "calibrate", "-o", "{tmp}/c.json", "--supported", "yes"], "no claim is annotated as supported"),
    (["conformal", "calibrate", "--a", "0", "-o", "{tmp}/c.json"], "--a: expected a number in (0, 1]"),
    (["conformal", "calibrate"], "-o/--output"),
    (["conformal", "filter", "{csv}", "{unlabelled}", "{tmp}/o.jsonl"], "calibration:"),
    (["conformal", "sweep", "--alphas", "0.1", "0"], "--alphas"),
    (["conformal", "sweep", "--calib-fraction", "0.01"], "--calib-fraction"),
    (["conformal", "sweep", "{csv}"], "not JSONL"),
    (["conformal", "bogus"], "invalid choice"),
    (["conformal-demo", "--alpha", "1.5"], "--alpha: expected a number in (0, 1)"),
    (["conformal-demo", "--calib-fraction", "0.01"], "--calib-fraction"),
    (["defend", "{tmp}/missing.jsonl", "{tmp}/o.jsonl"], "no such file"),
    (["defend", "{csv}", "{tmp}/o.jsonl", "--nli", "lexical"], "not JSONL"),
    (["defend", "{latin1}", "{tmp}/o.jsonl", "--nli", "lexical"], "not UTF-8"),
    (["defend", "{unlabelled}", "{tmp}/no/such/dir/o.jsonl"], "no such folder"),
    (["defend", "{unlabelled}", "{tmp}"], "is a folder"),
    (["defend", "{unlabelled}", "{unlabelled}", "--nli", "lexical"], "is also an input"),
    (["defend", "{unlabelled}", "{tmp}/o.jsonl", "--nli", "no-such-scorer"], "--nli"),
    (["defend", "{unlabelled}", "{tmp}/o.jsonl", "--batch-size", "0"], "--batch-size"),
    (["defend", "{unlabelled}", "{tmp}/o.jsonl", "--mode", "greedy"], "invalid choice"),
    (["defend", "{unlabelled}", "{tmp}/o.jsonl", "--param", "min_sources"], "expected NAME=VALUE"),
    (["defend", "{unlabelled}", "{tmp}/o.jsonl", "--param", "no_such=1"], "'no_such' is not a MirageParams field"),
    (["defend", "{unlabelled}", "{tmp}/o.jsonl", "--param", "min_sources=two"], "min_sources: expected int"),
    (["defend", "{unlabelled}", "{tmp}/o.jsonl", "--param", "trust=1"], "cannot be set from the command line"),
    (["defend", "{unlabelled}", "{tmp}/o.jsonl", "--param", "contr_min=1.5", "--nli", "lexical"],
     "--param: contr_min: must be in [0, 1]"),
    (["defend", "{unlabelled}", "{tmp}/o.jsonl", "--param", "mode=paper"], "--param: mode has its own option, --mode"),
    (["mirage-eval", "{unlabelled}", "--param", "min_sources=-1"], "--param: min_sources"),
    (["reliablerag", "{unlabelled}", "--model", "m"], "--model"),
    (["reliablerag", "{unlabelled}", "--k", "30"], "at most 25"),
    (["reliablerag", "{unlabelled}", "--llm", "embedded", "--url", "http://x"], "not allowed with"),
    (["reliablerag", "{unlabelled}", "--judge", "lexical"], "--judge"),
    (["reliablerag", "{csv}", "--url", "http://127.0.0.1:9"], "not JSONL"),
    (["bench", "--repeat", "0"], "--repeat"),
    (["no-such-command"], "invalid choice"),
])
def test_usage_errors_exit_2_without_traceback(argv, says, tmp_path, capsys):
    files = {"tmp": tmp_path, "csv": _write(tmp_path / "x.csv", ["a,b", "1,2"]),
             "unlabelled": _write(tmp_path / "u.jsonl", [{"question": QUESTION, "passages": PASSAGES}])}
    (tmp_path / "l1.jsonl").write_bytes('{"question": "caf\u00e9"}\n'.encode("latin-1"))
    files["latin1"] = tmp_path / "l1.jsonl"
    err = _usage_error([a.format(**files) for a in argv], capsys)
    assert says in err


def test_the_llm_commands_share_one_llm_option_group(capsys, tmp_path):
    """reliablerag, reliablerag-eval, d2f and d2f-eval read the LLM options of one group
    (cli.common.add_llm_options): the same options, help and checks in each."""
    groups = {}
    for command in ("reliablerag", "reliablerag-eval", "d2f", "d2f-eval"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        text = capsys.readouterr().out
        assert "\nLLM:\n" in text, command
        groups[command] = text.split("\nLLM:\n", 1)[1].split("\n\n", 2)[1]  # the options after the description
    for option in ("--url URL", "--model MODEL", "--api-key-env", "--timeout TIMEOUT", "--n-threads", "--n-ctx"):
        assert all(option in g for g in groups.values()), option
    assert groups["d2f"] == groups["d2f-eval"] and "--llm" not in groups["d2f"]
    inp = _write(tmp_path / "q.jsonl", [{"question": "q?"}])
    for argv in (["d2f", str(inp), "--corpus", str(inp), "--n-threads", "0"], ["reliablerag", str(inp), "--n-ctx", "64"]):
        assert "expected an integer >= " in _usage_error(argv, capsys), argv


def test_a_line_nested_too_deeply_or_with_a_huge_integer_is_its_error_record(tmp_path, capsys):
    # fuzz/shells.py findings: an id nested ~1,000 deep crashed the writer (RecursionError), an
    # integer of 4,301 digits crashed the reader (ValueError): both lost the batch
    deep_id = '{"id": ' + '{"a": ' * 900 + "1" + "}" * 900 + ', "question": "q?", "passages": []}'
    huge = '{"id": ' + "9" * 4301 + ', "question": "q?", "passages": []}'
    inp = _write(tmp_path / "in.jsonl", [deep_id, huge, {"id": "ok", "question": QUESTION, "passages": PASSAGES}])
    out = tmp_path / "out.jsonl"
    assert main(["defend", str(inp), str(out), "--nli", "lexical", "--quiet"]) == 0
    recs = _read(out)
    assert [r["line"] for r in recs] == [1, 2, 3]
    assert "nested deeper than 64" in recs[0]["error"] and "number too long" in recs[1]["error"]
    assert recs[2]["id"] == "ok" and "error" not in recs[2]


def test_conformal_filter_reads_claims_by_the_server_rule(tmp_path):
    # fuzz/shells.py: the CLI echoed a claim 'text' that was not a str (and made any prompt a
    # str) where POST /filter answers 422; one rule now: a str text (or subclaim), a str prompt
    cal = tmp_path / "cal.json"
    assert main(["conformal", "calibrate", "--alpha", "0.3", "-o", str(cal), "--quiet"]) == 0
    good = {"id": "g", "prompt": "p", "claims": [{"text": "a claim", "score": 0.9}]}
    inp = _write(tmp_path / "in.jsonl", [
        good, {"id": 1, "prompt": "p", "claims": [{"text": 5, "score": 0.9}]},
        {"id": 2, "prompt": "p", "claims": [{"score": 0.9}]}, {"id": 3, "prompt": ["p"], "claims": []},
        {"id": 4, "question": "q", "claims": [{"subclaim": "s", "score": 0.1}]}])
    out = tmp_path / "out.jsonl"
    assert main(["conformal", "filter", str(cal), str(inp), str(out), "--quiet"]) == 0
    recs = _read(out)
    assert "error" not in recs[0] and recs[0]["kept"] in ([], ["a claim"])
    assert recs[1]["error"] == recs[2]["error"] == "claim 0 has no str 'text' (or 'subclaim')"
    assert recs[3]["error"] == "'prompt' must be a str, got list"
    assert recs[4]["prompt"] == "q" and recs[4]["claims"][0]["text"] == "s"
