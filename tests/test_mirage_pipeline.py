"""MirageDefense end to end: result shape, what it may read, bad inputs, batch behaviour,
pairing modes, counter-evidence probing, and the evaluation harness."""

from __future__ import annotations

import json
from collections.abc import Mapping
from importlib import resources
from pathlib import Path

import numpy as np
import pytest

from rrag_kernels.models import split_sentences
from rrag_kernels.pipelines.mirage import (
    GateThresholds,
    MirageDefense,
    MirageParams,
    RunRecord,
    build_regimes,
    cross_validate_gate,
    load_dataset,
    run_regimes,
    summarise,
    tune_gate,
)

DEV = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "polluted_dev.jsonl"


def _sample():
    return json.loads(resources.files("rrag_kernels").joinpath("data/mirage_sample.json").read_text())


class FixedNLI:
    """Deterministic scorer: a pair whose texts share the marker word 'agree' entails, one
    where exactly one side says 'never' contradicts, everything else is neutral."""

    labels = ("contradiction", "entailment", "neutral")  # a non-default column order

    def __init__(self):
        self.calls = 0

    def predict_proba(self, premises, hypotheses):
        self.calls += 1
        out = np.zeros((len(premises), 3), dtype=np.float32)
        for n, (a, b) in enumerate(zip(premises, hypotheses)):
            if ("never" in a) != ("never" in b):
                out[n] = (0.9, 0.05, 0.05)
            elif "agree" in a and "agree" in b:
                out[n] = (0.02, 0.95, 0.03)
            else:
                out[n] = (0.1, 0.1, 0.8)
        return out


DROP_REASONS = ("capped", "pruned", "contradicted", "contradicted by a better-corroborated claim",
                "contradicted, equally corroborated", "uncorroborated specific", "contradicted by counter-evidence",
                "asserted only by one coordinated source", "coordinated source, not corroborated by another")


def _passages(*texts, urls=None, scores=None):
    out = []
    for n, t in enumerate(texts):
        p = {"text": t}
        if urls is not None:
            p["url"] = urls[n]
        if scores is not None:
            p["retrieval_score"] = scores[n]
        out.append(p)
    return out


# Sources 0 and 1 agree (FixedNLI: support), source 2 contradicts both.
AGREEING = _passages(
    "The bridge opened in 1932 and we agree on it.",
    "The bridge opened in 1932 and we agree on it too.",
    "The bridge never opened in 1932 and we agree on it.",
    urls=["https://a.org/x", "https://b.com/y", "https://c.net/z"],
    scores=[0.9, 0.8, 0.85],
)


class TestText:
    def test_split_sentences_keeps_abbreviations_and_decimals(self):
        s = split_sentences("Dr. Smith paid $3.5 million in the U.S. Army era. It worked! Did it? Yes.")
        assert s == ["Dr. Smith paid $3.5 million in the U.S. Army era.", "It worked!", "Did it?", "Yes."]

    def test_split_sentences_empty_and_type(self):
        assert split_sentences("   ") == []
        with pytest.raises(TypeError, match="^text:"):
            split_sentences(None)


