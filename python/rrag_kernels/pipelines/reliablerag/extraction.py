"""Knowledge-triple extraction by an LLM (TRACE's first step), used when a passage carries
no supplied ``triples``.

One call per passage (:data:`EXTRACTION_SYSTEM`, identical across calls, then the title and
the text with numbered sentences). The reply is read as JSON
``{"triples": [{"head", "relation", "tail", "sentence"}]}`` (``response_format`` json_object)
or, failing that, as lines ``(head; relation; tail)`` / ``head | relation | tail``
(:func:`parse_triples`); re-asked up to 3 times (:func:`rrag_kernels.models.ask_parsed`).

* TRACE's convention: the head is the passage title when the text names no other entity,
  so a missing head or a pronoun head ("he", "it", "the film", ...) becomes the title.
* Sentence index: the ``sentence`` the model gave when it is a valid index, else the
  sentence sharing the most words with the triple (ties: the first).
* Fallback (nothing readable after 3 attempts, or the call failed): one triple per sentence,
  ``(title; "states"; sentence)``, so the passage's content stays reachable; recorded.
"""

from __future__ import annotations

import re
from typing import Any, Mapping, Sequence

from ...models import ask_parsed, parse_json_object, split_sentences
from .chains import Triple

EXTRACTION_SYSTEM = (
    "Extract the knowledge triples stated in a passage. A triple is (head; relation; tail): head and tail are "
    "entities or values, the relation is a short verb phrase. When a sentence does not name its subject, use "
    "the passage title as the head. Reply with a JSON object {\"triples\": [{\"head\": ..., \"relation\": ..., "
    "\"tail\": ..., \"sentence\": N}]} where N is the number of the sentence the triple comes from."
)

EXTRACTION_EXAMPLE = (
    'Example. Title: Marsten\nSentences:\n0. Marsten is the capital of Veloria.\n1. It was founded in 1204.\n'
    'Reply: {"triples": [{"head": "Marsten", "relation": "capital of", "tail": "Veloria", "sentence": 0}, '
    '{"head": "Marsten", "relation": "founded in", "tail": "1204", "sentence": 1}]}'
)

_PRONOUNS = {"he", "she", "it", "they", "him", "her", "his", "its", "their", "this", "that", "these", "those",
             "the film", "the song", "the album", "the book", "the city", "the team", "the company", "the club",
             "the band", "the river", "the show", "the series", "the player", "the group"}
_LINE = re.compile(r"^\W*\(?\s*([^;|()]+?)\s*[;|]\s*([^;|()]+?)\s*[;|]\s*([^;|()]+?)\s*\)?\s*[.,]?\s*$")
_WORD = re.compile(r"\w+")


def _as_triples(obj: Any) -> list[dict[str, Any]]:
    items = obj.get("triples") if isinstance(obj, Mapping) else obj
    if not isinstance(items, list):
        raise ValueError("'triples' is not a list")
    out = []
    for it in items:
        if isinstance(it, Mapping):
            head, rel, tail = (it.get(k) for k in ("head", "relation", "tail"))
            sent = it.get("sentence")
        elif isinstance(it, (list, tuple)) and len(it) >= 3:
            head, rel, tail, sent = it[0], it[1], it[2], (it[3] if len(it) > 3 else None)
        else:
            continue
        if isinstance(rel, str) and rel.strip() and isinstance(tail, str) and tail.strip():
            out.append({"head": head if isinstance(head, str) else "", "relation": rel, "tail": tail,
                        "sentence": sent if isinstance(sent, int) and not isinstance(sent, bool) else None})
    return out


def parse_triples(text: str) -> list[dict[str, Any]]:
    """Triples in an extraction reply: a JSON object with ``triples`` (a list of objects or
    of [head, relation, tail(, sentence)] lists), else lines ``(h; r; t)`` or ``h | r | t``.

    Returns
    -------
    list of dict
        ``{"head", "relation", "tail", "sentence"}`` (head may be "", sentence may be None).

    Raises
    ------
    ValueError
        Nothing readable.
    """
    try:
        found = _as_triples(parse_json_object(text, ("triples",)))
        if found:
            return found
    except ValueError:
        pass
    found = []
    for line in text.splitlines():
        m = _LINE.match(line)
        if m:
            found.append({"head": m.group(1), "relation": m.group(2), "tail": m.group(3), "sentence": None})
    if not found:
        raise ValueError("no triple in the reply (neither JSON {'triples': [...]} nor '(head; relation; tail)' lines)")
    return found


