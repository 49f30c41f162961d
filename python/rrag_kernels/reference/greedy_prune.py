"""Reference for ``greedy_prune``: MIRAGE's greedy removal, by literal recomputation of F.

Every score, penalty and weight is first rounded to the nearest multiple of 2^-32 (half
to even), ``q(x) = rint(x * 2^32)``, and F is then summed exactly with Python integers, so
"the gain of removing c" is an exact number and ties are exact ties. The C++ kernel does
the same quantisation and exact (128-bit) sums, incrementally; both must agree on every
input.
"""

from __future__ import annotations

import numpy as np

#: Values are quantised to multiples of 2^-QUANT_BITS.
QUANT_BITS = 32
#: Largest |value| accepted (so that a quantised value fits 53 bits).
MAX_ABS_VALUE = 2.0**20


def quantise_ref(x: np.ndarray) -> list[int]:
    """``[rint(v * 2^32) for v in x]`` as Python ints (exact: the product is exact)."""
    return [int(v) for v in np.rint(np.asarray(x, dtype=np.float64) * 2.0**QUANT_BITS)]


def greedy_prune_ref(
    node_scores: np.ndarray,
    edge_i: np.ndarray,
    edge_j: np.ndarray,
    edge_weight: np.ndarray,
    self_penalty: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, float]:
    """Greedy maximisation of F(S) by removals, recomputing F for every candidate.

    ``F(S) = sum_{c in S} (s(c) - pen(c)) + sum_{e = (i, j): i, j in S} w_e``. From S = all
    claims, repeatedly remove the claim whose removal raises F the most, while that gain is
    strictly positive; equal gains: the lowest index. O(N^2 (N + E)): small inputs only.

    Parameters
    ----------
    node_scores : (N,) float64
    edge_i, edge_j : (E,) int64, ends in [0, N), no self-loops; parallel edges add
    edge_weight : (E,) float64
    self_penalty : (N,) float64 or None (zeros)

    Returns
    -------
    keep : (N,) bool
    removal_order : (R,) int64
    F : float
        Final quantised F as float64 (``F_int / 2^32``, correctly rounded).
    """
    n = len(node_scores)
    own = quantise_ref(node_scores)
    if self_penalty is not None:
        own = [s - p for s, p in zip(own, quantise_ref(self_penalty))]
    w = quantise_ref(edge_weight)
    ends = [(int(a), int(b)) for a, b in zip(edge_i, edge_j)]
    in_s = [True] * n

    def f_of_s() -> int:
        total = sum(own[c] for c in range(n) if in_s[c])
        return total + sum(w[e] for e, (a, b) in enumerate(ends) if in_s[a] and in_s[b])

    order: list[int] = []
    current = f_of_s()
    while True:
        best, best_gain = -1, 0
        for c in range(n):
            if not in_s[c]:
                continue
            in_s[c] = False
            gain = f_of_s() - current
            in_s[c] = True
            if best < 0 or gain > best_gain:
                best, best_gain = c, gain
        if best < 0 or best_gain <= 0:
            break
        in_s[best] = False
        order.append(best)
        current += best_gain
    return np.asarray(in_s, dtype=bool), np.asarray(order, dtype=np.int64), current / 2**QUANT_BITS