class TestDefend:
    def test_sample_offline_default(self):
        defense = MirageDefense()
        for item in _sample()["questions"]:
            passages = [{k: p[k] for k in ("text", "url", "title", "retrieval_score")} for p in item["passages"]]
            result = defense.defend(item["question"], passages)
            assert result.claims, "sentences become claims"
            assert all(0 <= c.source < len(passages) for c in result.claims)
            dropped = [c for c in result.claims if not c.kept]
            assert all(c.reason in DROP_REASONS for c in dropped), {c.reason for c in dropped}
            assert all(c.reason is None for c in result.claims if c.kept)
            # The default mode decides contradictions by corroboration: no greedy removal order.
            assert defense.params.mode == "corroboration" and result.removal_order == []
            assert result.stats["n_kept"] == len(result.kept_claims)
            t = result.stats["timings"]
            assert t["nli_s"] >= 0 and t["kernels_s"] > 0
            if result.gate_passed:
                assert "C1 [score" in result.prompt
            else:
                assert "own knowledge" in result.prompt

    def test_never_reads_label_fields(self):
        forbidden = {"label", "family", "source_pid", "edit"}

        class Guarded(Mapping):
            def __init__(self, data):
                self._d = data

            def __getitem__(self, key):
                if key in forbidden:
                    raise AssertionError(f"the defense read {key!r}")
                return self._d[key]

            def __iter__(self):
                raise AssertionError("the defense iterated over a passage's keys")

            def __len__(self):
                return len(self._d)

        item = _sample()["questions"][0]
        result = MirageDefense(nli=FixedNLI()).defend(item["question"], [Guarded(p) for p in item["passages"]])
        assert result.claims

    def test_label_order_from_scorer(self):
        # Two agreeing claims from different sources: support edge; a 'never' claim contradicts.
        result = MirageDefense(nli=FixedNLI(), d_min=1, mode="paper").defend("q", AGREEING)
        by_source = {c.source: c for c in result.claims}
        assert by_source[0].support == 1 and by_source[1].support == 1
        assert by_source[2].contradictions == 2
        assert not by_source[2].kept and by_source[2].reason == "contradicted"
        assert by_source[0].kept and by_source[1].kept
        assert result.gate_passed and result.stats["n_support"] == 1 and result.stats["n_contradiction"] == 0

    def test_empty_and_missing_fields(self):
        defense = MirageDefense(nli=FixedNLI())
        empty = defense.defend("q", [])
        assert not empty.gate_passed and empty.claims == [] and "own knowledge" in empty.prompt
        result = defense.defend("q", [{"text": ""}, {"text": "One sentence here."}])
        assert [c.domain for c in result.claims] == ["unknown"]
        assert result.claims[0].r_tilde == 1.0  # no retrieval scores: all rank equal

    def test_bad_inputs(self):
        defense = MirageDefense(nli=FixedNLI(), on_bad_passage="error")  # the default leaves a bad passage out
        assert MirageDefense(nli=FixedNLI()).defend("q", [{"url": "https://x.org"}]).stats["skipped_passages"] == \
            [{"passage": 0, "error": "TypeError: passages[0].text: expected a str, got NoneType"}]
        with pytest.raises(TypeError, match="^question:"):
            defense.defend(None, [])
        with pytest.raises(TypeError, match="^passages:"):
            defense.defend("q", "not a list")
        with pytest.raises(TypeError, match=r"^passages\[0\]\.text:"):
            defense.defend("q", [{"url": "https://x.org"}])
        with pytest.raises(ValueError, match=r"^passages\[0\]\.retrieval_score:"):
            defense.defend("q", [{"text": "a.", "retrieval_score": float("nan")}])
        with pytest.raises(TypeError, match=r"^passages\[1\]\.url:"):
            defense.defend("q", [{"text": "a."}, {"text": "b.", "url": 3}])
        with pytest.raises(ValueError, match="^question: must be a non-empty string"):
            defense.defend(" \n", [])
        with pytest.raises(ValueError, match="^tau:"):
            MirageDefense(nli=FixedNLI(), tau=1.5)
        with pytest.raises(ValueError, match="^pairing:"):
            MirageDefense(nli=FixedNLI(), pairing="dense")
        with pytest.raises(TypeError, match="^not_a_param:"):
            MirageDefense(nli=FixedNLI(), not_a_param=1)
        with pytest.raises(TypeError, match="^nli:"):
            MirageDefense(nli=object())

    def test_cap_keeps_highest_rtilde_ties_by_index(self):
        passages = _passages("A one. A two.", "B one. B two.", "C one.", scores=[0.5, 1.0, 1.0])
        result = MirageDefense(nli=FixedNLI(), max_claims=3).defend("q", passages)
        active = [c.text for c in result.claims if c.reason != "capped"]
        assert active == ["B one.", "B two.", "C one."]
        assert [c.reason for c in result.claims[:2]] == ["capped", "capped"]

    def test_batch_reports_failures_per_item(self):
        defense = MirageDefense(nli=FixedNLI())
        items = [
            {"question": "q1", "passages": _passages("Fine text.")},
            {"question": "q2", "passages": "broken"},
            {"question": "q3", "passages": _passages("Also fine.")},
        ]
        results = defense.defend_batch(items, progress=False)
        assert [r.error is None for r in results] == [True, False, True]
        assert "passages" in results[1].error and not results[1].gate_passed

    def test_probing_adds_self_contradiction(self):
        class Retriever:
            def search(self, query, k):
                assert query.endswith("myth false controversy dispute correction retraction")
                return [{"text": "It never happened like that."}] * k

        passages = _passages("The bridge opened in 1932.", "The tower opened in 1950.", scores=[0.9, 0.8])
        result = MirageDefense(nli=FixedNLI(), retriever=Retriever(), probe_m=1).defend("q", passages)
        penalties = [c.self_contradiction for c in result.claims]
        assert penalties == [pytest.approx(0.9), 0.0]  # only the top-1 claim by r̃ is probed

    def test_semantic_and_hybrid_pairing(self):
        class Embedder:
            def encode(self, texts):
                # claims mentioning 'bridge' point one way, the rest another
                return np.array([[1.0, 0.0] if "bridge" in t else [0.0, 1.0] for t in texts], dtype=np.float32)

        passages = _passages(
            "The bridge opened in 1932 and we agree.", "A bridge crossing began service that year, agree.",
            "Unrelated words entirely here.", urls=["https://a.org", "https://b.org", "https://c.org"],
        )
        lexical = MirageDefense(nli=FixedNLI()).defend("q", passages)
        semantic = MirageDefense(nli=FixedNLI(), embedder=Embedder(), pairing="semantic", tau_sem=0.9).defend("q", passages)
        hybrid = MirageDefense(nli=FixedNLI(), embedder=Embedder(), pairing="hybrid", tau_sem=0.9).defend("q", passages)
        assert lexical.stats["n_pairs"] == 0  # paraphrases share too few words
        assert semantic.stats["n_pairs"] == 1 and semantic.stats["n_support"] == 1
        assert hybrid.stats["n_pairs"] >= semantic.stats["n_pairs"]


