"""What a method's input item is, and what it gives back: written once for the four methods
and every shell (CLI, server, Ray, adapters).

Items
-----
An *item* is a mapping ``{"id"?, "question", "passages"?, ...}``:

* ``question``: a str with at least one non-space character. It is read through
  :func:`rrag_kernels.models.clean_text` (lone surrogates -> U+FFFD, control characters ->
  space), the one cleaning rule of the package.
* ``passages`` (the methods that read retrieved text: MIRAGE, ReliableRAG): a list of
  mappings, possibly empty (nothing retrieved is a question the methods answer without
  context or block), each with a str ``text`` (ReliableRAG: or supplied ``triples``
  instead) and optional ``url`` / ``title`` (str or None) and ``retrieval_score`` (a
  finite real number or None). Other keys are kept for the method to read or ignore.
* ``id``: anything JSON can hold; never read, echoed by the shells.

:func:`check_item` applies these rules and raises ``TypeError`` / ``ValueError`` naming the
field (``question``, ``passages[3].text``); the methods call it, so a shell need not check
anything itself: an item that breaks a rule comes back from ``run_batch`` as an error result.

The contract
------------
Each method has ``run_batch(items, *, progress=...) -> list[result]``: one result per item,
in order, a failing item (bad input or a failing backend) an error result in its place, never
an exception that loses the batch. Every result has ``error`` (None or a message) and
``to_record() -> dict``: the plain record the shells write (JSON values only after
:func:`rrag_kernels.pipelines.json_text`; an error result's record holds ``"error"``). The
shells add only ``line`` and the item's ``id``.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from ..models import clean_text
from ..ops import check_real

__all__ = ["CheckedPassages", "Item", "check_item", "check_passages", "check_question"]


def check_question(question: Any, name: str = "question") -> str:
    """The question, cleaned by :func:`rrag_kernels.models.clean_text`.

    Raises
    ------
    TypeError
        ``question`` is not a str.
    ValueError
        It has no non-space character.
    """
    if not isinstance(question, str):
        raise TypeError(f"{name}: expected a str, got {type(question).__name__}")
    if not question.strip():
        raise ValueError(f"{name}: must be a non-empty string")
    return clean_text(question)


class CheckedPassages(list):
    """:func:`check_passages`' result: a list of the passages that follow the rules, in order.

    Attributes
    ----------
    index : list of int
        The input position of each passage kept (``index[k]`` for the k-th).
    skipped : list of (int, str)
        With ``skip_bad``: the input position of each passage left out and why (the message
        its error would have had); ``[]`` otherwise.
    """

    def __init__(self, passages: Sequence[dict[str, Any]] = (), index: Sequence[int] | None = None,
                 skipped: Sequence[tuple[int, str]] = ()):
        super().__init__(passages)
        self.index = list(range(len(self))) if index is None else list(index)
        self.skipped = list(skipped)


def check_passages(passages: Any, name: str = "passages", *, keys: Sequence[str] | None = None,
                   text_required: bool = True, skip_bad: bool = False) -> CheckedPassages:
    """Checked copies of the passages: ``text`` cleaned, ``retrieval_score`` a float or None.

    Parameters
    ----------
    passages : list of mapping
        As the module docstring says; a tuple is accepted, a str or a mapping is not.
    keys : sequence of str, optional
        Read and keep only these keys (absent ones are None): a method that must not see
        other fields (MIRAGE never reads a passage's labels) never touches them.
    text_required : bool
        False where a passage may come as supplied ``triples`` alone (ReliableRAG): a
        missing or null ``text`` is then allowed; any other ``text`` must still be a str.
    skip_bad : bool
        Leave a passage that breaks a rule out (recorded in ``skipped``) instead of raising:
        one unreadable passage of a retrieval need not cost the question the others.
        ``passages`` itself must still be a list.

    Returns
    -------
    CheckedPassages
        One new dict per passage kept (every key kept, or ``keys``), in order.

    Raises
    ------
    TypeError, ValueError
        Naming the passage and field, e.g. ``passages[2].retrieval_score``.
    """
    if isinstance(passages, (str, bytes, Mapping)) or not isinstance(passages, Sequence):
        raise TypeError(f"{name}: expected a list of dicts, got {type(passages).__name__}")
    out, index, skipped = [], [], []
    for n, ps in enumerate(passages):
        try:
            out.append(_checked_passage(ps, f"{name}[{n}]", keys, text_required))
            index.append(n)
        except (TypeError, ValueError) as exc:
            if not skip_bad:
                raise
            skipped.append((n, f"{type(exc).__name__}: {exc}"))
    return CheckedPassages(out, index, skipped)


def _checked_passage(ps: Any, where: str, keys: Sequence[str] | None, text_required: bool) -> dict[str, Any]:
    if not isinstance(ps, Mapping):
        raise TypeError(f"{where}: expected a dict with a str 'text', got {type(ps).__name__}")
    item = dict(ps) if keys is None else {k: ps.get(k) for k in keys}
    text = item.get("text")
    if isinstance(text, str):
        item["text"] = clean_text(text)
    elif text is not None or text_required:
        raise TypeError(f"{where}.text: expected a str, got {type(text).__name__}")
    for key in ("url", "title"):
        v = item.get(key)
        if v is not None and not isinstance(v, str):
            raise TypeError(f"{where}.{key}: expected a str or null, got {type(v).__name__}")
    s = item.get("retrieval_score")
    if s is not None:
        if isinstance(s, bool) or not isinstance(s, numbers.Real):  # numpy scalars are Real too
            raise TypeError(f"{where}.retrieval_score: expected a number, got {type(s).__name__}")
        value = check_real(s, f"{where}.retrieval_score")  # an int beyond the float range: ValueError
        if not math.isfinite(value):
            raise ValueError(f"{where}.retrieval_score: must be finite, got {s!r}")
        item["retrieval_score"] = value
    return item


@dataclass(frozen=True)
class Item:
    """A checked item: ``question`` cleaned, ``passages`` checked copies (None when the
    method does not read passages and the item has none), ``id`` as given."""

    question: str
    passages: list[dict[str, Any]] | None = None
    id: Any = None


def check_item(item: Any, *, passages: bool = True, passage_keys: Sequence[str] | None = None,
               text_required: bool = True, skip_bad: bool = False, name: str = "item") -> Item:
    """Check one item against the module's rules.

    Parameters
    ----------
    item : mapping
    passages : bool
        Whether the method reads ``passages`` (then the key is required); when False a
        ``passages`` key is still checked if present.
    passage_keys, text_required, skip_bad
        As for :func:`check_passages`.

    Raises
    ------
    TypeError, ValueError
        Naming the field.
    """
    if not isinstance(item, Mapping):
        raise TypeError(f"{name}: expected a dict with 'question'{' and passages' if passages else ''}, "
                        f"got {type(item).__name__}")
    if "question" not in item:
        raise ValueError(f"{name}: no 'question' (a non-empty str)")
    question = check_question(item["question"])
    if passages and "passages" not in item:
        raise ValueError(f"{name}: no 'passages' (a list of {{'text', ...}})")
    if not passages and item.get("passages") is None:
        return Item(question, None, item.get("id"))
    return Item(question, check_passages(item["passages"], keys=passage_keys, text_required=text_required,
                                         skip_bad=skip_bad), item.get("id"))
