"""``claim_token_ids`` and ``select_pairs``: MIRAGE's lexical pair selection.

The C++ tokenizer and the pair search both live in ``csrc/kernels/select_pairs.cpp``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from .. import reference
from ..reference import TOKEN_PATTERN, normalise_text
from ._dispatch import core_cached, cpu_plan, finish
from ._validation import as_index, check_csr, check_int, check_real

__all__ = ["TOKEN_PATTERN", "Pairs", "claim_token_ids", "select_pairs"]

_MAX_PAIRS_CAP = 2**62


class Pairs(NamedTuple):
    """Output of :func:`select_pairs` (a tuple ``(i, j, overlap)``).

    Attributes
    ----------
    i, j : (P,) int64, ``i < j``
    overlap : (P,) float64
    """

    i: Any
    j: Any
    overlap: Any


def claim_token_ids(texts: Sequence[str], *, backend: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Word tokens of each claim as integer ids (the input of :func:`select_pairs`).

    A token is a match of ``TOKEN_PATTERN = r"[a-z0-9]+(?:'[a-z]+)?"`` on
    ``text.lower().replace("\\u2019", "'")``: ASCII letters and digits, optionally followed
    by an apostrophe and letters ("don't", "1990's"). Any other character (punctuation,
    whitespace, non-ASCII letters) separates tokens. Ids are numbered by first appearance
    over all texts, in order. The C++ tokenizer equals the regex on every input: it scans
    the UTF-8 bytes, and non-ASCII texts are lower-cased in Python first.

    Parameters
    ----------
    texts : list or tuple of str, length N
    backend : {None, "auto", "reference", "cpp"}

    Returns
    -------
    token_ids : ndarray, shape (T,), int64
    token_offsets : ndarray, shape (N + 1,), int64
        Claim ``c``'s tokens are ``token_ids[token_offsets[c]:token_offsets[c + 1]]``.
    """
    if not isinstance(texts, (list, tuple)):
        raise TypeError(f"texts: expected a list of str, got {type(texts).__name__}")
    p = cpu_plan({}, backend, "claim_token_ids")
    if p.backend == "cpp":
        # ASCII texts are lower-cased by the C++ scan itself; others here (str.lower is
        # Unicode-aware: the Kelvin sign becomes "k"). The C++ binding rejects non-str.
        try:
            prepared = [t if t.isascii() else normalise_text(t) for t in texts]
        except AttributeError:
            _check_texts(texts)
            raise
        return core_cached().claim_token_ids(prepared)
    _check_texts(texts)
    return reference.claim_token_ids_ref(list(texts))


def _check_texts(texts: Sequence[Any]) -> None:
    for k, t in enumerate(texts):
        if not isinstance(t, str):
            raise TypeError(f"texts: expected a list of str, item {k} is {type(t).__name__}")


def select_pairs(
    token_ids: Any,
    token_offsets: Any,
    source_ids: Any,
    *,
    tau: float = 0.62,
    max_pairs: int | None = 400,
    backend: str | None = None,
) -> Pairs:
    """MIRAGE lexical pair selection: cross-source claim pairs whose token sets overlap.

    Claim ``c``'s token set is ``T(c) = set(token_ids[token_offsets[c]:token_offsets[c + 1]])``
    (duplicates count once). The pair ``i < j`` is kept iff ``source_ids[i] != source_ids[j]``,
    both sets are non-empty and

        ``overlap = |T(i) & T(j)| / min(|T(i)|, |T(j)|) >= tau``

    computed as the float64 division of the two integers. Output order: overlap descending,
    then ``(i, j)`` ascending; the first ``max_pairs`` pairs are returned.

    The C++ kernel finds the pairs by prefix filtering on an inverted index (a pair with
    min size ``m`` needs ``t = min{c : c / m >= tau}`` shared tokens, so it shares one of the
    smaller claim's ``m - t + 1`` rarest tokens), then verifies each candidate exactly; it
    is fast when ``tau`` is high and does every pair when ``tau = 0``. Results do not depend
    on the thread count.

    Parameters
    ----------
    token_ids : integer array, shape (T,)
        Any int64 values (e.g. from :func:`claim_token_ids`).
    token_offsets : integer array, shape (N + 1,)
        CSR: ``token_offsets[0] == 0``, non-decreasing, ``token_offsets[-1] == T``.
    source_ids : integer array, shape (N,)
        The passage each claim comes from; pairs within one source are never made.
    tau : float in [0, 1]
    max_pairs : int >= 0 or None (no cap)
    backend : {None, "auto", "reference", "cpp"}

    Returns
    -------
    Pairs(i (P,) int64, j (P,) int64, overlap (P,) float64), with ``i < j``
    """
    tau = check_real(tau, "tau")
    if not 0.0 <= tau <= 1.0:
        raise ValueError(f"tau: must be in [0, 1], got {tau}")
    if max_pairs is not None:
        # Any cap beyond the pairs that can exist means no cap; the C++ kernel takes int64.
        max_pairs = min(check_int(max_pairs, "max_pairs"), _MAX_PAIRS_CAP)
    src = as_index(source_ids, "source_ids")
    n = src.shape[0]
    ids = as_index(token_ids, "token_ids")
    off = as_index(token_offsets, "token_offsets", n + 1, " (len(source_ids) + 1)")
    p = cpu_plan({"token_ids": token_ids, "token_offsets": token_offsets, "source_ids": source_ids}, backend,
                 "select_pairs")
    if p.backend == "cpp":
        i, j, overlap = core_cached().select_pairs(ids, off, src, tau, -1 if max_pairs is None else max_pairs)
    else:
        check_csr(off, "token_offsets", ids.shape[0])
        i, j, overlap = reference.select_pairs_ref(ids, off, src, tau, max_pairs)
    if p.output == "numpy":
        return Pairs(i, j, overlap)
    return Pairs(finish(i, p), finish(j, p), finish(overlap, p))
