"""Defensive parsing of structured replies, and the ScriptedLLM test double (no model needed)."""

from __future__ import annotations

import json
import threading

import pytest

from rrag_kernels.models import (
    LLM,
    ChatResult,
    LLMError,
    LLMTimeoutError,
    ParseResult,
    ScriptedLLM,
    TokenLogprob,
    ask_choice,
    ask_int,
    ask_json,
    ask_parsed,
    check_messages,
    parse_choice,
    parse_indices,
    parse_int,
    parse_json_list,
    parse_json_object,
    parse_questions,
    parse_short_answer,
)

Q = [{"role": "user", "content": "How reliable is this passage, 0 to 10?"}]


# --------------------------------------------------------------------------- parsers


@pytest.mark.parametrize("text, expected", [
    ("7", 7), (" 7\n", 7), ("Score: 7/10", 7), ("**8**", 8), ("I'd give it an 8.", 8),
    ("0", 0), ("10", 10), ("(3)", 3), ("rating=4", 4),
    ("On a 15-point scale, 15 is too many; I say 6", 6),  # out-of-range integers are skipped
    ("A1 is not a number but 5 is", 5),                     # digits inside a word are not read
    ("7th place, so 2", 2),
])
def test_parse_int_reads_the_first_integer_in_range(text, expected):
    assert parse_int(text, 0, 10) == expected


@pytest.mark.parametrize("text, reason", [
    ("seven", "no integer"), ("", "no integer"), ("7.5", "no integer"), ("15", "outside [0, 10]"),
    ("-1", "outside [0, 10]"),
])
def test_parse_int_says_why_it_cannot(text, reason):
    with pytest.raises(ValueError, match=reason.replace("[", r"\[").replace("]", r"\]")):
        parse_int(text, 0, 10)


def test_parse_int_negative_range_and_argument_checks():
    assert parse_int("-3 degrees", -5, 5) == -3
    with pytest.raises(ValueError, match="low must be <= high"):
        parse_int("3", 5, 1)
    with pytest.raises(TypeError, match="low"):
        parse_int("3", 0.5, 1)
    with pytest.raises(TypeError, match="text"):
        parse_int(3)


@pytest.mark.parametrize("text, expected", [
    ("B", "B"), ("b", "B"), ("(C)", "C"), ("**D**", "D"), ("B.", "B"), ("B) Paris", "B"),
    ("The answer is C.", "C"), ("Answer: d", "D"),
    ("a reasonable guess is B", "B"),  # the article "a" is not choice "A"
    ("I think A, not B", "A"),          # several: the first wins
])
def test_parse_choice(text, expected):
    assert parse_choice(text, ("A", "B", "C", "D")) == expected


def test_parse_choice_words_and_failures():
    assert parse_choice("Verdict: SUPPORTED.", ["supported", "refuted"]) == "supported"
    assert parse_choice("refuted", ["Supported", "Refuted"]) == "Refuted"
    with pytest.raises(ValueError, match="no choice among A, B"):
        parse_choice("E", ["A", "B"])
    with pytest.raises(ValueError, match="repeats"):
        parse_choice("A", ["A", "a"])
    with pytest.raises(TypeError, match="choices"):
        parse_choice("A", "AB")
    with pytest.raises(ValueError, match="empty"):
        parse_choice("A", [])


@pytest.mark.parametrize("text", [
    '{"score": 3}', '  {"score": 3}\n', '```json\n{"score": 3}\n```', 'Here it is: {"score": 3} -- done',
    'not json {oops} then {"score": 3}',
])
def test_parse_json_object_finds_the_object(text):
    assert parse_json_object(text, ["score"]) == {"score": 3}


@pytest.mark.parametrize("text, reason", [
    ("no braces", "no '{'"), ('{"score": ', "no JSON object"), ("[1, 2]", "no '{'"),
    ('{"other": 1}', "lacks the keys"),
])
def test_parse_json_object_says_why_it_cannot(text, reason):
    with pytest.raises(ValueError, match=reason):
        parse_json_object(text, ["score"])


@pytest.mark.parametrize("text, expected", [
    ("[1, 3]", [1, 3]), ("[]", []), ('```json\n["A?"]\n```', ["A?"]), ('Sure: ["A?", "B?"] done', ["A?", "B?"]),
    ('{"picks": [2]}', [2]), ('{"note": "x", "picks": [2], "other": [9]}', [2]),  # an object: its first list value
    ('{"picks": []}', []),
    ('Sure: ["Is [X] a film?", "B?"]', ["Is [X] a film?", "B?"]),  # brackets inside strings
    ('[1] then {"picks": [2]}', [1]),                              # the first in reading order
    ('{"a": 1} and then [2]', [2]),                                # an object without a list is passed over
    ('{"x": {"picks": [4]}}', [4]),                                # ... and so is its nesting, to the inner one
])
def test_parse_json_list_finds_the_list(text, expected):
    assert parse_json_list(text) == expected


