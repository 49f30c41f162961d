"""The MIRAGE harness at the claim level: which claims are false, what a run delivers, the
per-regime rates beside the undefended baseline, out-of-fold rates, the label-blind defense
and the mirage-eval command line."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from rrag_kernels.__main__ import main
from rrag_kernels.models import nli, split_sentences
from rrag_kernels.pipelines.mirage import (
    PASSAGE_KEYS,
    Claim,
    MirageDefense,
    MirageParams,
    MirageResult,
    RunRecord,
    build_regimes,
    cross_validate_gate,
    fold_gates,
    format_report,
    is_false_claim,
    load_dataset,
    run_regimes,
    summarise,
    tune_gate,
)

DEV = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "polluted_dev.jsonl"


def _passage(pid, text, label, family=None, source_pid=None, false=(), url=None):
    return {"pid": pid, "text": text, "url": url or f"https://{pid}.example.org/x", "title": pid,
            "retrieval_score": 0.9, "label": label, "family": family, "source_pid": source_pid,
            "false_sentences": list(false)}


# Four sources. Undefended counts by construction (claims = sentences):
#   clean    c1..c4: 8 claims, 0 false
#   polluted p1..p4: 10 claims, 6 false (unambiguous 1, conflicting 1, misleading 2, fabricated 2)
#   mixed    c1 p2 c3 p4: 9 claims, 3 false (conflicting 1, fabricated 2)
# p3's marked sentence splits into two claims (both false); p4 marks two sentences.
ROW = {
    "id": "s1",
    "question": "q",
    "passages": [
        _passage("c1", "The mill opened in 1901. It had ten looms.", "clean"),
        _passage("c2", "The canal opened in 1820. It was dug by hand.", "clean"),
        _passage("c3", "The bridge is iron. We drop this true claim.", "clean"),
        _passage("c4", "The tower is 90 m tall. It has a clock.", "clean"),
        _passage("p1", "The mill opened in 1901. It had the alarm count of ninety looms.", "polluted",
                 "unambiguous", "c1", ["It had   the ALARM count of ninety looms."]),
        _passage("p2", "The canal opened in 1820. It was dug to drop by machines.", "polluted",
                 "conflicting", "c2", ["It was dug to drop by machines."]),
        _passage("p3", "The bridge is iron. It closed in 1950! It reopened in 1960.", "polluted",
                 "misleading", "c3", ["It closed in 1950! It reopened in 1960."]),
        _passage("p4", "The tower is 90 m. It has drop no clock. It was built by Romans.", "polluted",
                 "fabricated", "c4", ["It has drop no clock.", "It was built by Romans."]),
    ],
}


class StubDefense:
    """Keeps every claim without the word 'drop'; the gate blocks when a kept claim says
    'alarm'. Graph statistics are fixed (r_contr 0.1, 3 domains, support share 0.5)."""

    def __init__(self, on_block="parametric"):
        self.params = MirageParams(on_block=on_block)

    def defend(self, question, passages):
        assert all(set(p) <= set(PASSAGE_KEYS) for p in passages)
        claims = []
        for src, p in enumerate(passages):
            for sentence in split_sentences(p["text"]):
                c = Claim(len(claims), sentence, src, "example.org", 1.0)
                c.kept = "drop" not in sentence
                c.reason = None if c.kept else "pruned"
                claims.append(c)
        passed = not any("alarm" in c.text for c in claims if c.kept)
        stats = {"n_kept": sum(c.kept for c in claims), "r_contr": 0.1, "n_domains": 3, "support_share": 0.5,
                 "timings": {"nli_s": 0.0, "kernels_s": 0.0}}
        return MirageResult(question, passed, claims, stats, "prompt")


class TestFalseClaims:
    @pytest.mark.parametrize(
        "claim, marked, false",
        [
            ("It opened in 1904.", ["It opened in 1904."], True),
            ("it  OPENED in\n1904.", ["It opened in 1904."], True),  # whitespace and case
            ("It opened in 1904", ["Sadly, it opened in 1904 and closed."], True),  # claim inside the sentence
            ("The tower fell. It opened in 1904.", ["It opened in 1904."], True),  # claim contains it
            ("It opened in 1914.", ["It opened in 1904."], False),
            ("It opened in 1904.", [], False),
            ("It opened in 1904.", ["", "   "], False),  # empty markers match nothing
        ],
    )
    def test_rule(self, claim, marked, false):
        assert is_false_claim(claim, marked) is false


def _by_regime(records):
    return {r.regime: r for r in records}


class TestRunCounts:
    def test_counts_by_construction(self):
        rec = _by_regime(run_regimes(StubDefense(), [ROW], progress=False))
        assert all(r.truth_known for r in rec.values())
        counts = {k: (r.kept_true, r.kept_false, r.all_true, r.all_false) for k, r in rec.items()}
        assert counts == {"clean": (7, 0, 8, 0), "mixed": (5, 1, 6, 3), "polluted": (4, 4, 4, 6)}
        assert rec["polluted"].all_false_by_family == {"unambiguous": 1, "conflicting": 1, "misleading": 2, "fabricated": 2}
        assert rec["polluted"].kept_false_by_family == {"unambiguous": 1, "misleading": 2, "fabricated": 1}
        assert rec["mixed"].all_false_by_family == {"conflicting": 1, "fabricated": 2}
        assert rec["mixed"].kept_false_by_family == {"fabricated": 1}
        assert [r.gate_passed for r in rec.values()] == [True, True, False]

    def test_summary_rates_and_baseline(self):
        s = summarise(run_regimes(StubDefense(), [ROW], progress=False))
        clean, mixed, polluted = s["clean"], s["mixed"], s["polluted"]
        assert clean["pass_rate"] == 1.0 and clean["falsehood_rate"] == 0.0 and clean["true_delivery"] == 7 / 8
        assert clean["falsehood_rate_undefended"] == 0.0 and clean["true_delivery_undefended"] == 1.0
        assert mixed["falsehood_rate"] == 1 / 6 and mixed["true_delivery"] == 5 / 6
        assert mixed["falsehood_rate_undefended"] == 3 / 9
        assert mixed["false_by_family"] == {"conflicting": 0, "fabricated": 1}
        assert mixed["false_by_family_undefended"] == {"conflicting": 1, "fabricated": 2}
        assert (mixed["n_delivered"], mixed["n_delivered_false"], mixed["n_claims"], mixed["n_false"]) == (6, 1, 9, 3)
        # blocked with the parametric fallback: nothing delivered
        assert polluted["pass_rate"] == 0.0 and polluted["n_delivered"] == 0
        assert math.isnan(polluted["falsehood_rate"]) and polluted["true_delivery"] == 0.0
        assert polluted["falsehood_rate_undefended"] == 0.6
        assert polluted["false_by_family"] == {"conflicting": 0, "fabricated": 0, "misleading": 0, "unambiguous": 0}
        # passage-level purity stays (kept claims of every run, gate ignored)
        assert clean["purity"] == 1.0 and mixed["purity"] == 0.5 and polluted["purity"] == 0.0

    def test_passthrough_delivers_everything_on_block(self):
        s = summarise(run_regimes(StubDefense(on_block="passthrough"), [ROW], progress=False))
        polluted = s["polluted"]
        assert polluted["pass_rate"] == 0.0
        assert polluted["falsehood_rate"] == 0.6 == polluted["falsehood_rate_undefended"]
        assert polluted["true_delivery"] == 1.0
        assert polluted["false_by_family"] == polluted["false_by_family_undefended"]

    def test_missing_false_sentences_gives_no_claim_rates(self):
        row = json.loads(json.dumps(ROW))
        del row["passages"][5]["false_sentences"]  # p2: polluted, in mixed and polluted
        for p in row["passages"][:4]:
            del p["false_sentences"]  # clean passages need no marks
        s = summarise(run_regimes(StubDefense(), [row], progress=False))
        assert s["clean"]["falsehood_rate"] == 0.0 and s["clean"]["true_delivery"] == 7 / 8
        assert math.isnan(s["mixed"]["falsehood_rate"]) and math.isnan(s["polluted"]["true_delivery"])
        assert s["mixed"]["false_by_family"] == {} and s["mixed"]["purity"] == 0.5

    def test_unmatched_false_sentence_is_logged(self, caplog):
        row = json.loads(json.dumps(ROW))
        row["passages"][4]["false_sentences"] = ["Nothing like this is in the passage."]
        with caplog.at_level("WARNING", logger="rrag_kernels"):
            run_regimes(StubDefense(), [row], regimes=("polluted",), progress=False)
        assert "matches none of its sentences" in caplog.text and "p1" in caplog.text

    def test_errors_count_as_blocked(self):
        class Broken(StubDefense):
            def defend(self, question, passages):
                raise RuntimeError("boom")

        (rec,) = run_regimes(Broken(), [ROW], regimes=("mixed",), progress=False)
        assert rec.error == "RuntimeError: boom" and (rec.all_true, rec.all_false) == (6, 3)
        s = summarise([rec])["mixed"]
        assert s["errors"] == 1 and s["pass_rate"] == 0.0 and s["n_delivered"] == 0

    def test_report_table(self):
        text = format_report(summarise(run_regimes(StubDefense(), [ROW], progress=False)), "title")
        lines = text.splitlines()
        assert lines[0] == "title" and "falsehood def / undef" in lines[1] and "true delivered def / undef" in lines[1]
        mixed = next(line for line in lines if line.startswith("mixed"))
        assert "16.7% / 33.3%" in mixed and "83.3% / 100.0%" in mixed and "50.0%" in mixed
        assert mixed.endswith("conflicting 0/1, fabricated 1/2")
        polluted = next(line for line in lines if line.startswith("polluted"))
        assert "- / 60.0%" in polluted and "0.0% / 100.0%" in polluted


def _rec(qid, regime, share, kept_true, kept_false, all_true, all_false):
    return RunRecord(qid, regime, True, 3, 0.1, 3, share, 0, 0, 0, 0, {}, {}, 0.0, 0.0, 0.0,
                     truth_known=True, kept_true=kept_true, kept_false=kept_false, all_true=all_true,
                     all_false=all_false, kept_false_by_family={"fabricated": kept_false},
                     all_false_by_family={"fabricated": all_false})


class TestCrossValidation:
    """Folds of 2 over q0..q3: {q0, q2} and {q1, q3}. q0's polluted run has a support share
    of 0.45, every other polluted run 0.1, clean 0.5, mixed 0.4. Trained on {q1, q3} the gate
    needs share >= 0.15 (passes q0's polluted run and both mixed runs); trained on {q0, q2}
    it needs 0.5 (blocks polluted and mixed)."""

    RECORDS = (
        [_rec(f"q{k}", "clean", 0.5, 4, 0, 5, 0) for k in range(4)]
        + [_rec(f"q{k}", "polluted", 0.45 if k == 0 else 0.1, 2, 1, 3, 3) for k in range(4)]
        + [_rec(f"q{k}", "mixed", 0.4, 3, 1, 4, 2) for k in range(4)]
    )

    def test_fold_gates(self):
        gates = fold_gates(self.RECORDS, 2)
        assert [(sorted(held), g.min_support_share) for held, g in gates] == [(["q0", "q2"], 0.15), (["q1", "q3"], 0.5)]
        with pytest.raises(ValueError, match="^folds:"):
            fold_gates(self.RECORDS, 1)

    def test_out_of_fold_claim_rates(self):
        cv = cross_validate_gate(self.RECORDS, folds=2)
        assert cv["clean"]["pass_rate"] == 1.0 and cv["clean"]["falsehood_rate"] == 0.0
        assert cv["clean"]["true_delivery"] == 16 / 20
        assert cv["polluted"]["pass_rate"] == 0.25  # q0 only
        assert cv["polluted"]["falsehood_rate"] == 1 / 3 and cv["polluted"]["true_delivery"] == 2 / 12
        assert cv["polluted"]["falsehood_rate_undefended"] == 0.5
        assert cv["polluted"]["false_by_family"] == {"fabricated": 1}
        assert cv["mixed"]["pass_rate"] == 0.5  # q0 and q2
        assert cv["mixed"]["falsehood_rate"] == 2 / 8 and cv["mixed"]["true_delivery"] == 6 / 16
        # in-sample the tuned gate looks perfect on polluted sets; out of fold q0's run gets through
        in_sample = summarise(self.RECORDS, tune_gate(self.RECORDS)["thresholds"])
        assert in_sample["polluted"]["pass_rate"] == 0.0 and in_sample["mixed"]["pass_rate"] == 0.0


def _strip(passages):
    return [{k: v for k, v in p.items() if k not in ("label", "family", "false_sentences", "source_pid", "edit", "pid")}
            for p in passages]


def _result_view(result):
    stats = {k: v for k, v in result.stats.items() if k != "timings"}
    claims = [(c.text, c.source, c.domain, c.r_tilde, c.trust, c.score, c.kept, c.reason, c.contradicted_by)
              for c in result.claims]
    return result.gate_passed, result.fallback, result.prompt, result.removal_order, stats, claims


def _rows_for_blindness():
    rows = [ROW]
    if DEV.exists():
        rows += load_dataset(DEV)[:3]
    return rows


@pytest.mark.parametrize("row", _rows_for_blindness(), ids=lambda r: r["id"])
def test_defense_is_blind_to_the_labels(row):
    """Stripping label, family, false_sentences (and the other harness fields) from the
    passages changes nothing in a defense run."""
    defense = MirageDefense(nli=nli.load("lexical"), on_block="passthrough")
    for regime, labelled in build_regimes(row).items():
        with_labels = defense.defend(row["question"], labelled)
        without = defense.defend(row["question"], _strip(labelled))
        assert _result_view(with_labels) == _result_view(without), regime
        assert with_labels.claims, regime


class TestCommandLine:
    def _data(self, tmp_path):
        rows = []
        for k in range(4):
            row = json.loads(json.dumps(ROW))
            row["id"] = f"s{k}"
            rows.append(json.dumps(row))
        path = tmp_path / "dev.jsonl"
        path.write_text("\n".join(rows) + "\n")
        return path

    def test_prints_the_tables(self, tmp_path, capsys):
        assert main(["mirage-eval", str(self._data(tmp_path)), "--nli", "lexical", "--no-progress", "--folds", "2"]) == 0
        out = capsys.readouterr().out
        assert "gate as shipped" in out and "in-sample" in out and "cross-validated by question (2 folds" in out
        assert out.count("falsehood def / undef") == 3
        assert "NLI scorer: lexical (LexicalNLI); mode corroboration" in out

    def test_mode_paper_is_passed_on(self, tmp_path, capsys):
        assert main(["mirage-eval", str(self._data(tmp_path)), "--nli", "lexical", "--mode", "paper", "--no-progress",
                     "--no-tune"]) == 0
        assert "mode paper;" in capsys.readouterr().out

    @pytest.mark.parametrize(
        "args, says",
        [
            (["missing.jsonl"], "no such file"),
            (["{data}", "--nli", "no-such-scorer"], "--nli:"),
            (["{data}", "--folds", "1"], "--folds"),
            (["{data}", "--on-block", "drop"], "--on-block"),
            (["{data}", "--mode", "greedy"], "--mode"),
            (["{bad}", "--nli", "lexical"], "data: line 1 is not JSON"),
        ],
    )
    def test_mistakes_are_usage_errors(self, tmp_path, capsys, args, says):
        bad = tmp_path / "bad.jsonl"
        bad.write_text("{not json\n")
        args = [a.format(data=self._data(tmp_path), bad=bad) for a in args]
        with pytest.raises(SystemExit) as info:
            main(["mirage-eval", *args, "--no-progress"])
        assert info.value.code == 2
        assert says in capsys.readouterr().err


# --------------------------------------------------------------------------- multi-hop rows

MULTIHOP = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "multihop_dev.jsonl"


def _multihop_row():
    def p(pid, label, text, style=None, source=None):
        return {"pid": pid, "title": pid, "url": f"https://{pid}.example.org/x", "text": text, "label": label,
                "style": style, "source_pid": source, "triples": []}

    return {
        "id": "mh-x", "question": "Where was the composer of Opus born?", "answer": "Vienna", "aliases": [],
        "wrong_answer": "Salzburg", "sub_questions": [], "gold_chain": [],
        "passages": [
            p("g1", "gold", "Opus was written by Anna Berg. It premiered in 1901."),
            p("e1", "injected", "Opus was written by Anna Berg. It premiered in 1911.", "minimal_edit", "g1"),
            p("d1", "distractor", "Vienna has many concert halls."),
            p("g2", "gold", "Anna Berg was born in Vienna."),
            p("n1", "injected", "Records show Anna Berg grew up in a musical family. She was born in Salzburg.", "news"),
        ],
    }


def test_multihop_rows_are_converted_with_their_false_sentences(tmp_path):
    path = tmp_path / "mh.jsonl"
    path.write_text(json.dumps(_multihop_row()) + "\n", encoding="utf-8")
    [row] = load_dataset(path)
    by_pid = {q["pid"]: q for q in row["passages"]}
    # minimal edit: the sentence not in its source; news: the sentence naming the wrong answer
    assert by_pid["e1"]["false_sentences"] == ["It premiered in 1911."]
    assert by_pid["n1"]["false_sentences"] == ["She was born in Salzburg."]
    assert by_pid["e1"]["family"] == "injected_minimal_edit" and by_pid["n1"]["label"] == "polluted"
    assert by_pid["g1"]["label"] == by_pid["d1"]["label"] == "clean" and by_pid["g1"]["false_sentences"] == []
    regimes = build_regimes(row)
    assert [q["pid"] for q in regimes["clean"]] == ["g1", "d1", "g2"]
    assert [q["pid"] for q in regimes["mixed"]] == ["g1", "e1", "d1", "g2", "n1"]
    assert [q["pid"] for q in regimes["polluted"]] == ["e1", "d1", "n1"]
    # the labels never reach the defense: the harness shows only PASSAGE_KEYS
    records = run_regimes(MirageDefense(nli="lexical"), [row], progress=False)
    assert {r.regime for r in records} == {"clean", "mixed", "polluted"}
    mixed = next(r for r in records if r.regime == "mixed")
    assert mixed.truth_known and mixed.all_false == 2 and mixed.all_true == 6


def test_multihop_row_with_unknown_label_is_a_clear_error(tmp_path):
    row = _multihop_row()
    row["passages"][2]["label"] = "maybe"
    path = tmp_path / "mh.jsonl"
    path.write_text(json.dumps(row) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match="line 1 is a malformed multi-hop row"):
        load_dataset(path)


@pytest.mark.skipif(not MULTIHOP.is_file(), reason="../shared/data/multihop_dev.jsonl is not here")
def test_shared_multihop_file_marks_a_false_sentence_in_every_injected_passage():
    rows = load_dataset(MULTIHOP)
    assert len(rows) == 30
    for row in rows:
        injected = [q for q in row["passages"] if q["label"] == "polluted"]
        assert len(injected) == 2
        for q in injected:
            sentences = split_sentences(q["text"])
            assert q["false_sentences"], q["pid"]
            assert all(f in sentences for f in q["false_sentences"])


# --------------------------------------------------------------------------- contradiction ceiling


def _ceiling_row(witness: str) -> dict:
    """Two sources; source b's polluted variant moves a birth from Shrewsbury 1809 to
    Lichfield 1811. The mixed regime shows a (clean) and b's variant; a says ``witness``."""
    return {"id": "c", "question": "q", "passages": [
        _passage("a", f"Darwin was a naturalist. {witness}", "clean"),
        _passage("b", "Darwin was born in Shrewsbury in 1809. He sailed on the Beagle.", "clean"),
        _passage("pb", "Darwin was born in Lichfield in 1811. He sailed on the Beagle.", "polluted",
                 "unambiguous", "b", ["Darwin was born in Lichfield in 1811."]),
    ]}


def test_changed_values_are_the_replaced_names_and_numbers():
    from rrag_kernels.pipelines.mirage import changed_values

    src = "Darwin was a naturalist. Darwin was born in Shrewsbury in 1809. He sailed on the Beagle."
    assert changed_values(src, "Darwin was born in Lichfield in 1811.") == ["Shrewsbury", "1809"]
    # an added fact replaces nothing: no value to look for
    assert changed_values(src, "Darwin was born in Shrewsbury in 1809 to a rich family.") == []


@pytest.mark.parametrize("witness, found", [
    ("His home town was Shrewsbury.", True),   # states a changed value
    ("He was born in 1809.", True),
    ("He wrote many books.", False),            # nothing to contradict the variant with
])
def test_contradiction_ceiling_counts_false_sentences_another_passage_contradicts(witness, found):
    from rrag_kernels.pipelines.mirage import contradiction_ceiling

    c = contradiction_ceiling([_ceiling_row(witness)])
    mixed = c["mixed"]
    assert mixed["false_sentences"] == 1 and mixed["with_evidence"] == int(found)
    assert mixed["uncontradicted"] == int(not found) and mixed["no_value"] == mixed["no_source"] == 0
    assert mixed["by_family"] == {"unambiguous": [int(not found), 1]}
    # mixed shows a (2 claims) and pb (2 claims): the floor removes the contradicted one only
    assert mixed["claims"] == 4
    assert mixed["falsehood_floor"] == pytest.approx(0 / 3 if found else 1 / 4)
    assert mixed["falsehood_floor_named_only"] == pytest.approx(0 / 3 if found else 1 / 4)
    # the polluted regime shows pb alone: nothing else to contradict it
    assert c["polluted"]["uncontradicted"] == 1 and c["polluted"]["falsehood_floor"] == pytest.approx(1 / 2)


def test_a_change_of_no_name_or_number_counts_as_contradictable_in_the_floor():
    """A negation replaces no name or number: the text match cannot tell whether another
    passage contradicts it, so the floor counts it removable and the named-only floor not."""
    from rrag_kernels.pipelines.mirage import contradiction_ceiling

    row = _ceiling_row("He wrote many books.")
    row["passages"][2] = _passage("pb", "Darwin was born in Shrewsbury in 1809. He never sailed on the Beagle.",
                                  "polluted", "conflicting", "b", ["He never sailed on the Beagle."])
    mixed = contradiction_ceiling([row])["mixed"]
    assert (mixed["no_value"], mixed["uncontradicted"], mixed["with_evidence"]) == (1, 0, 0)
    assert mixed["falsehood_floor"] == 0.0 and mixed["falsehood_floor_named_only"] == pytest.approx(1 / 4)


def test_the_variants_own_false_sentence_is_not_its_evidence():
    """The value searched for must appear in the true sentences of *other* passages: a
    polluted passage that repeats the true value in its false sentence's neighbour counts,
    one whose only mention is in a false sentence does not."""
    from rrag_kernels.pipelines.mirage import contradiction_ceiling

    row = _ceiling_row("He wrote many books.")
    row["passages"].append(_passage("pa", "Darwin was a naturalist. Shrewsbury was his town in 1809.", "polluted",
                                    "fabricated", "a", ["Shrewsbury was his town in 1809."]))
    c = contradiction_ceiling([row])
    assert c["polluted"]["with_evidence"] == 0  # pa's mention of Shrewsbury is itself marked false
    assert c["polluted"]["uncontradicted"] >= 1


def test_limit_runs_the_first_questions_only(tmp_path):
    from rrag_kernels.pipelines.mirage import evaluate

    path = tmp_path / "p.jsonl"
    path.write_text("".join(json.dumps({**ROW, "id": f"s{k}"}) + "\n" for k in range(3)), encoding="utf-8")
    report = evaluate(path, nli="lexical", tune=False, progress=False, limit=2)
    assert {r.qid for r in report["records"]} == {"s0", "s1"}
    assert {r.qid for r in evaluate(path, nli="lexical", tune=False, progress=False)["records"]} == {"s0", "s1", "s2"}
    for bad in (0, -1):
        with pytest.raises(ValueError, match="limit"):
            evaluate(path, nli="lexical", tune=False, progress=False, limit=bad)
