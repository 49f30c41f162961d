"""Reference for ``beam_step``: one hop of ReliableRAG's beam search over reasoning chains.

At each hop every unfinished chain asks an LLM to choose among lettered options, "A. no need
for additional knowledge triples", then B, C, ... one per candidate triple; the LLM's letter
probabilities (column 0 = 'A', column c >= 1 = candidate c - 1; NaN = that letter did not
come up) drive the beam search of the TRACE reference code (``construct_reasoning_chains``).
This readable loop is the definition; it is also the benchmarks' "Python loop" baseline.

Rules, per question, for its chains in order:

1. A finished chain is carried over unchanged (choice -1, same score, finished).
2. A chain whose probability row holds no finite value (the reply held no choice) is carried
   over unchanged and unfinished (choice -1).
3. Otherwise the top ``beams`` columns by probability are taken FIRST: descending
   probability, equal probabilities -> the lower column first, NaN entries never chosen.
   Then each of them, in that rank order, is skipped when ``p < min_prob`` or when it is a
   letter past the candidates shown (``c >= 1`` and ``c - 1 >= n_candidates[chain]``): such
   a letter has used up a beam slot, as in the reference code. The others emit a child with
   ``score = parent_score * p`` (one float64 multiply), finished iff ``c == 0`` ('A').
   A chain all of whose chosen columns are skipped emits nothing (it is dropped).
4. The question's children, in emission order (chains in order, each chain's children in
   rank order, carried-over chains in their place), are sorted by score descending with a
   stable sort (equal scores keep the emission order), and the first ``max_chains`` are kept.
"""

from __future__ import annotations

import math

import numpy as np


def beam_step_ref(
    parent_scores: np.ndarray,
    finished: np.ndarray,
    choice_probs: np.ndarray,
    n_candidates: np.ndarray,
    chain_offsets: np.ndarray,
    beams: int = 5,
    min_prob: float = 1e-4,
    max_chains: int = 20,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One beam-search hop over the chains of every question (rules in the module docstring).

    Parameters
    ----------
    parent_scores : (B,) float64, finite, >= 0
    finished : (B,) bool
    choice_probs : (B, C) float64, C >= 1, entries in [0, 1] or NaN (absent)
    n_candidates : (B,) int64 in [0, C - 1], the candidates shown to each chain
    chain_offsets : (Q + 1,) int64 CSR: question q owns chains
        ``chain_offsets[q]:chain_offsets[q + 1]``
    beams : int >= 1
    min_prob : float in [0, 1]
    max_chains : int >= 1

    Returns
    -------
    parent : (N,) int64, the global chain index of each kept child
    choice : (N,) int64, 0 = 'A' (stop), c >= 1 = candidate c - 1, -1 = carried over
    score : (N,) float64
    finished : (N,) bool
    offsets : (Q + 1,) int64 CSR of the kept children per question
    """
    n_choices = choice_probs.shape[1]
    parent, choice, score, done = [], [], [], []
    offsets = [0]
    for q in range(len(chain_offsets) - 1):
        children: list[tuple[int, int, float, bool]] = []  # (parent, choice, score, finished)
        for b in range(int(chain_offsets[q]), int(chain_offsets[q + 1])):
            s = float(parent_scores[b])
            row = [float(p) for p in choice_probs[b]]
            if finished[b]:
                children.append((b, -1, s, True))
                continue
            present = [c for c in range(n_choices) if not math.isnan(row[c])]
            if not present:
                children.append((b, -1, s, False))
                continue
            for c in sorted(present, key=lambda c: (-row[c], c))[:beams]:
                if row[c] < min_prob or (c >= 1 and c - 1 >= n_candidates[b]):
                    continue  # the slot is used up all the same
                children.append((b, c, s * row[c], c == 0))
        children.sort(key=lambda child: -child[2])  # stable: ties keep the emission order
        for b, c, s, f in children[:max_chains]:
            parent.append(b)
            choice.append(c)
            score.append(s)
            done.append(f)
        offsets.append(len(parent))
    return (np.asarray(parent, dtype=np.int64), np.asarray(choice, dtype=np.int64),
            np.asarray(score, dtype=np.float64), np.asarray(done, dtype=np.bool_),
            np.asarray(offsets, dtype=np.int64))
