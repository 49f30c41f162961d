"""The input rules of an item and the method contract (pipelines/_items.py): one rule for
every method, ``run_batch`` with one result per item, ``to_record`` on every result."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import ConstantNLI, HashEmbedder

from rrag_kernels.pipelines import check_item, check_passages, check_question, json_text
from rrag_kernels.pipelines.conformal import ClaimConformal, ConformalRAG, MultiHopRetriever
from rrag_kernels.pipelines.mirage import MirageDefense
from rrag_kernels.pipelines.reliablerag import ReliableRAG, answer_batch


def test_question_rule():
    assert check_question("  Who? ") == "  Who? "
    assert check_question("a\ud800b") == "a\ufffdb"  # the package's one cleaning rule
    with pytest.raises(TypeError, match="^question: expected a str, got NoneType"):
        check_question(None)
    for blank in ("", " ", "\n\t"):
        with pytest.raises(ValueError, match="^question: must be a non-empty string"):
            check_question(blank)


def test_passage_rules_name_the_passage_and_field():
    got = check_passages([{"text": "a\x00b", "retrieval_score": np.float32(0.5), "label": "x"}])
    assert got == [{"text": "a b", "retrieval_score": 0.5, "label": "x"}]
    assert type(got[0]["retrieval_score"]) is float
    assert check_passages(()) == [] and check_passages([]) == []
    assert check_passages([{"text": "t", "label": "x"}], keys=("text", "url")) == [{"text": "t", "url": None}]
    cases = [
        ("not a list", TypeError, r"^passages: expected a list of dicts, got str"),
        ({"text": "t"}, TypeError, r"^passages: expected a list of dicts, got dict"),
        ([{"text": "t"}, "t"], TypeError, r"^passages\[1\]: expected a dict"),
        ([{"url": "u"}], TypeError, r"^passages\[0\]\.text: expected a str, got NoneType"),
        ([{"text": 3}], TypeError, r"^passages\[0\]\.text: expected a str, got int"),
        ([{"text": "t", "url": 1}], TypeError, r"^passages\[0\]\.url: expected a str or null"),
        ([{"text": "t", "title": ["x"]}], TypeError, r"^passages\[0\]\.title:"),
        ([{"text": "t", "retrieval_score": True}], TypeError, r"^passages\[0\]\.retrieval_score: expected a number"),
        ([{"text": "t", "retrieval_score": "1"}], TypeError, r"^passages\[0\]\.retrieval_score: expected a number"),
        ([{"text": "t", "retrieval_score": float("nan")}], ValueError, r"^passages\[0\]\.retrieval_score: must be finite"),
        ([{"text": "t", "retrieval_score": 10**400}], ValueError, r"^passages\[0\]\.retrieval_score: an integer of about"),
    ]
    for passages, kind, message in cases:
        with pytest.raises(kind, match=message):
            check_passages(passages)
    # ReliableRAG's passages may come as supplied triples alone
    assert check_passages([{"triples": []}], text_required=False) == [{"triples": []}]
    with pytest.raises(TypeError, match=r"^passages\[0\]\.text"):
        check_passages([{"text": 1, "triples": []}], text_required=False)


def test_item_rule():
    item = check_item({"id": 7, "question": "Q?", "passages": [{"text": "t"}]})
    assert (item.id, item.question, item.passages) == (7, "Q?", [{"text": "t"}])
    assert check_item({"question": "Q?"}, passages=False).passages is None
    with pytest.raises(ValueError, match="^item: no 'passages'"):
        check_item({"question": "Q?"})
    with pytest.raises(TypeError, match="^passages: expected a list of dicts, got NoneType"):
        check_item({"question": "Q?", "passages": None})
    with pytest.raises(ValueError, match="^item: no 'question'"):
        check_item({"passages": []})
    with pytest.raises(TypeError, match="^item: expected a dict"):
        check_item(["Q?"])


GOOD = {"id": "a", "question": "Where was the bridge opened?",
        "passages": [{"text": "The bridge opened in Oslo in 1932.", "url": "https://a.org/x"},
                     {"text": "Oslo's bridge opened in 1932 after six years.", "url": "https://b.org/y"}]}
BAD = [{"id": "no-question", "passages": []},
       {"id": "blank", "question": " ", "passages": []},
       {"id": "bad-passage", "question": "Where?", "passages": [{"text": 5}]},
       "not a dict"]


def _contract(results, n):
    """One result per item, in order; each has ``error`` and a record JSON can write."""
    assert len(results) == n
    records = [r.to_record() for r in results]
    for r, rec in zip(results, records):
        assert isinstance(rec, dict) and ("error" in rec) == (r.error is not None)
        json_text(rec)
    return records


def test_mirage_follows_the_contract():
    defense = MirageDefense(nli=ConstantNLI("entailment"), on_bad_passage="error")
    records = _contract(defense.run_batch([GOOD, *BAD, GOOD], progress=False), 6)
    assert "error" not in records[0]
    same = {k: v for k, v in records[0].items() if k != "stats"}  # stats hold timings
    assert same == {k: v for k, v in records[-1].items() if k != "stats"}
    for rec in records[1:5]:
        assert rec["error"] and rec["gate_passed"] is False and rec["prompt"]
    results = defense.run_batch([GOOD, BAD[0]], progress=False)
    assert results[0].gate_reason == records[0]["gate_reason"] and results[1].gate_reason == "error"
    assert records[1]["error"] == "ValueError: item: no 'question' (a non-empty str)"
    assert records[2]["error"] == "ValueError: question: must be a non-empty string"
    assert records[3]["error"] == "TypeError: passages[0].text: expected a str, got int"


def test_one_bad_passage_does_not_cost_the_question_its_other_passages(caplog):
    """MIRAGE's default (on_bad_passage="skip"): a passage that breaks a rule is left out,
    said in stats and the log, and the others are defended; claims keep input positions."""
    bad = {"text": None, "url": "https://c.org"}
    item = {"question": GOOD["question"], "passages": [bad, *GOOD["passages"], {"text": "x", "retrieval_score": "1"}]}
    defense = MirageDefense(nli=ConstantNLI("entailment"))
    with caplog.at_level("WARNING", logger="rrag_kernels"):
        (res,) = defense.run_batch([item], progress=False)
    assert res.error is None and res.stats["n_passages"] == 2
    assert res.stats["skipped_passages"] == [
        {"passage": 0, "error": "TypeError: passages[0].text: expected a str, got NoneType"},
        {"passage": 3, "error": "TypeError: passages[3].retrieval_score: expected a number, got str"}]
    assert "passage 0 left out" in caplog.text
    alone = defense.defend(GOOD["question"], GOOD["passages"])
    assert [(c.text, c.source - 1, c.kept) for c in res.claims] == [(c.text, c.source, c.kept) for c in alone.claims]
    assert {c.source for c in res.claims} == {1, 2} and res.gate_passed == alone.gate_passed
    assert res.to_record()["kept"] and res.to_record()["stats"]["skipped_passages"][0]["passage"] == 0
    # the single-item call reads the same rule; "error" fails the question as before
    assert defense.defend(item["question"], item["passages"]).stats["skipped_passages"] == res.stats["skipped_passages"]
    with pytest.raises(TypeError, match=r"^passages\[0\]\.text"):
        MirageDefense(nli=ConstantNLI("entailment"), on_bad_passage="error").defend(item["question"], item["passages"])
    kept = check_passages(item["passages"], skip_bad=True)
    assert kept == GOOD["passages"] and kept.index == [1, 2] and [n for n, _ in kept.skipped] == [0, 3]
    with pytest.raises(TypeError, match="^passages: expected a list"):
        check_passages("text", skip_bad=True)  # the list itself is still required


def test_reliablerag_follows_the_contract():
    from rrag_kernels.models import ScriptedLLM

    llm = ScriptedLLM(lambda msgs: "Oslo")
    method = ReliableRAG(llm, HashEmbedder(), credibility="uniform", selector="reliability")
    records = _contract(method.run_batch([GOOD, *BAD]), 5)
    direct = answer_batch([GOOD, *BAD], llm=llm, embedder=HashEmbedder(), credibility="uniform",
                          selector="reliability")
    assert [{k: v for k, v in r.to_record().items() if k != "seconds"} for r in direct] == \
        [{k: v for k, v in rec.items() if k != "seconds"} for rec in records]
    assert "error" not in records[0] and records[0]["question"] == GOOD["question"]
    assert [rec["error"].split(":")[0] for rec in records[1:]] == ["ValueError", "ValueError", "TypeError",
                                                                     "TypeError"]
    assert records[1]["question"] is None and records[2]["question"] == " "
    # options answer() would refuse on every item are refused once, when the method is made
    with pytest.raises(TypeError, match="^contxt: not an option of reliablerag answer"):
        ReliableRAG(llm, HashEmbedder(), contxt="tbs")
    with pytest.raises(ValueError, match="^context: expected one of"):
        ReliableRAG(llm, HashEmbedder(), context="all")


def test_conformal_follows_the_contract():
    corpus = ["The bridge opened in Oslo in 1932.", "Bergen has a fish market.", "Oslo is a capital."]
    rag = ConformalRAG(ClaimConformal(alpha=0.5), MultiHopRetriever(corpus, HashEmbedder(), hops=1, k=2))
    calib = [{"question": "bridge Oslo", "claims": ["bridge opened 1932", "fish market"], "labels": [True, False]}
             for _ in range(6)]
    rag.calibrate(calib, progress=False)
    items = [{"question": "Where was the bridge opened?", "claims": ["It opened in Oslo.", "Bergen"]},
             {"claims": ["x"]}, {"question": "", "claims": ["x"]}]
    records = _contract(rag.run_batch(items, progress=False), 3)
    assert records[0]["n_claims"] == 2 and records[0]["q_hat"] == rag.calibrator.q_hat
    assert records[0]["kept"] == [c["text"] for c in records[0]["claims"] if c["kept"]]
    assert "error" in records[1] and "question: must be a non-empty string" in records[2]["error"]


def test_json_input_beyond_the_limits_is_refused_where_it_is_read():
    """pipelines.loads_one_value_per_key (every shell's reading rule): deeper than
    MAX_JSON_DEPTH or an integer too long to read is a JSONLimitError (a ValueError), so no
    writer walks such a value later (fuzz/shells.py found both crashing `rrag defend`)."""
    from rrag_kernels.pipelines import MAX_JSON_DEPTH, JSONLimitError, loads_one_value_per_key

    ok = "[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH
    assert loads_one_value_per_key(ok) is not None
    deep = '{"id": ' + '{"a": ' * MAX_JSON_DEPTH + "1" + "}" * MAX_JSON_DEPTH + "}"
    for text, message in ((deep, "nested deeper than"), ("[" * 100_000 + "]" * 100_000, "nested deeper than"),
                          ("[" + "9" * 5000 + "]", "a number too long to read")):
        with pytest.raises(JSONLimitError, match=message):
            loads_one_value_per_key(text)
    assert issubclass(JSONLimitError, ValueError)