class TestRetrievalScore:
    """r̃ for both score kinds (top_passages) and through the defense."""

    @pytest.mark.parametrize(
        "scores, kind, chosen, r_tilde",
        [
            # similarity >= 0: the paper's s / max s
            ([0.5, 1.0, 0.25], "similarity", [0, 1, 2], [0.5, 1.0, 0.25]),
            # negative similarities are shifted so the lowest gets 0 (once: all 1.0)
            ([-1.0, -3.0, -2.0], "similarity", [0, 1, 2], [1.0, 0.0, 0.5]),
            ([2.0, -2.0], "similarity", [0, 1], [1.0, 0.0]),
            # distances: nearest 1, farthest 0, linear between (once: inverted)
            ([0.1, 0.3, 0.2], "distance", [0, 1, 2], [1.0, 0.0, 0.5]),
            ([-5.0, -3.0], "distance", [0, 1], [1.0, 0.6]),  # read as similarities 5 and 3
            # all equal, one passage, all zero: every passage ranks equal
            ([0.7, 0.7], "similarity", [0, 1], [1.0, 1.0]),
            ([0.7, 0.7], "distance", [0, 1], [1.0, 1.0]),
            ([-0.4], "similarity", [0], [1.0]),
            ([3.0], "distance", [0], [1.0]),
            ([0.0, 0.0], "similarity", [0, 1], [1.0, 1.0]),
            # missing scores: r̃ 0, ranked after the scored; none at all: all equal
            ([None, 0.8, 0.4], "similarity", [0, 1, 2], [0.0, 1.0, 0.5]),
            ([None, None], "distance", [0, 1], [1.0, 1.0]),
            ([], "similarity", [], []),
            # extremes do not overflow
            ([1.7e308, -1.7e308], "similarity", [0, 1], [1.0, 0.0]),
        ],
    )
    def test_relative_scores(self, scores, kind, chosen, r_tilde):
        from rrag_kernels.pipelines.mirage import top_passages

        got_chosen, got_r = top_passages(scores, 10, kind)
        assert got_chosen == chosen
        assert got_r == pytest.approx(r_tilde, abs=1e-12)

    def test_top_k_by_kind(self):
        from rrag_kernels.pipelines.mirage import top_passages

        scores = [0.9, 0.1, 0.5, None, 0.5]
        assert top_passages(scores, 2, "similarity")[0] == [0, 2]  # ties by index
        assert top_passages(scores, 2, "distance")[0] == [1, 2]
        assert top_passages(scores, 5, "distance")[0] == [0, 1, 2, 3, 4]  # unscored last, then in order
        assert top_passages(scores, 4, "distance")[0] == [0, 1, 2, 4]

    def test_defense_reads_the_kind(self):
        passages = _passages("Near one.", "Far one.", "Middle one.", scores=[0.1, 0.9, 0.5])
        sim = MirageDefense(nli=FixedNLI(), top_k=2).defend("q", passages)
        dist = MirageDefense(nli=FixedNLI(), top_k=2, score_kind="distance").defend("q", passages)
        assert [(c.text, c.r_tilde) for c in sim.claims] == [("Far one.", 1.0), ("Middle one.", pytest.approx(5 / 9))]
        assert [(c.text, c.r_tilde) for c in dist.claims] == [("Near one.", 1.0), ("Middle one.", 0.0)]
        negative = MirageDefense(nli=FixedNLI()).defend("q", _passages("A.", "B.", scores=[-0.2, -0.6]))
        assert [c.r_tilde for c in negative.claims] == [1.0, 0.0]  # once 1.0 and 1.0

    def test_bad_kind_and_scores(self):
        from rrag_kernels.pipelines.mirage import top_passages

        with pytest.raises(ValueError, match="^score_kind: expected one of"):
            MirageDefense(nli=FixedNLI(), score_kind="rank")
        with pytest.raises(ValueError, match="^score_kind:"):
            top_passages([1.0], 1, "Similarity")
        defense = MirageDefense(nli=FixedNLI(), on_bad_passage="error")
        for bad in (float("inf"), float("-inf"), float("nan")):
            with pytest.raises(ValueError, match=r"^passages\[0\]\.retrieval_score: must be finite"):
                defense.defend("q", [{"text": "a.", "retrieval_score": bad}])
        with pytest.raises(TypeError, match=r"^passages\[1\]\.retrieval_score: expected a number, got str"):
            defense.defend("q", [{"text": "a.", "retrieval_score": 1.0}, {"text": "b.", "retrieval_score": "0.5"}])
        with pytest.raises(TypeError, match=r"^passages\[0\]\.retrieval_score: expected a number, got bool"):
            defense.defend("q", [{"text": "a.", "retrieval_score": True}])


