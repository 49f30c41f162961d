"""Alignment and cues of LexicalNLI (steps 2 and 3 of the rules in the package docstring).

:func:`_batch_opcodes` aligns the keys of every pair in one
:func:`rrag_kernels.ops.lexical_opcodes` call; :func:`_align_features` reads the cues off
one alignment: number / date conflicts inside swaps (with :mod:`.numbers`' ranges),
negation flips in short edits, antonym-pole swaps (:mod:`.lexicon`), superlative /
quantifier and entity swaps, new and moved content words, and a change of voice.
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

import numpy as np

from ....ops import lexical_opcodes
from .lexicon import _ANTONYMS, F_ANT, F_CAP, F_MONTH, F_NEG, F_QUANT, F_STOP, F_SUPER
from .numbers import _comparable, _compatible
from .tokens import Tokens

#: Whether :meth:`.LexicalNLI.features` aligns through the compiled kernel (``backend=None``
#: of :func:`rrag_kernels.ops.lexical_opcodes`) or through its pure-Python reference
#: (``backend="reference"``). Tests switch it off to compare; the results are identical.
USE_CORE = True


def _batch_opcodes(pairs: list[tuple[Tokens, Tokens]], cache: dict[str, Tokens]) -> list[list[list[int]]]:
    """The alignment of every pair's keys in one :func:`rrag_kernels.ops.lexical_opcodes`
    call (C++: GIL off, OpenMP over pairs), as rows [tag, i1, i2, j1, j2] with the integer
    tags of ``ops.OPCODE_TAGS`` (0 equal, 1 replace, 2 delete, 3 insert)."""
    # Keys -> integer ids, once per distinct text (equal keys <=> equal ids).
    texts = list(cache.values())
    where = {id(t): k for k, t in enumerate(texts)}
    all_keys = [k for t in texts for k in t.keys]
    vocab = {k: v for v, k in enumerate(dict.fromkeys(all_keys))}
    ids = np.fromiter(map(vocab.__getitem__, all_keys), dtype=np.int64, count=len(all_keys))
    text_off = np.zeros(len(texts) + 1, dtype=np.int64)
    np.cumsum([len(t.keys) for t in texts], out=text_off[1:])

    def gather(which: list[int]) -> tuple[np.ndarray, np.ndarray]:
        w = np.array(which, dtype=np.int64)
        lens = text_off[w + 1] - text_off[w]
        off = np.zeros(len(w) + 1, dtype=np.int64)
        np.cumsum(lens, out=off[1:])
        return ids[np.repeat(text_off[w] - off[:-1], lens) + np.arange(off[-1])], off

    tok_a, off_a = gather([where[id(ta)] for ta, _ in pairs])
    tok_b, off_b = gather([where[id(tb)] for _, tb in pairs])
    op_offsets, ops = lexical_opcodes(tok_a, off_a, tok_b, off_b, trim_affixes=True,
                                      backend=None if USE_CORE else "reference")
    rows = ops.tolist()
    bounds = op_offsets.tolist()
    return [rows[bounds[p]:bounds[p + 1]] for p in range(len(pairs))]


# --------------------------------------------------------------------------- features

#: A replaced span is a *swap* (one fact exchanged for another) when neither side is longer
#: than this many tokens; longer replaced spans count as a deletion plus an insertion.
MAX_SWAP = 4


class Features(NamedTuple):
    """What :func:`_align_features` reads off one (premise, hypothesis) alignment."""

    n_a: int  # premise tokens
    n_b: int  # hypothesis tokens
    coverage_b: float  # share of hypothesis tokens whose key occurs in the premise
    new_content_b: int  # hypothesis content words (not stopwords) absent from the premise
    moved_content: int  # hypothesis content words found in the premise but not aligned
    voice_change: int  # 1 when the texts differ in how often they say "by" (passive voice)
    number_conflict: int  # swapped quantities incompatible with every comparable premise one
    date_conflict: int  # the same for year-like numbers, plus month swaps
    number_added: int  # hypothesis numbers that are additions, not replacements
    negation_flip: int  # 1 when the negations in short edits differ in parity
    antonym_swap: int  # antonym-pole swaps between the words only one side has
    superlative_swap: int  # a superlative / quantifier swapped for an unrelated one
    entity_swap: int  # swaps of a premise name for a name the premise lacks
    entity_added: int  # hypothesis names absent from the premise


def _align_features(tokens_a: Tokens, tokens_b: Tokens, ops: Sequence[Sequence[int]]) -> Features:
    """Align premise ``tokens_a`` with hypothesis ``tokens_b`` and read off the cues.

    Parameters
    ----------
    tokens_a, tokens_b : Tokens
        :func:`.tokens._tokenize` output of the premise and the hypothesis.
    ops : list of [tag, i1, i2, j1, j2] with integer tags (0 equal, 1 replace, 2 delete,
        3 insert)
        The alignment of ``tokens_a.keys`` with ``tokens_b.keys``, from the batched
        :func:`rrag_kernels.ops.lexical_opcodes` (see :func:`_batch_opcodes`).

    Returns
    -------
    Features

    Notes
    -----
    Each ``replace`` span with at most
    :data:`MAX_SWAP` tokens per side is a swap; names, superlatives/quantifiers, months and
    numbers are compared across swaps only, so a dropped clause plus an added one is not
    read as a contradiction. Negations count inside short edits (swaps and insertions or
    deletions of at most MAX_SWAP tokens); antonym poles are compared over all words only
    one side has.
    """
    ka, kb = tokens_a.keys, tokens_b.keys
    fa, fb = tokens_a.flags, tokens_b.flags
    wa, wb = tokens_a.words, tokens_b.words
    set_a, set_b = tokens_a.keyset, tokens_b.keyset
    n_a, n_b = len(ka), len(kb)

    # Hypothesis numbers compatible with a premise number ("in the 1950s" for "in 1953",
    # "more than forty" for "48") restate it: their phrases add nothing.
    nums_a = tokens_a.numbers
    explained = bytearray(n_b)
    compatible_b = []
    for nb in tokens_b.numbers:
        ok = False
        for na in nums_a:
            if _comparable(nb, na) and _compatible(nb, na):
                ok = True
                break
        compatible_b.append(ok)
        if ok:
            for k in range(nb.pstart, nb.pend):
                explained[k] = 1

    covered = new_content_b = ent_b = 0
    poles_b: list[tuple[int, int]] = []
    for k in range(n_b):
        key = kb[k]
        if key in set_a or explained[k]:
            covered += 1
            continue
        f = fb[k]
        if not f & F_STOP:
            new_content_b += 1
        if f & F_CAP:
            ent_b += 1
        if f & F_ANT:
            poles_b.extend(_ANTONYMS[wb[k]])
    poles_a: list[tuple[int, int]] = []
    for k in range(n_a):
        if fa[k] & F_ANT and ka[k] not in set_b:
            poles_a.extend(_ANTONYMS[wa[k]])
    antonym_swap = 0
    same_pole = False
    for g, p in poles_b:
        for g2, p2 in poles_a:
            if g == g2:
                if p != p2:
                    antonym_swap += 1
                else:
                    same_pole = True

    moved_content = entity_swap = superlative_swap = date_conflict = 0
    neg_a = neg_b = 0
    swap_of_b = [0] * n_b  # 1 + index of the swap holding hypothesis token k, or 0
    swaps: list[tuple[int, int, int, int]] = []
    equal, replace = 0, 1  # the kernel's integer tags
    for tag, i1, i2, j1, j2 in ops:
        if tag == equal:
            continue
        for k in range(j1, j2):
            if kb[k] in set_a and not fb[k] & F_STOP:
                moved_content += 1
        short = i2 - i1 <= MAX_SWAP and j2 - j1 <= MAX_SWAP
        if short:
            for k in range(i1, i2):
                if fa[k] & F_NEG:
                    neg_a += 1
            for k in range(j1, j2):
                if fb[k] & F_NEG:
                    neg_b += 1
        if tag != replace or not short:
            continue
        swaps.append((i1, i2, j1, j2))
        for k in range(j1, j2):
            swap_of_b[k] = len(swaps)
        cap_a = sup_a = month_a = False
        for k in range(i1, i2):
            if ka[k] in set_b:
                continue
            f = fa[k]
            cap_a = cap_a or bool(f & F_CAP)
            sup_a = sup_a or bool(f & (F_SUPER | F_QUANT))
            month_a = month_a or bool(f & F_MONTH)
        cap_b = sup_b = month_b = False
        for k in range(j1, j2):
            if kb[k] in set_a:
                continue
            f = fb[k]
            cap_b = cap_b or bool(f & F_CAP)
            sup_b = sup_b or bool(f & (F_SUPER | F_QUANT))
            month_b = month_b or bool(f & F_MONTH)
        entity_swap += cap_a and cap_b
        superlative_swap += sup_a and sup_b
        date_conflict += month_a and month_b
    if antonym_swap or same_pole:
        superlative_swap = 0  # already an antonym swap, or synonyms of one pole

    number_conflict = number_added = 0
    for nb, ok in zip(tokens_b.numbers, compatible_b):
        if ok:
            continue
        comparable = [na for na in nums_a if _comparable(nb, na)]
        sw = swap_of_b[nb.end - 1]
        if not comparable or not sw:
            number_added += 1  # a number of a new kind, or an addition rather than a swap
            continue
        i1, i2, _, _ = swaps[sw - 1]
        if nb.kind == 1 or any(na.start < i2 and na.end > i1 for na in comparable):
            if nb.kind == 1:
                date_conflict += 1
            else:
                number_conflict += 1
        else:
            number_added += 1
    return Features(
        n_a,
        n_b,
        covered / n_b if n_b else 1.0,
        new_content_b,
        moved_content,
        int(tokens_a.n_by != tokens_b.n_by),
        number_conflict,
        date_conflict,
        number_added,
        int((neg_a - neg_b) % 2 != 0),
        antonym_swap,
        superlative_swap,
        entity_swap,
        ent_b,
    )
