"""The MIRAGE paper's worked example ("Who was Alan Turing?"), through the graph kernels.

Six claims, one per passage: r~ and trust as in the paper (0.20 set by hand for the three
low-trust hosts). Edges: support C1-C2 with w_supp 0.8; contradictions C4-C1, C4-C2,
C5-C2, C6-C1, C6-C2 with w_contr 0.9 each; plus one NLI pair C1-C3 whose probabilities
tie (w_supp = w_contr = 0), i.e. an ignored edge. Scores s(c) = ln(1 + n(c)) + 0.5 trust +
0.3 r~ from nli_graph's support counts; greedy_prune over the non-ignored edges with
weight w_supp - w_contr. Expected (paper, 3 decimals): s = 1.219, 1.401, 0.637, 0.343,
0.328, 0.316; defended set {C1, C2, C3}; 1 support edge, 0 contradiction edges, r_contr
0.0, 3 domains; the gate (r_contr <= 0.98, domains >= 2) passes.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from rrag_kernels import ops

DOMAINS = ["britannica.com", "en.wikipedia.org", "plato.stanford.edu", "historycomputing.blog",
           "ww2-archive.net", "biographyfacts.org"]
R_TILDE = np.array([0.92, 0.86, 0.79, 0.81, 0.76, 0.72])
TRUST = np.array([0.50, 0.90, 0.80, 0.20, 0.20, 0.20])
ALPHA, BETA = 0.5, 0.3

# NLI pairs (0-based claims) and probabilities (entailment, neutral, contradiction) in
# both directions. Support: p_entail 0.9 -> w_supp = 2 * 0.9 - 1 = 0.8, p_contr 0.
# Contradiction: p_contr 0.9, p_entail 0.05 -> w_supp 0. Ignored: p_entail 0.5, p_contr 0.
SUPPORT, CONTRA, NEUTRAL = [0.9, 0.1, 0.0], [0.05, 0.05, 0.9], [0.5, 0.5, 0.0]
PAIRS = [((0, 1), SUPPORT), ((3, 0), CONTRA), ((3, 1), CONTRA), ((4, 1), CONTRA), ((5, 0), CONTRA),
         ((5, 1), CONTRA), ((0, 2), NEUTRAL)]


def _inputs():
    i = np.array([p[0][0] for p in PAIRS], dtype=np.int64)
    j = np.array([p[0][1] for p in PAIRS], dtype=np.int64)
    probs = np.array([p[1] for p in PAIRS], dtype=np.float64)
    return i, j, probs


@pytest.mark.parametrize("backend", ["reference", "cpp"], indirect=True)
def test_worked_example(backend):
    i, j, probs = _inputs()
    graph = ops.nli_graph(i, j, probs, probs, 6, backend=backend)
    assert graph.kind.tolist() == [1, -1, -1, -1, -1, -1, 0]
    assert np.allclose(graph.w_supp[:1], 0.8, rtol=0, atol=1e-15)
    assert graph.w_contr[1:6].tolist() == [0.9] * 5
    assert graph.support_count.tolist() == [1, 1, 0, 0, 0, 0]

    s = np.log1p(graph.support_count) + ALPHA * TRUST + BETA * R_TILDE
    assert np.round(s, 3).tolist() == [1.219, 1.401, 0.637, 0.343, 0.328, 0.316]

    m = graph.kind != 0
    weight = (graph.w_supp - graph.w_contr)[m]
    keep, order, F = ops.greedy_prune(s, i[m], j[m], weight, backend=backend)
    assert np.flatnonzero(keep).tolist() == [0, 1, 2]  # {C1, C2, C3}
    assert order.tolist() == [5, 3, 4]  # C6 (gain 1.484), then C4 (1.457), then C5 (0.572)
    assert math.isclose(F, s[0] + s[1] + s[2] + 0.8, rel_tol=0, abs_tol=1e-9)

    domain_ids = np.arange(len(DOMAINS), dtype=np.int64)  # six distinct hosts
    stats = ops.gate_stats(keep, i, j, graph.kind, domain_ids, backend=backend)
    assert stats == {"n_kept": 3, "n_support": 1, "n_contradiction": 0, "r_contr": 0.0, "n_domains": 3}
    assert stats["r_contr"] <= 0.98 and stats["n_domains"] >= 2  # the gate passes


def test_worked_example_nli_triton(backend):
    # The graph step in every backend (triton included) gives the same edges and counts.
    i, j, probs = _inputs()
    graph = ops.nli_graph(i, j, probs, probs, 6, backend=backend)
    want = ops.nli_graph(i, j, probs, probs, 6, backend="reference")
    for a, b in zip(graph, want):
        assert np.array_equal(a, b) and a.dtype == b.dtype