class TestPromptAndFallback:
    """The prompt of a passed gate says what its kept set holds; on BLOCK it follows on_block."""

    def test_clean_kept_set_is_checked_not_verified(self):
        result = MirageDefense(nli=FixedNLI(), d_min=1).defend("q", AGREEING)
        assert result.gate_passed and result.fallback is None
        assert "verified" not in result.prompt.lower()
        assert "Claims retained after cross-source checking" in result.prompt
        assert "None of them is contradicted by another retained claim." in result.prompt
        assert all(c.contradicted_by == [] for c in result.claims)

    def test_contradictions_left_in_the_kept_set_are_named(self):
        # With alpha huge every claim's score dwarfs the contradiction weights: nothing is
        # pruned, so the contradiction edges stay inside the kept set.
        result = MirageDefense(nli=FixedNLI(), d_min=1, alpha=50.0, min_support_share=0.0,
                               mode="paper").defend("q", AGREEING)
        assert result.gate_passed and result.stats["n_contradiction"] == 2
        by_source = {c.source: c for c in result.claims}
        assert by_source[2].contradicted_by == [by_source[0].index, by_source[1].index]
        assert by_source[0].contradicted_by == [by_source[2].index]
        prompt = result.prompt
        assert "verified" not in prompt.lower()
        kept = sorted(result.kept_claims, key=lambda c: (-c.score, c.index))
        rank = {c.source: n for n, c in enumerate(kept, 1)}
        n0, n1, n2 = rank[0], rank[1], rank[2]
        assert "3 of them are still contradicted by other retained claims: " in prompt
        assert f"C{n2} (by C{min(n0, n1)}, C{max(n0, n1)})" in prompt
        assert f"C{n2} [score {by_source[2].score:.2f}; source: c.net; contradicted by C{min(n0, n1)}, C{max(n0, n1)}]" in prompt

    BLOCKED = _passages("Only one source here.", "And a second sentence.", urls=["https://a.org/x", "https://a.org/y"])

    def test_on_block_parametric_is_the_default(self):
        result = MirageDefense(nli=FixedNLI()).defend("q", self.BLOCKED)  # 1 domain < d_min 2
        assert not result.gate_passed and result.fallback == "parametric"
        assert "own knowledge" in result.prompt and "Only one source" not in result.prompt

    def test_on_block_refuse(self):
        result = MirageDefense(nli=FixedNLI(), on_block="refuse").defend("q", self.BLOCKED)
        assert not result.gate_passed and result.fallback == "refuse"
        assert result.prompt.startswith("Do not answer the question")
        assert "1 independent source unit(s) < 2" in result.prompt and "Only one source" not in result.prompt

    def test_on_block_passthrough(self):
        passages = self.BLOCKED + [{"text": "A third\x00one, unscored.", "url": "Wikipedia"}]
        result = MirageDefense(nli=FixedNLI(), on_block="passthrough", top_k=1).defend("q", passages)
        assert not result.gate_passed and result.fallback == "passthrough"
        assert "did NOT pass cross-source checking" in result.prompt
        # every passage, beyond top_k too, unchanged but for clean_text
        assert "P1 [source: a.org] Only one source here.\nP2 [source: a.org] And a second sentence.\n" \
               "P3 [source: unknown] A third one, unscored." in result.prompt
        empty = MirageDefense(nli=FixedNLI(), on_block="passthrough").defend("q", [])
        assert empty.fallback == "parametric" and "own knowledge" in empty.prompt

    def test_on_block_in_batch_errors(self):
        items = [{"question": "q1", "passages": "broken"}]
        for mode, want in (("refuse", "refuse"), ("passthrough", "parametric"), ("parametric", "parametric")):
            (result,) = MirageDefense(nli=FixedNLI(), on_block=mode).defend_batch(items, progress=False)
            assert result.error and result.fallback == want

        class Failing(FixedNLI):
            def predict_proba(self, premises, hypotheses):
                raise RuntimeError("scorer down")

        ok = [{"question": "q", "passages": AGREEING}]
        (result,) = MirageDefense(nli=Failing(), on_block="passthrough").defend_batch(ok, progress=False)
        assert "scorer down" in result.error and result.fallback == "passthrough"
        assert "P3 [source: c.net] The bridge never opened" in result.prompt

    def test_on_block_validated(self):
        with pytest.raises(ValueError, match="^on_block: expected one of"):
            MirageDefense(nli=FixedNLI(), on_block="drop")
        with pytest.raises(ValueError, match="^on_block:"):
            MirageParams(on_block=None).validate()


