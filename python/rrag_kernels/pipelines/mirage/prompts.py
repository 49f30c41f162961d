"""The prompts of MIRAGE: the checked prompt of a passed gate (:func:`checked_prompt`, the
kept claims) and the fallbacks on BLOCK (parametric answer, refusal, passages unchanged).
"""

from __future__ import annotations

from .types import Claim

# "Checked", never "verified": a kept set can still hold contradicted claims, and the
# prompt says which ({contested}).
CHECKED_PROMPT = """You are answering a question with evidence that has been checked across sources.

Question: {question}

Claims retained after cross-source checking (score = cross-source support, source trust and retrieval rank):
{claims}
{contested}
Rules:
1. Base every factual statement on the claims above and cite them as [C1], [C2], ...
2. Do not add names, numbers or dates that the claims do not contain.
3. If the claims do not answer the question, say what is missing instead of guessing.
4. If two claims disagree, do not present either as settled: prefer the higher-scored one and mention the disagreement.

Answer:"""

CONTESTED_NONE = "None of them is contradicted by another retained claim.\n"
CONTESTED_SOME = "{n} of them are still contradicted by other retained claims: {pairs}.\n"

PARAMETRIC_PROMPT = """Answer the question from your own knowledge. Retrieved documents were withheld \
because they failed cross-source checking ({why}). If you are not sure, say so.

Question: {question}

Answer:"""

REFUSAL_PROMPT = """Do not answer the question below. The documents retrieved for it failed cross-source \
checking ({why}), and answers are given only from checked evidence. Reply that the question cannot be \
answered reliably from the available sources, and say why in one sentence.

Question: {question}

Reply:"""

PASSTHROUGH_PROMPT = """You are answering a question with retrieved documents that did NOT pass \
cross-source checking ({why}): they may contain false statements. They are given unchanged.

Question: {question}

Retrieved documents (unchecked):
{passages}

Rules:
1. Treat every statement in the documents as unverified and cite the documents as [P1], [P2], ...
2. Where the documents disagree, say so instead of choosing a side silently.
3. If you are not sure, say so.

Answer:"""


def checked_prompt(question: str, claims: list[Claim]) -> str:
    """The prompt of a passed gate: the kept claims by score, each contradicted one marked
    with the kept claims that contradict it, and a line saying how many are contested."""
    kept = sorted((c for c in claims if c.kept), key=lambda c: (-c.score, c.index))
    rank = {c.index: n for n, c in enumerate(kept, 1)}

    def against(c: Claim) -> str:
        return ", ".join(f"C{r}" for r in sorted(rank[k] for k in c.contradicted_by))

    lines = []
    for c in kept:
        mark = f"; contradicted by {against(c)}" if c.contradicted_by else ""
        lines.append(f"C{rank[c.index]} [score {c.score:.2f}; source: {c.domain}{mark}] {c.text}")
    contested = [c for c in kept if c.contradicted_by]
    if contested:
        pairs = ", ".join(f"C{rank[c.index]} (by {against(c)})" for c in contested)
        note = CONTESTED_SOME.format(n=len(contested), pairs=pairs)
    else:
        note = CONTESTED_NONE
    return CHECKED_PROMPT.format(question=question, claims="\n".join(lines), contested=note)
