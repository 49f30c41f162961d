"""How D2F-ReAG reads the LLM's replies.

The structured steps are read by the shared readers of the models layer
(:mod:`rrag_kernels.models`, one rule each, tested in tests/test_llm_parsing.py), under the
names this method has always exported:

* the judge: :func:`~rrag_kernels.models.ask_int` (an integer 0-10), called in
  :mod:`.algorithm`;
* the decomposition: :func:`parse_sub_questions` (:func:`~rrag_kernels.models.parse_questions`);
* the picks: :func:`parse_picks` (:func:`~rrag_kernels.models.parse_indices`);
* every free-text step's answer: :func:`short_answer`
  (:func:`~rrag_kernels.models.parse_short_answer`).

What only D2F's own prompt needs stays here: :func:`rewritten_question` removes the label the
rewrite prompt ends with.
"""

from __future__ import annotations

import re

from ...models import parse_indices, parse_questions, parse_short_answer

__all__ = ["parse_picks", "parse_sub_questions", "rewritten_question", "short_answer"]

#: The decomposition reply -> the sub-questions (a JSON list of strings, else numbered or
#: bulleted lines, else lines ending with "?"; ``[]`` for an explicit empty list).
parse_sub_questions = parse_questions
#: The pick reply and the number of candidates listed -> 0-based indices into them.
parse_picks = parse_indices
#: A free-text reply -> the short answer (after the last "Answer:" line, else the first line).
short_answer = parse_short_answer

#: The label :func:`~.prompts.rewrite_messages` ends with ("Rewritten question b:"), which a
#: model may repeat before the question.
_REWRITE_LABEL = re.compile(r"^\s*(?:rewritten\s+)?question\s*b?\s*[:\-]\s*", re.IGNORECASE)


def rewritten_question(text: str) -> str:
    """Question b as the rewrite step's reply gives it.

    Parameters
    ----------
    text : str
        The reply to :func:`~.prompts.rewrite_messages`.

    Returns
    -------
    str
        Its first non-empty line without a leading "Rewritten question b:" / "Question:"
        label (case ignored) and without surrounding quotes or backticks; ``""`` when there
        is none (the caller then keeps the question as it was).
    """
    line = next((ln for ln in text.splitlines() if ln.strip()), "")
    return _REWRITE_LABEL.sub("", line).strip().strip("\"'`").strip()