class TestHarness:
    ROW = {
        "id": "t1",
        "question": "q",
        "passages": [
            {"pid": "c1", "text": "Clean one agree.", "url": "https://a.org", "label": "clean", "retrieval_score": 0.9},
            {"pid": "c2", "text": "Clean two agree.", "url": "https://b.org", "label": "clean", "retrieval_score": 0.8},
            {"pid": "p1", "text": "Never one agree.", "url": "https://a.org", "label": "polluted",
             "family": "conflicting", "source_pid": "c1", "retrieval_score": 0.9},
            {"pid": "p2", "text": "Never two agree.", "url": "https://b.org", "label": "polluted",
             "family": "fabricated", "source_pid": "c2", "retrieval_score": 0.8},
        ],
    }

    def test_regimes(self):
        reg = build_regimes(self.ROW)
        assert [p["pid"] for p in reg["clean"]] == ["c1", "c2"]
        assert [p["pid"] for p in reg["polluted"]] == ["p1", "p2"]
        assert [p["pid"] for p in reg["mixed"]] == ["c1", "p2"]  # every second source polluted

    def test_run_and_summarise(self):
        records = run_regimes(MirageDefense(nli=FixedNLI(), d_min=1), [self.ROW], progress=False)
        assert {r.regime for r in records} == {"clean", "mixed", "polluted"}
        summary = summarise(records)
        assert summary["clean"]["purity"] == 1.0
        assert 0.0 <= summary["mixed"]["clean_kept"] <= 1.0

    def test_tune_gate_maximises_the_objective(self):
        def rec(qid, regime, r_contr, n_domains, share):
            return RunRecord(qid, regime, True, 3, r_contr, n_domains, share, 1, 0, 1, 0, {}, {}, 0.0, 0.0, 0.0)

        records = [rec(f"q{k}", "clean", 0.1, 3, 0.5) for k in range(4)]
        records += [rec(f"q{k}", "polluted", 0.1, 3, 0.1) for k in range(4)]
        records += [rec(f"q{k}", "mixed", 0.3, 3, 0.4) for k in range(4)]
        best = tune_gate(records)
        thr = best["thresholds"]
        assert best["pass_clean"] == 1.0 and best["pass_polluted"] == 0.0
        assert 0.1 < thr.min_support_share <= 0.5  # only the support share separates them
        assert best["pass_mixed"] == 1.0  # ties broken towards passing mixed sets
        assert GateThresholds(0.98, 2, 0.0).passes(records[0])
        cv = cross_validate_gate(records, folds=2)
        assert cv["clean"]["pass_rate"] == 1.0 and cv["polluted"]["pass_rate"] == 0.0

    @pytest.mark.skipif(not DEV.exists(), reason=f"dev data not found at {DEV}")
    def test_dev_set_smoke(self):
        rows = load_dataset(DEV)[:2]
        records = run_regimes(MirageDefense(), rows, progress=False)
        assert len(records) == 6 and all(r.error is None for r in records)
        assert all(r.cand_clean + r.cand_polluted > 0 for r in records)

    @pytest.mark.skipif(not DEV.exists(), reason=f"dev data not found at {DEV}")
    @pytest.mark.slow  # make test-all: the gate grid over the dev file (~40 s quiet)
    def test_shipped_gate_against_the_tuned_ones(self):
        """Re-derives the shipped gate's choice on the dev set with the default scorer and
        mode: tune_gate keeps the paper's r_max and d_min, and the fold-tuned gates (which ask
        for a larger support share) deliver fewer true claims out of fold without a lower
        falsehood rate, so the shipped share stays 0.05. If the scorer or the pipeline
        changes, this says to look again."""
        records = run_regimes(MirageDefense(), load_dataset(DEV), progress=False)
        tuned = tune_gate(records)["thresholds"]
        p = MirageParams()
        # d_min counts source units since the units rule (pipelines/mirage/units.py): on this
        # file of single-topic sets the tuned gate asks for more of them; r_max stays the paper's.
        assert tuned.r_max == p.r_max
        shipped = summarise(records)
        folded = cross_validate_gate(records)
        assert shipped["mixed"]["true_delivery"] >= folded["mixed"]["true_delivery"]
        assert shipped["mixed"]["falsehood_rate"] <= folded["mixed"]["falsehood_rate"] + 0.02
        assert shipped["clean"]["pass_rate"] >= 0.85


