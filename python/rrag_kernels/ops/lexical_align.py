"""``lexical_opcodes``: LexicalNLI's word alignment of many sequence pairs in one call."""

from __future__ import annotations

from typing import Any, NamedTuple

from .. import reference
from ..reference import LEXICAL_TAGS
from ._dispatch import core_cached, cpu_plan, finish
from ._validation import as_index, check_bool, check_csr

__all__ = ["OPCODE_TAGS", "Opcodes", "lexical_opcodes"]

#: Opcode tag names by the integer code in column 0 of :attr:`Opcodes.ops`.
OPCODE_TAGS = LEXICAL_TAGS


class Opcodes(NamedTuple):
    """Output of :func:`lexical_opcodes` (a tuple ``(op_offsets, ops)``).

    Attributes
    ----------
    op_offsets : (n + 1,) int64
        Pair p's opcodes are rows ``op_offsets[p]:op_offsets[p + 1]`` of ``ops``.
    ops : (K, 5) int32
        Rows ``[tag, i1, i2, j1, j2]``, ``tag`` an index into :data:`OPCODE_TAGS`
        (equal, replace, delete, insert): ``a[i1:i2]`` becomes ``b[j1:j2]``.
    """

    op_offsets: Any
    ops: Any


def lexical_opcodes(
    tokens_a: Any,
    offsets_a: Any,
    tokens_b: Any,
    offsets_b: Any,
    *,
    trim_affixes: bool = True,
    backend: str | None = None,
) -> Opcodes:
    """Align each pair of token-id sequences, as ``difflib.SequenceMatcher`` does.

    Pair p aligns ``a = tokens_a[offsets_a[p]:offsets_a[p + 1]]`` with
    ``b = tokens_b[offsets_b[p]:offsets_b[p + 1]]``. With ``trim_affixes=False`` its opcodes
    are exactly ``SequenceMatcher(None, a, b, autojunk=False).get_opcodes()``; with
    ``trim_affixes=True`` (LexicalNLI's alignment) the common prefix and suffix are matched
    first and the middle is aligned by the same longest-matching-block recursion. Only
    equality of ids matters, so any int64 values work (LexicalNLI maps each alignment key to
    an id). The C++ kernel runs the pairs in parallel (GIL released); its output does not
    depend on the thread count and equals :func:`rrag_kernels.reference.lexical_opcodes_ref`.

    Parameters
    ----------
    tokens_a : integer array or list, shape (Ta,)
    offsets_a : integer array, shape (n + 1,)
        CSR over ``tokens_a``: ``offsets_a[0] == 0``, non-decreasing, ``offsets_a[-1] == Ta``.
    tokens_b : integer array or list, shape (Tb,)
    offsets_b : integer array, shape (n + 1,)
        CSR over ``tokens_b``.
    trim_affixes : bool
    backend : {None, "auto", "reference", "cpp"}

    Returns
    -------
    Opcodes(op_offsets (n + 1,) int64, ops (K, 5) int32)
        numpy for numpy or list inputs; torch tensors (on the input's device) for tensors.
    """
    trim_affixes = check_bool(trim_affixes, "trim_affixes")
    ta = as_index(tokens_a, "tokens_a")
    oa = as_index(offsets_a, "offsets_a")
    if oa.shape[0] < 1:
        raise ValueError("offsets_a: expected length n_pairs + 1 >= 1, got 0")
    tb = as_index(tokens_b, "tokens_b")
    ob = as_index(offsets_b, "offsets_b", oa.shape[0], " (len(offsets_a))")
    p = cpu_plan({"tokens_a": tokens_a, "offsets_a": offsets_a, "tokens_b": tokens_b, "offsets_b": offsets_b},
                 backend, "lexical_opcodes")
    if p.backend == "cpp":
        op_offsets, ops = core_cached().lexical_opcodes(ta, oa, tb, ob, trim_affixes)
    else:
        check_csr(oa, "offsets_a", ta.shape[0])
        check_csr(ob, "offsets_b", tb.shape[0])
        op_offsets, ops = reference.lexical_opcodes_ref(ta, oa, tb, ob, trim_affixes)
    if p.output == "numpy":
        return Opcodes(op_offsets, ops)
    return Opcodes(finish(op_offsets, p), finish(ops, p))
