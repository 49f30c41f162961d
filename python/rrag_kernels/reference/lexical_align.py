"""Reference for the ``lexical_opcodes`` kernel: LexicalNLI's alignment, batched.

The math is not copied here: pair by pair it calls :func:`rrag_kernels.nli.lexical._opcodes`
(``trim_affixes=True``: common prefix, then common suffix, then difflib's longest matching
blocks on the middle) or :class:`difflib.SequenceMatcher` itself (``trim_affixes=False``:
``SequenceMatcher(None, a, b, autojunk=False).get_opcodes()``, LexicalNLI's autojunk
setting). The two differ when a run longer than the common prefix or suffix crosses it:
a = [A, A, B], b = [A, B, A, A, B] gives equal/insert/equal with trimming and insert/equal
without.
"""

from __future__ import annotations

import difflib

import numpy as np

__all__ = ["TAGS", "lexical_opcodes_ref"]

#: Opcode tag names by the integer code the kernel writes in column 0 of ``ops``.
TAGS = ("equal", "replace", "delete", "insert")
_CODE = {t: k for k, t in enumerate(TAGS)}


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
        True: LexicalNLI's ``_opcodes``; False: plain difflib.

    Returns
    -------
    op_offsets : ndarray, shape (n + 1,), int64
        Pair p's opcodes are rows ``op_offsets[p]:op_offsets[p + 1]`` of ``ops``.
    ops : ndarray, shape (K, 5), int32
        Rows ``[tag, i1, i2, j1, j2]`` with ``tag`` an index into :data:`TAGS`.
    """
    from ..nli.lexical import _opcodes

    ta, tb = np.asarray(tokens_a).tolist(), np.asarray(tokens_b).tolist()
    oa, ob = np.asarray(offsets_a).tolist(), np.asarray(offsets_b).tolist()
    rows: list[tuple[int, int, int, int, int]] = []
    op_offsets = [0]
    for p in range(len(oa) - 1):
        a, b = ta[oa[p]:oa[p + 1]], tb[ob[p]:ob[p + 1]]
        if trim_affixes:
            ops = _opcodes(a, b)
        else:
            ops = difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
        rows.extend((_CODE[tag], i1, i2, j1, j2) for tag, i1, i2, j1, j2 in ops)
        op_offsets.append(len(rows))
    return np.array(op_offsets, dtype=np.int64), np.array(rows, dtype=np.int32).reshape(-1, 5)