@pytest.mark.parametrize("text, reason", [
    ("1, 3", "no '\\[' in the reply"), ("[1, 3", "no JSON list"), ('{"picks": "1"}', "no JSON list"),
])
def test_parse_json_list_says_why_it_cannot(text, reason):
    with pytest.raises(ValueError, match=reason):
        parse_json_list(text)
    with pytest.raises(TypeError, match="text"):
        parse_json_list(None)


@pytest.mark.parametrize("text, expected", [
    ('["A?", "B?"]', ["A?", "B?"]), ('{"sub_questions": ["A?", 3, "B?"]}', ["A?", "B?"]),  # non-strings ignored
    ("[]", []), ('{"sub_questions": []}', []),                                          # explicitly nothing
    ('Sure: ["Is [X] a film?", "B?"]', ["Is [X] a film?", "B?"]),
    ("1. Who directed X?\n2) Where was he born?\nQ3: When?", ["Who directed X?", "Where was he born?", "When?"]),
    ("- first?\n* second?\n\u2022 first?", ["first?", "second?"]),                     # repeats dropped
    ("1. Paris\n2. Rome", ["Paris", "Rome"]),               # list markers need no "?"
    ("Here:\nWho is A?\nWhen was B?", ["Who is A?", "When was B?"]),  # bare lines need one
    ('[" \'A?\' ", "`B?`", ""]', ["A?", "B?"]),             # quotes, backticks and empty items
    ("[1, 2]\n- A?", ["A?"]),                               # a list without strings falls through
])
def test_parse_questions(text, expected):
    assert parse_questions(text) == expected


@pytest.mark.parametrize("text", ["I cannot split that", "", '[""]', "[1, 2]", "Paris\nRome"])
def test_parse_questions_says_why_it_cannot(text):
    with pytest.raises(ValueError, match="no questions in the reply"):
        parse_questions(text)


@pytest.mark.parametrize("text, expected", [
    ("[1, 3]", [0, 2]), ('["2", "1", "2"]', [0, 1]), ('{"picks": [3, 2]}', [1, 2]), ("1, 3", [0, 2]),
    ("Questions 1 and 4", [0]),                          # out of range: skipped
    ('Sure: {"picks": ["1"]} -- done', [0]), ("[true, 2, 1.0]", [1]),  # bools and floats in a list: not read
    ("[]", []), ('{"picks": []}', []), ("None.", []), ("no", []), ("  **Nothing**  ", []), ("[ ]", []),
    ("1-3", [0, 2]),                                     # a dash between numbers is not a sign
])
def test_parse_indices(text, expected):
    assert parse_indices(text, 3) == expected


@pytest.mark.parametrize("text, reason", [
    ("[7, 9]", r"\(7, 9\) are not in 1..3"), ("no idea which", "no item number"),
    # the whole-number rule of parse_int, not D2F's old regex, which read every one of these as item 1
    ("[-1]", r"\(-1\) are not in 1..3"),                 # a signed number, often "none": not item 1
    ("10.5", "no item number"), ("12a3", "no item number"), ("1st and 3rd", "no item number"),
])
def test_parse_indices_says_why_it_cannot(text, reason):
    with pytest.raises(ValueError, match=reason):
        parse_indices(text, 3)


def test_parse_indices_argument_checks():
    assert parse_indices("none", 0) == []
    with pytest.raises(ValueError, match="not in 1..0"):
        parse_indices("1", 0)
    with pytest.raises(ValueError, match="n: must be >= 0"):
        parse_indices("1", -1)
    with pytest.raises(TypeError, match="text"):
        parse_indices(1, 3)


@pytest.mark.parametrize("text, expected", [
    ("Some reasoning.\nAnswer: Mexico.", "Mexico"), ("**Mexico**\nbecause ...", "Mexico"), ("", ""), ("\n  \n", ""),
    ("The answer is: Paris", "Paris"), ("Final answer - 42.", "42"), ("**Answer**: Rome", "Rome"),
    ("**Answer:** `Rome`", "Rome"),                     # bold closed after the colon (D2F's old rule: "`Rome")
    ("x\nAnswer: a\nanswer: b", "b"),                    # the last answer line
    ("\n  'Quoted'  \nmore", "Quoted"),                  # no answer line: the first non-empty one
    ("Answer:", "Answer:"),                              # an empty answer line is not one
])
def test_parse_short_answer(text, expected):
    assert parse_short_answer(text) == expected
    with pytest.raises(TypeError, match="text"):
        parse_short_answer(None)


