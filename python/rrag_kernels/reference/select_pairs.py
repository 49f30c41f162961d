"""Reference for ``claim_token_ids`` and ``select_pairs`` (MIRAGE lexical pair selection)."""

from __future__ import annotations

import re

import numpy as np

#: A token: a run of ASCII letters/digits, optionally followed by an apostrophe and letters
#: ("don't", "1990's"), matched on the lower-cased text.
TOKEN_PATTERN = r"[a-z0-9]+(?:'[a-z]+)?"
_TOKEN_RE = re.compile(TOKEN_PATTERN)


def normalise_text(text: str) -> str:
    """The text the token regex runs on: ``text.lower()`` with the typographic apostrophe
    U+2019 replaced by ``'`` (so "don’t" and "don't" are one token)."""
    return text.lower().replace("\u2019", "'")


def claim_token_ids_ref(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Word tokens of each text as integer ids, numbered by first appearance over all texts.

    Parameters
    ----------
    texts : list of str, length N

    Returns
    -------
    token_ids : ndarray, shape (T,), int64
        ``re.findall(TOKEN_PATTERN, normalise_text(text))`` for each text, concatenated,
        each token replaced by its id.
    token_offsets : ndarray, shape (N + 1,), int64
        Text ``c``'s ids are ``token_ids[token_offsets[c]:token_offsets[c + 1]]``.
    """
    vocab: dict[str, int] = {}
    ids: list[int] = []
    offsets = [0]
    for text in texts:
        for tok in _TOKEN_RE.findall(normalise_text(text)):
            ids.append(vocab.setdefault(tok, len(vocab)))
        offsets.append(len(ids))
    return np.asarray(ids, dtype=np.int64), np.asarray(offsets, dtype=np.int64)


def select_pairs_ref(
    token_ids: np.ndarray,
    token_offsets: np.ndarray,
    source_ids: np.ndarray,
    tau: float,
    max_pairs: int | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Cross-source claim pairs whose token sets overlap by at least ``tau``.

    ``T(c) = set(token_ids[token_offsets[c]:token_offsets[c + 1]])``. A pair ``i < j`` is kept
    iff ``source_ids[i] != source_ids[j]``, both sets are non-empty and
    ``overlap = |T(i) & T(j)| / min(|T(i)|, |T(j)|) >= tau`` (a float64 division of two
    integers). Sorted by overlap descending, then ``(i, j)`` ascending; the first
    ``max_pairs`` are returned (``None``: all).

    Returns
    -------
    i, j : ndarray, shape (P,), int64
    overlap : ndarray, shape (P,), float64
    """
    n = len(source_ids)
    sets = [set(int(t) for t in token_ids[token_offsets[c]:token_offsets[c + 1]]) for c in range(n)]
    src = [int(s) for s in source_ids]
    found: list[tuple[float, int, int]] = []
    for i in range(n):
        if not sets[i]:
            continue
        for j in range(i + 1, n):
            if src[i] == src[j] or not sets[j]:
                continue
            overlap = len(sets[i] & sets[j]) / min(len(sets[i]), len(sets[j]))
            if overlap >= tau:
                found.append((-overlap, i, j))
    found.sort()
    if max_pairs is not None:
        found = found[:max_pairs]
    return (
        np.asarray([f[1] for f in found], dtype=np.int64),
        np.asarray([f[2] for f in found], dtype=np.int64),
        np.asarray([-f[0] for f in found], dtype=np.float64),
    )
