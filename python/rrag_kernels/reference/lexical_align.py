"""Reference for the ``lexical_opcodes`` kernel: LexicalNLI's word alignment, batched.

The definition, pair by pair (:func:`pair_opcodes_ref`):

* ``trim_affixes=False``: ``difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()``
  (LexicalNLI's autojunk setting: popular tokens are never dropped);
* ``trim_affixes=True`` (what LexicalNLI uses): the common prefix, then the common suffix are
  matched first (minimal edits mostly differ in the middle), and the middle is aligned by
  the same Ratcliff/Obershelp longest-matching-block recursion (:func:`matching_blocks_ref`).

The two differ when a run longer than the common prefix or suffix crosses it: a = [A, A, B],
b = [A, B, A, A, B] gives equal/insert/equal with trimming and insert/equal without.
"""

from __future__ import annotations

import difflib
from collections.abc import Hashable, Sequence

import numpy as np

__all__ = ["TAGS", "lexical_opcodes_ref", "matching_blocks_ref", "pair_opcodes_ref"]

#: Opcode tag names by the integer code the kernel writes in column 0 of ``ops``.
TAGS = ("equal", "replace", "delete", "insert")
_CODE = {t: k for k, t in enumerate(TAGS)}


def matching_blocks_ref(a: Sequence[Hashable], b: Sequence[Hashable], ia: int, ib: int,
                        out: list[tuple[int, int, int]]) -> None:
    """Ratcliff/Obershelp: the longest common run first, then recurse on both sides.

    The same blocks as ``difflib.SequenceMatcher(None, a, b, autojunk=False)`` (ties go to
    the earliest run in ``a``, then in ``b``), without its junk machinery. Appends
    ``(i, j, size)`` with offsets ``ia``, ``ib`` to ``out``, unordered.
    """
    b2j: dict[Hashable, list[int]] = {}
    for j, x in enumerate(b):
        lst = b2j.get(x)
        if lst is None:
            b2j[x] = [j]
        else:
            lst.append(j)
    queue = [(0, len(a), 0, len(b))]
    while queue:
        alo, ahi, blo, bhi = queue.pop()
        besti, bestj, bestsize = alo, blo, 0
        j2len: dict[int, int] = {}
        for i in range(alo, ahi):
            new: dict[int, int] = {}
            for j in b2j.get(a[i], ()):
                if j < blo:
                    continue
                if j >= bhi:
                    break
                k = j2len.get(j - 1, 0) + 1
                new[j] = k
                if k > bestsize:
                    besti, bestj, bestsize = i - k + 1, j - k + 1, k
            j2len = new
        if bestsize:
            out.append((besti + ia, bestj + ib, bestsize))
            if alo < besti and blo < bestj:
                queue.append((alo, besti, blo, bestj))
            if besti + bestsize < ahi and bestj + bestsize < bhi:
                queue.append((besti + bestsize, ahi, bestj + bestsize, bhi))


def _trimmed_opcodes(ka: Sequence[Hashable], kb: Sequence[Hashable]) -> list[tuple[str, int, int, int, int]]:
    n_a, n_b = len(ka), len(kb)
    m = min(n_a, n_b)
    p = 0
    while p < m and ka[p] == kb[p]:
        p += 1
    s = 0
    while s < m - p and ka[n_a - 1 - s] == kb[n_b - 1 - s]:
        s += 1
    blocks: list[tuple[int, int, int]] = []
    if p:
        blocks.append((0, 0, p))
    if n_a - s > p and n_b - s > p:
        matching_blocks_ref(ka[p : n_a - s], kb[p : n_b - s], p, p, blocks)
    if s:
        blocks.append((n_a - s, n_b - s, s))
    blocks.sort()
    ops: list[tuple[str, int, int, int, int]] = []
    i = j = 0
    for ai, bj, size in blocks + [(n_a, n_b, 0)]:
        if i < ai and j < bj:
            ops.append(("replace", i, ai, j, bj))
        elif i < ai:
            ops.append(("delete", i, ai, j, bj))
        elif j < bj:
            ops.append(("insert", i, ai, j, bj))
        if size:
            ops.append(("equal", ai, ai + size, bj, bj + size))
        i, j = ai + size, bj + size
    return ops


def pair_opcodes_ref(a: Sequence[Hashable], b: Sequence[Hashable],
                     trim_affixes: bool = True) -> list[tuple[str, int, int, int, int]]:
    """Aligned spans ``(tag, i1, i2, j1, j2)`` of one pair, as ``SequenceMatcher.get_opcodes``.

    Parameters
    ----------
    a, b : sequences of hashable tokens (lists of int ids or of str keys)
    trim_affixes : bool
        True: common prefix and suffix first, then the longest matching blocks of the middle;
        False: plain difflib (``autojunk=False``).

    Returns
    -------
    list of (str, int, int, int, int)
        ``a[i1:i2]`` becomes ``b[j1:j2]``; the spans tile both sequences in order.
    """
    if trim_affixes:
        return _trimmed_opcodes(a, b)
    return difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()


def lexical_opcodes_ref(
    tokens_a: np.ndarray,
    offsets_a: np.ndarray,
    tokens_b: np.ndarray,
    offsets_b: np.ndarray,
    trim_affixes: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    """Opcodes of each pair of token-id sequences.

    Parameters
    ----------
    tokens_a : ndarray, shape (Ta,), int64
    offsets_a : ndarray, shape (n + 1,), int64
        Pair p's first sequence is ``tokens_a[offsets_a[p]:offsets_a[p + 1]]``.
    tokens_b, offsets_b : the same for the second sequences, (Tb,) and (n + 1,)
    trim_affixes : bool
        See :func:`pair_opcodes_ref`.

    Returns
    -------
    op_offsets : ndarray, shape (n + 1,), int64
        Pair p's opcodes are rows ``op_offsets[p]:op_offsets[p + 1]`` of ``ops``.
    ops : ndarray, shape (K, 5), int32
        Rows ``[tag, i1, i2, j1, j2]`` with ``tag`` an index into :data:`TAGS`.
    """
    ta, tb = np.asarray(tokens_a).tolist(), np.asarray(tokens_b).tolist()
    oa, ob = np.asarray(offsets_a).tolist(), np.asarray(offsets_b).tolist()
    rows: list[tuple[int, int, int, int, int]] = []
    op_offsets = [0]
    for p in range(len(oa) - 1):
        a, b = ta[oa[p]:oa[p + 1]], tb[ob[p]:ob[p + 1]]
        rows.extend((_CODE[tag], i1, i2, j1, j2) for tag, i1, i2, j1, j2 in pair_opcodes_ref(a, b, trim_affixes))
        op_offsets.append(len(rows))
    return np.array(op_offsets, dtype=np.int64), np.array(rows, dtype=np.int32).reshape(-1, 5)