def _best_sentence(text: str, sentences: Sequence[str]) -> int:
    words = {w.lower() for w in _WORD.findall(text)}
    best, best_n = -1, 0
    for i, s in enumerate(sentences):
        n = len(words & {w.lower() for w in _WORD.findall(s)})
        if n > best_n:
            best, best_n = i, n
    return best


def resolve_head(head: str, title: str) -> str:
    """TRACE's head rule: the title when ``head`` is empty or a pronoun / bare description."""
    h = " ".join(str(head or "").split())
    if (not h or h.lower() in _PRONOUNS) and title:
        return title
    return h


def to_triples(raw: Sequence[Mapping[str, Any]], passage_index: int, title: str,
               sentences: Sequence[str]) -> list[Triple]:
    """Parsed triples as :class:`Triple` records of passage ``passage_index`` (head rule,
    sentence index checked or found by word overlap, blank parts dropped)."""
    out = []
    for r in raw:
        head = resolve_head(r.get("head", ""), title)
        rel, tail = " ".join(str(r["relation"]).split()), " ".join(str(r["tail"]).split())
        if not head or not rel or not tail:
            continue
        text = f"{head} {rel} {tail}"
        s = r.get("sentence")
        if not (isinstance(s, int) and 0 <= s < len(sentences)):
            s = _best_sentence(text, sentences)
        out.append(Triple(head, rel, tail, passage=passage_index, sentence=s, text=text))
    return out


def extract_triples(passages: Sequence[Mapping[str, Any]], llm: Any, *, indices: Sequence[int] | None = None,
                    attempts: int = 3, max_tokens: int = 256, seed: int | None = 0,
                    json_mode: bool = True) -> tuple[list[Triple], list[dict[str, Any]]]:
    """Extract triples from passages with an LLM.

    Parameters
    ----------
    passages : sequence of dict
        With ``text`` and optionally ``title``.
    llm : LLM
    indices : sequence of int, optional
        Only these passages (default all).
    attempts, max_tokens, seed : per passage
    json_mode : bool
        Ask for ``response_format={"type": "json_object"}``.

    Returns
    -------
    triples : list of Triple
        Passage order (``Triple.passage`` = index in ``passages``).
    records : list of dict
        Per passage: ``{"passage", "n_triples", "fallback_used", "attempts", "errors"}``.
    """
    out: list[Triple] = []
    records = []
    for p in (range(len(passages)) if indices is None else indices):
        passage = passages[p]
        title = " ".join(str(passage.get("title") or "").split())
        sentences = split_sentences(str(passage.get("text") or ""))
        numbered = "\n".join(f"{i}. {s}" for i, s in enumerate(sentences))
        msgs = [{"role": "system", "content": EXTRACTION_SYSTEM + "\n\n" + EXTRACTION_EXAMPLE},
                {"role": "user", "content": f"Title: {title}\nSentences:\n{numbered}\nReply:"}]
        kwargs: dict[str, Any] = {"max_tokens": max_tokens, "temperature": 0.0, "seed": seed}
        if json_mode:
            kwargs["response_format"] = {"type": "json_object"}
        res = ask_parsed(llm, msgs, parse_triples, fallback=None, attempts=attempts, what="knowledge triples",
                         instruction='Reply with {"triples": [{"head": ..., "relation": ..., "tail": ..., '
                                     '"sentence": N}]} and nothing else.', **kwargs)
        found = to_triples(res.value, p, title, sentences) if res.value else []
        fallback = not found
        if fallback:
            found = [Triple(title or "passage", "states", s, passage=p, sentence=i, text=f"{title or 'passage'} states {s}")
                     for i, s in enumerate(sentences)]
        out.extend(found)
        records.append({"passage": p, "n_triples": len(found), "fallback_used": fallback, "attempts": res.attempts,
                        "errors": list(res.errors)})
    return out, records