# --------------------------------------------------------------------------- ask / re-ask / fall back


def test_valid_first_time():
    llm = ScriptedLLM(["Score: 7/10"])
    res = ask_int(llm, Q)
    assert isinstance(res, ParseResult)
    assert (res.value, res.ok, res.fallback_used, res.attempts) == (7, True, False, 1)
    assert res.replies == ["Score: 7/10"] and res.errors == []
    assert len(llm.calls) == 1 and llm.calls[0].messages == Q
    assert llm.calls[0].options["max_tokens"] == 8


def test_garbage_then_valid_reasks_with_the_bad_reply():
    llm = ScriptedLLM(["I cannot say.", "6"])
    res = ask_int(llm, Q, low=0, high=10)
    assert (res.value, res.fallback_used, res.attempts) == (6, False, 2)
    assert res.errors == ["no integer in the reply"]
    second = llm.calls[1].messages
    assert second[: len(Q)] == Q
    assert second[len(Q)] == {"role": "assistant", "content": "I cannot say."}
    assert second[-1]["role"] == "user"
    assert "no integer in the reply" in second[-1]["content"] and "from 0 to 10" in second[-1]["content"]


def test_garbage_three_times_falls_back_and_records_it():
    llm = ScriptedLLM(["maybe", "perhaps eleven", "99"])
    res = ask_int(llm, Q, fallback=5)
    assert (res.value, res.fallback_used, res.ok, res.attempts) == (5, True, False, 3)
    assert res.replies == ["maybe", "perhaps eleven", "99"]
    assert len(res.errors) == 3 and "outside [0, 10]" in res.errors[2]
    assert llm.remaining == 0
    record = res.as_dict()
    assert json.loads(json.dumps(record)) == record
    assert record["fallback_used"] is True and record["what"] == "an integer in [0, 10]"


def test_llm_errors_count_as_attempts_and_never_raise():
    llm = ScriptedLLM([LLMTimeoutError("slow"), RuntimeError("boom"), "B"])
    res = ask_choice(llm, Q, ["A", "B"])
    assert (res.value, res.attempts, res.fallback_used) == ("B", 3, False)
    assert res.replies == ["", "", "B"]
    assert res.errors[0].startswith("LLMTimeoutError") and res.errors[1] == "RuntimeError: boom"
    assert llm.calls[1].messages == Q  # after a failed call the question is asked again as it was
    broken = ScriptedLLM([])  # every call: script exhausted
    res = ask_choice(broken, Q, ["A", "B"], fallback="A")
    assert (res.value, res.fallback_used, res.attempts) == ("A", True, 3)
    assert all("script exhausted" in e for e in res.errors)


def test_ask_json_uses_json_mode_and_required_keys():
    llm = ScriptedLLM(['{"verdict": "yes"}', '```json\n{"verdict": "no", "score": 2}\n```'])
    res = ask_json(llm, Q, required_keys=["score"])
    assert res.value == {"verdict": "no", "score": 2} and res.attempts == 2
    assert "lacks the keys ['score']" in res.errors[0]
    assert all(c.options["response_format"] == {"type": "json_object"} for c in llm.calls)
    llm = ScriptedLLM(["{}"])
    ask_json(llm, Q, json_mode=False)
    assert llm.calls[0].options["response_format"] is None


def test_ask_parsed_with_any_parser_and_attempts():
    llm = ScriptedLLM(["x", "yes"])
    res = ask_parsed(llm, Q, lambda t: {"yes": True, "no": False}[t.strip()], fallback=False, attempts=1,
                     what="yes/no", temperature=0.3)
    assert (res.value, res.fallback_used, res.attempts, res.what) == (False, True, 1, "yes/no")
    assert llm.calls[0].options["temperature"] == 0.3
    assert "KeyError" in res.errors[0] or "'x'" in res.errors[0]


def test_ask_helpers_reject_bad_arguments_before_calling():
    llm = ScriptedLLM(["1"])
    with pytest.raises(ValueError, match="messages"):
        ask_int(llm, [])
    with pytest.raises(ValueError, match="attempts"):
        ask_int(llm, Q, attempts=0)
    with pytest.raises(TypeError, match="parse"):
        ask_parsed(llm, Q, "not callable")
    with pytest.raises(ValueError, match="low must be <= high"):
        ask_int(llm, Q, low=3, high=1)
    assert llm.calls == []