class TestPackagedDemo:
    """What ``python -m rrag_kernels demo`` shows with the default judge: the facts planted in
    the sample's polluted passages (1899, 250 metres, 1882 / Louis Pasteur) are never delivered,
    in either mode, and each question keeps a true claim stating its answer."""

    PLANTED = ("1899", "250 metres", "1882")
    KEYS = ("text", "url", "title", "retrieval_score")

    @pytest.mark.parametrize("mode", ["corroboration", "paper"])
    def test_planted_facts_are_dropped(self, mode):
        pytest.importorskip("onnxruntime")
        defense = MirageDefense(mode=mode)
        answers = {0: "1889", 1: "1928"}
        for q, item in enumerate(_sample()["questions"]):
            passages = [{k: p[k] for k in self.KEYS} for p in item["passages"]]
            result = defense.defend(item["question"], passages)
            planted = [c for c in result.claims if any(f in c.text for f in self.PLANTED)]
            assert planted, "the sample lost its planted claims"
            assert all(item["passages"][c.source]["label"] == "polluted" for c in planted)
            assert not any(c.kept for c in planted), [c.text for c in planted if c.kept]
            assert any(c.kept and answers[q] in c.text and item["passages"][c.source]["label"] == "clean"
                       for c in result.claims)


def test_demo_command_prints_every_question(capsys):
    from rrag_kernels.__main__ import main

    assert main(["demo", "--nli", "lexical", "--mode", "paper", "--on-block", "refuse"]) == 0
    out = capsys.readouterr().out
    assert "mode: paper" in out and "on BLOCK: refuse" in out
    questions = _sample()["questions"]
    assert all(f"Q: {item['question']}" in out for item in questions)
    assert out.count("  gate: ") == len(questions)
