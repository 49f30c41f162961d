"""``beam_step``: one hop of ReliableRAG's beam search over reasoning chains."""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from .. import reference
from ._dispatch import core_cached, cpu_plan, finish, numpy_cpp
from ._memory import check_memory_budget
from ._validation import (
    as_bool,
    as_float64,
    as_index,
    check_csr,
    check_finite,
    check_in_range,
    check_int,
    check_real,
    is_plain,
)

__all__ = ["BeamStep", "beam_step"]

_I64, _F64, _BOOL = np.dtype(np.int64), np.dtype(np.float64), np.dtype(np.bool_)
# Any max_chains beyond the children that can exist behaves the same; the C++ kernel takes int64.
_MAX_CHAINS_CAP = 2**62
_KEPT_WHAT = "the kept children (min(max_chains, chains x beams) per question)"


class BeamStep(NamedTuple):
    """Output of :func:`beam_step` (a tuple ``(parent, choice, score, finished, offsets)``).

    Attributes
    ----------
    parent : (N,) int64, the global chain index (row of the inputs) of each kept child
    choice : (N,) int64, 0 = 'A' (stop), c >= 1 = candidate c - 1, -1 = carried over
    score : (N,) float64, ``parent_scores[parent] * choice_probs[parent, choice]`` (the
        parent's score for a carried-over chain)
    finished : (N,) bool
    offsets : (Q + 1,) int64, CSR: question q kept children ``offsets[q]:offsets[q + 1]``,
        at most ``max_chains`` of them, best score first
    """

    parent: Any
    choice: Any
    score: Any
    finished: Any
    offsets: Any


def beam_step(
    parent_scores: Any,
    finished: Any,
    choice_probs: Any,
    n_candidates: Any,
    chain_offsets: Any,
    *,
    beams: int = 5,
    min_prob: float = 1e-4,
    max_chains: int = 20,
    backend: str | None = None,
) -> BeamStep:
    """One hop of ReliableRAG's beam search (TRACE ``construct_reasoning_chains``).

    Every unfinished chain was shown "A. no need for additional knowledge triples" and one
    letter B, C, ... per candidate triple; ``choice_probs`` holds the LLM's probability of
    each letter (column 0 = 'A', NaN = the letter did not come up). For each question, its
    chains in order:

    * a finished chain is carried over unchanged (choice -1, same score, finished);
    * a chain whose row holds no finite value (the reply held no choice) is carried over
      unchanged and unfinished (choice -1);
    * otherwise its top ``beams`` columns by probability are taken first (descending; equal
      probabilities -> the lower column first; NaN never chosen), and then each, in that
      rank order, is skipped when ``p < min_prob`` or when it is a letter past the
      candidates shown (``c >= 1`` and ``c - 1 >= n_candidates``): such a letter uses up a
      beam slot, as in the reference code. The rest emit a child of score
      ``parent_score * p`` (one float64 multiply: bitwise equal in every backend), finished
      iff ``c == 0``. A chain all of whose chosen letters are skipped is dropped.

    The question's children in emission order (chains in order, each chain's in rank order,
    carried-over chains in their place) are sorted by score descending with a stable sort
    (ties keep the emission order) and the first ``max_chains`` are kept. Questions are
    independent. The C++ kernel merges the chains' children (each chain's are already in
    descending score order) by (score desc, emission index asc) and stops after
    ``max_chains``: exactly the head of that stable sort.

    Parameters
    ----------
    parent_scores : float (or integer) array, shape (B,), finite, >= 0
    finished : bool array, shape (B,)
    choice_probs : float array (float32/64), shape (B, C), C >= 1
        Entries in [0, 1] or NaN (absent); inf, negative or > 1 is a ValueError.
    n_candidates : integer array, shape (B,), values in [0, C - 1]
        The candidate triples shown to each chain (letters B .. are candidates 0 ..).
    chain_offsets : integer array, shape (Q + 1,)
        CSR: question q owns chains ``chain_offsets[q]:chain_offsets[q + 1]``.
    beams : int >= 1
        Letters taken per chain (beams > C takes every column).
    min_prob : float in [0, 1]
        A letter with ``p < min_prob`` is skipped (``p == min_prob`` is kept).
    max_chains : int >= 1
        F, the chains kept per question.
    backend : {None, "auto", "reference", "cpp"}

    Returns
    -------
    BeamStep(parent, choice, score, finished, offsets)
        numpy arrays, or torch tensors on the input's device when tensors came in.
    """
    beams = check_int(beams, "beams", minimum=1)
    min_prob = check_real(min_prob, "min_prob")
    if not 0.0 <= min_prob <= 1.0:
        raise ValueError(f"min_prob: must satisfy 0 <= min_prob <= 1, got {min_prob}")
    max_chains = min(check_int(max_chains, "max_chains", minimum=1), _MAX_CHAINS_CAP)
    # Fast path: plain numpy arguments need no conversion, and the C++ kernel checks every
    # value (and the memory budget) itself.
    arrays = (parent_scores, finished, choice_probs, n_candidates, chain_offsets)
    if (numpy_cpp(backend, arrays) and is_plain(parent_scores, _F64) and is_plain(finished, _BOOL)
            and is_plain(choice_probs, _F64, 2) and is_plain(n_candidates, _I64) and is_plain(chain_offsets, _I64)
            and finished.shape == n_candidates.shape == parent_scores.shape == choice_probs.shape[:1]
            and choice_probs.shape[1] >= 1 and chain_offsets.shape[0] >= 1):
        return BeamStep(*core_cached().beam_step(*arrays, min(beams, choice_probs.shape[1]), min_prob, max_chains))
    s = as_float64(parent_scores, "parent_scores", (None,), allow_int=True)
    n = s.shape[0]
    fin = as_bool(finished, "finished", n, " (len(parent_scores))")
    probs = as_float64(choice_probs, "choice_probs", (n, None), " (len(parent_scores), n_choices)")
    n_choices = probs.shape[1]
    if n_choices < 1:
        raise ValueError("choice_probs: expected at least 1 column ('A'), got 0")
    nc = as_index(n_candidates, "n_candidates", n, " (len(parent_scores))")
    off = as_index(chain_offsets, "chain_offsets")
    if off.shape[0] < 1:
        raise ValueError("chain_offsets: expected length Q + 1 >= 1, got 0")
    check_csr(off, "chain_offsets", n)
    beams = min(beams, n_choices)
    cap = int(np.minimum(np.diff(off) * beams, max_chains).sum())
    check_memory_budget(25 * cap + 8 * off.shape[0], "max_chains", _KEPT_WHAT)
    p = cpu_plan({"parent_scores": parent_scores, "finished": finished, "choice_probs": choice_probs,
                  "n_candidates": n_candidates, "chain_offsets": chain_offsets}, backend, "beam_step")
    if p.backend == "cpp":
        out = core_cached().beam_step(s, fin, probs, nc, off, beams, min_prob, max_chains)
    else:
        check_finite(s, "parent_scores")
        check_in_range(s, "parent_scores", 0.0, np.inf)
        check_in_range(nc, "n_candidates", 0, n_choices - 1)
        check_in_range(probs, "choice_probs", 0.0, 1.0, allow_nan=True)
        out = reference.beam_step_ref(s, fin, probs, nc, off, beams, min_prob, max_chains)
    if p.output == "numpy":
        return BeamStep(*out)
    return BeamStep(*(finish(x, p) for x in out))