def test_one_bad_item_does_not_break_a_batch():
    """What a pipeline does: every item gets a value and a record, whatever the LLM said."""
    replies = {"q0": "4", "q1": "no idea", "q2": "9"}

    def answer(messages):
        question = messages[0]["content"]
        if question == "q3":
            raise LLMError("server down", status=503)
        return replies[question]

    llm = ScriptedLLM(answer)
    results = [ask_int(llm, [{"role": "user", "content": f"q{i}"}], fallback=-1) for i in range(4)]
    assert [r.value for r in results] == [4, -1, 9, -1]
    assert [r.fallback_used for r in results] == [False, True, False, True]
    assert results[3].errors[0].startswith("LLMError: server down")


# --------------------------------------------------------------------------- ScriptedLLM itself


def test_scripted_llm_follows_the_protocol_and_records():
    llm = ScriptedLLM(["one two three", ChatResult("custom", finish_reason="length", prompt_tokens=5,
                                                   completion_tokens=1, seconds=0.25,
                                                   logprobs=(TokenLogprob("custom", -0.1, (("custom", -0.1),)),))])
    assert isinstance(llm, LLM)
    r = llm.chat(Q, max_tokens=4, stop=["three"], seed=1)
    assert (r.text, r.finish_reason, r.completion_tokens) == ("one two ", "stop", 2)
    assert r.prompt_tokens == len(Q[0]["content"].split())
    r = llm.chat(Q, top_logprobs=1)
    assert r.text == "custom" and r.logprobs[0].top == (("custom", -0.1),)
    calls = llm.calls
    assert [c.reply for c in calls] == ["one two ", "custom"]
    assert calls[0].options == {"max_tokens": 4, "temperature": 0.0, "stop": ["three"], "seed": 1,
                                "response_format": None, "top_logprobs": None}
    u = llm.usage(reset=True)
    assert (u.calls, u.failures, u.completion_tokens, u.prompt_tokens) == (2, 0, 3, len(Q[0]["content"].split()) + 5)
    assert u.seconds == pytest.approx(0.25)
    assert llm.usage().calls == 0 and len(llm.calls) == 2
    with pytest.raises(LLMError, match="script exhausted"):
        llm.chat(Q)
    assert llm.usage().failures == 1


def test_scripted_llm_records_a_deep_copy_and_validates():
    msgs = [{"role": "user", "content": "hi"}]
    llm = ScriptedLLM(lambda m: m[-1]["content"].upper())
    assert llm.chat(msgs).text == "HI"
    msgs[0]["content"] = "changed"
    assert llm.calls[0].messages == [{"role": "user", "content": "hi"}]
    assert llm.remaining is None
    with pytest.raises(ValueError, match=r"messages\[0\]\['role'\]"):
        llm.chat([{"role": "robot", "content": "x"}])
    with pytest.raises(TypeError, match="replies"):
        ScriptedLLM("just a string")
    with pytest.raises(TypeError, match=r"replies\[1\]"):
        ScriptedLLM(["ok", 3])
    bad = ScriptedLLM(lambda m: 3)
    with pytest.raises(TypeError, match="returned int"):
        bad.chat(msgs)


def test_scripted_llm_is_thread_safe():
    llm = ScriptedLLM([str(i) for i in range(40)])
    out = []
    lock = threading.Lock()

    def worker():
        for _ in range(10):
            text = llm.chat(Q).text
            with lock:
                out.append(text)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(out, key=int) == [str(i) for i in range(40)]
    assert llm.usage().calls == 40 and llm.remaining == 0


@pytest.mark.parametrize("messages, exc, match", [
    ("hello", TypeError, "messages must be a list"),
    ({"role": "user", "content": "x"}, TypeError, "messages must be a list"),
    ([], ValueError, "at least one"),
    (["hi"], TypeError, r"messages\[0\] must be a dict"),
    ([{"content": "x"}], ValueError, r"messages\[0\] has no 'role'"),
    ([{"role": "user"}], ValueError, r"messages\[0\] has no 'content'"),
    ([{"role": "user", "content": "x"}, {"role": 1, "content": "x"}], TypeError, r"messages\[1\]\['role'\]"),
    ([{"role": "bot", "content": "x"}], ValueError, r"messages\[0\]\['role'\] must be one of"),
    ([{"role": "user", "content": 5}], TypeError, r"messages\[0\]\['content'\] must be a str"),
    ([{"role": "user", "content": None}], TypeError, r"messages\[0\]\['content'\] is None"),
])
def test_check_messages_names_the_argument(messages, exc, match):
    with pytest.raises(exc, match=match):
        check_messages(messages)


def test_check_messages_copies_and_keeps_extra_keys():
    msgs = ({"role": "system", "content": "s"}, {"role": "assistant", "content": None, "tool_calls": [{"id": 1}]},
            {"role": "tool", "content": "r", "tool_call_id": "1"})
    out = check_messages(msgs)
    assert out == [dict(m) for m in msgs] and out[0] is not msgs[0]
