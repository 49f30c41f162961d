"""The prompts of D2F-ReAG, one system prompt per step, and the user turns built from data.

Every system prompt is a constant: the calls of one step share it word for word, so a
server's prefix cache (llama.cpp, vLLM) reuses its evaluation from one call to the next.

User turns are built by **concatenation** only: the question, the passages and the reasoning
are data, never a template. (The reference code put passages into an f-string and then called
``str.format`` on the result, so a brace in a passage raised and emptied the reasoning, and it
joined the final reasoning with ``" ".join(text)``, which spaces out every character; neither
can happen here: nothing is formatted into a template and nothing is joined character-wise.)
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

__all__ = [
    "ANSWER_SYSTEM",
    "DECOMPOSE_SYSTEM",
    "JUDGE_SYSTEM",
    "PICK_SYSTEM",
    "REASON_SYSTEM",
    "REWRITE_SYSTEM",
    "UPDATE_SYSTEM",
    "answer_messages",
    "decompose_messages",
    "format_passages",
    "judge_messages",
    "pick_messages",
    "reason_messages",
    "rewrite_messages",
    "update_messages",
]

REASON_SYSTEM = (
    "You answer a question from the passages given with it. Reason step by step, using only facts "
    "the passages state, then end with a line 'Answer: <short answer>'. If the passages do not contain "
    "what is needed, say which information is missing instead of guessing."
)

JUDGE_SYSTEM = (
    "You evaluate whether a reasoning actually answers a question, judged only from the passages given.\n"
    "Scoring rules (0-10):\n"
    "- 10: fully and directly answers the question, clearly grounded in the passages.\n"
    "- 7-9: answers the question, mostly grounded in the passages; minor gaps or implicit evidence.\n"
    "- 4-6: partially answers, or is vague or hedged; grounding is weak or mixed.\n"
    "- 1-3: does not answer the question, or says the information is unavailable, or only restates "
    "without a conclusion, or relies on claims the passages do not support.\n"
    "- 0: unrelated to the question or contradicts the passages.\n"
    "If the passages lack the information needed to answer, give 3 or less whatever the reasoning's "
    "quality. Reply with a single integer from 0 to 10 and nothing else."
)

DECOMPOSE_SYSTEM = (
    "You break a question down into the fewest sub-questions needed to answer it.\n"
    "Rules:\n"
    "1. Only break it down when it needs several distinct pieces of information.\n"
    "2. Each sub-question asks for one specific, essential fact; no overlaps.\n"
    "3. Sequential questions: a later sub-question may refer to the answer of an earlier one.\n"
    "4. Comparisons: ask for the compared attribute of each item separately.\n"
    "5. At most 3 sub-questions, usually 2.\n"
    "Reply with a JSON object {\"sub_questions\": [...]} holding a list of strings, and nothing else.\n"
    "Examples:\n"
    "Question: Who is the mayor of the capital of France?\n"
    "{\"sub_questions\": [\"What is the capital of France?\", \"Who is the mayor of that city?\"]}\n"
    "Question: Which film came out first, Jaws or Alien?\n"
    "{\"sub_questions\": [\"When did Jaws come out?\", \"When did Alien come out?\"]}"
)

PICK_SYSTEM = (
    "You are given numbered open questions, a question q that has just been answered, and its answer. "
    "Say which open questions the answer to q helps to answer or to state more precisely. Reply with "
    "a JSON object {\"picks\": [...]} holding their numbers, such as {\"picks\": [1, 3]}, or "
    "{\"picks\": []} when it helps none, and nothing else."
)

REWRITE_SYSTEM = (
    "Rewrite question b using the answer to question a: replace pronouns and references with the "
    "entities they refer to, and keep everything else. Reply with the rewritten question only."
)

UPDATE_SYSTEM = (
    "Update the reasoning for question b with the reasoning for question a: keep what is still right, "
    "add the facts from a that question b needs, and end with a line 'Answer: <short answer>'. Use only "
    "facts that the two reasonings state."
)

ANSWER_SYSTEM = (
    "Give only the answer to the question, in as few words as possible: a name, a date, a number, "
    "'Yes' or 'No', or a short phrase. No explanation."
)


def _passage_text(p: Mapping[str, Any]) -> str:
    title = p.get("title") or ""
    content = p.get("content")
    if content is None:
        content = p.get("text", "")
    return "title: " + str(title) + " content: " + str(content)


def format_passages(passages: Sequence[Mapping[str, Any]]) -> str:
    """Numbered ``[n] title: ... content: ...`` lines (text verbatim; braces and all)."""
    if not passages:
        return "(no passages)"
    return "\n".join("[" + str(n) + "] " + _passage_text(p) for n, p in enumerate(passages, 1))


def _msgs(system: str, user: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def reason_messages(question: str, passages: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    """The reasoning step: passages first, then the question."""
    return _msgs(REASON_SYSTEM, "Passages:\n" + format_passages(passages) + "\n\nQuestion: " + question + "\n\nReasoning:")


def judge_messages(question: str, passages: Sequence[Mapping[str, Any]], reasoning: str) -> list[dict[str, str]]:
    """The judge step: question, passages, reasoning; an integer 0-10 is asked for."""
    return _msgs(JUDGE_SYSTEM, "Question: " + question + "\n\nPassages:\n" + format_passages(passages)
                 + "\n\nReasoning:\n" + reasoning + "\n\nScore (0-10):")


def decompose_messages(question: str) -> list[dict[str, str]]:
    """The decomposition step."""
    return _msgs(DECOMPOSE_SYSTEM, "Question: " + question)


def pick_messages(open_questions: Sequence[str], question: str, answer: str) -> list[dict[str, str]]:
    """The pick step: numbered open questions (1-based), then q and its answer."""
    listed = "\n".join(str(n) + ": " + q for n, q in enumerate(open_questions, 1))
    return _msgs(PICK_SYSTEM, "Open questions:\n" + listed + "\n\nq: " + question + "\nAnswer to q: " + answer
                 + "\n\nNumbers:")


def rewrite_messages(question_a: str, answer_a: str, question_b: str) -> list[dict[str, str]]:
    """The rewrite step (question b with the answer to a)."""
    return _msgs(REWRITE_SYSTEM, "Question a: " + question_a + "\nAnswer to question a: " + answer_a
                 + "\nQuestion b: " + question_b + "\nRewritten question b:")


def update_messages(question_a: str, reasoning_a: str, question_b: str, reasoning_b: str) -> list[dict[str, str]]:
    """The root-update step (the root is question b)."""
    return _msgs(UPDATE_SYSTEM, "Question a: " + question_a + "\nReasoning for question a:\n" + reasoning_a
                 + "\n\nQuestion b: " + question_b + "\nReasoning for question b:\n" + reasoning_b
                 + "\n\nUpdated reasoning for question b:")


def answer_messages(question: str, reasoning: str = "", passages: Sequence[Mapping[str, Any]] = (),
                    findings: Sequence[tuple[str, str]] = ()) -> list[dict[str, str]]:
    """The final answer step: the reasoning (and the solved sub-questions' findings), or
    passages when there is no reasoning (vanilla RAG, or a budget that bound at once)."""
    parts = []
    if passages:
        parts.append("Passages:\n" + format_passages(passages))
    if findings:
        parts.append("Findings:\n" + "\n".join("- " + q + " " + a for q, a in findings))
    if reasoning:
        parts.append("Reasoning:\n" + reasoning)
    parts.append("Question: " + question + "\nAnswer:")
    return _msgs(ANSWER_SYSTEM, "\n\n".join(parts))
