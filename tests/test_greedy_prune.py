"""greedy_prune(node_scores, edge_i, edge_j, edge_weight, *, self_penalty) -> (keep, removal_order, F).

Contract: values quantised to multiples of 2^-32, F summed exactly; repeatedly remove the
claim whose removal raises F the most while that gain is > 0; equal gains -> lowest
index. The C++ heap must give exactly the reference's (literal recompute-F) keep set,
removal order and F on every input. Integer-valued scores and weights make exact gain
ties common; near-equal floats that quantise to the same value test the quantisation.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import assert_bitwise_equal

import rrag_kernels
from rrag_kernels import ops
from rrag_kernels.reference import greedy_prune_ref, quantise_ref

CPU_BACKENDS = pytest.mark.parametrize("backend", ["reference", "cpp"], indirect=True)


def _graph(rng, n, e, *, integer, parallel=True):
    if n < 2:
        e = 0
    i = rng.integers(0, max(n, 1), size=e)
    j = (i + rng.integers(1, max(n, 2), size=e)) % max(n, 1) if n >= 2 else i
    if parallel and e >= 4:  # duplicate a few edges
        k = rng.integers(0, e, size=e // 4)
        i[: len(k)], j[: len(k)] = i[k], j[k]
    if integer:
        s = rng.integers(-1, 4, size=n).astype(np.float64)
        w = rng.integers(-3, 3, size=e).astype(np.float64)
    else:
        s = rng.uniform(-0.5, 2.0, size=n)
        w = rng.uniform(-1.0, 0.9, size=e)
    return s, i.astype(np.int64), j.astype(np.int64), w


def _exact_gains(keep, s, i, j, w, pen=None):
    """Exact gain of removing each kept claim from the final set (Python ints)."""
    own = quantise_ref(s)
    if pen is not None:
        own = [a - b for a, b in zip(own, quantise_ref(pen))]
    gains = {c: -own[c] for c in range(len(s)) if keep[c]}
    for a, b, q in zip(i.tolist(), j.tolist(), quantise_ref(w)):
        if keep[a] and keep[b]:
            gains[a] -= q
            gains[b] -= q
    return gains


def _check(out, s, i, j, w, pen=None):
    keep, order, F = greedy_prune_ref(s, i, j, w, pen)
    assert isinstance(out, ops.PruneResult)
    assert_bitwise_equal(out.keep, keep, name="keep")
    assert_bitwise_equal(out.removal_order, order, name="removal_order")
    assert isinstance(out.F, float) and (out.F == F), f"F {out.F!r} != reference {F!r}"
    assert sorted(order.tolist()) == np.flatnonzero(~keep).tolist()
    assert all(v <= 0 for v in _exact_gains(keep, s, i, j, w, pen).values())  # a local optimum


# N: 0, 1, 2, odd primes, 32 +- 1; E up to ~3N.
SIZES = [(0, 0), (1, 0), (2, 1), (3, 4), (17, 30), (31, 60), (32, 96), (33, 20), (61, 150)]


@CPU_BACKENDS
@pytest.mark.parametrize("n,e", SIZES)
@pytest.mark.parametrize("integer", [True, False], ids=["int-ties", "float"])
def test_random(backend, rng, n, e, integer):
    s, i, j, w = _graph(rng, n, e, integer=integer)
    _check(ops.greedy_prune(s, i, j, w, backend=backend), s, i, j, w)
    pen = (rng.integers(0, 3, size=n) if integer else rng.uniform(0, 1.5, size=n)).astype(np.float64)
    _check(ops.greedy_prune(s, i, j, w, self_penalty=pen, backend=backend), s, i, j, w, pen)


@CPU_BACKENDS
def test_all_gains_tie(backend):
    # A ring of 8 equal claims with equal negative edges: every gain is equal at every
    # step, so the order is decided by "lowest index" alone.
    n = 8
    i = np.arange(n)
    j = (i + 1) % n
    s = np.full(n, 0.5)
    w = np.full(n, -1.0)
    out = ops.greedy_prune(s, i, j, w, backend=backend)
    _check(out, s, i, j, w)
    assert out.removal_order.tolist() == [0, 2, 4, 6]  # after 0: 1 and 7 gain less; 2 is lowest best


@CPU_BACKENDS
def test_quantisation_ties(backend):
    # 1 + 1e-12 and 1 quantise to the same multiple of 2^-32: exact tie -> lowest index.
    s = np.array([-(1.0 + 1e-12), -1.0, -(1.0 - 1e-12), 0.25])
    i, j, w = np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0)
    out = ops.greedy_prune(s, i, j, w, backend=backend)
    _check(out, s, i, j, w)
    assert out.removal_order.tolist() == [0, 1, 2]
    assert out.F == 0.25
    # A gain that quantises to exactly 0 is not > 0: nothing is removed.
    s = np.array([1.0, 1.0])
    out = ops.greedy_prune(s, np.array([0]), np.array([1]), np.array([-(1.0 + 1e-12)]), backend=backend)
    assert out.keep.tolist() == [True, True] and out.removal_order.size == 0


@CPU_BACKENDS
def test_half_way_rounding(backend):
    # x * 2^32 exactly half-way between integers rounds to even, in every backend.
    half = 2.0**-33
    s = np.array([half, 3 * half, -half, 5 * half])
    assert quantise_ref(s) == [0, 2, 0, 2]
    out = ops.greedy_prune(s, np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0), backend=backend)
    assert out.F == 4 * 2.0**-32 and out.removal_order.size == 0


@CPU_BACKENDS
def test_large_values_exact(backend, rng):
    # |values| up to 2^20 (quantised: 52 bits) with many edges: 64-bit sums would
    # overflow; F and the gains stay exact.
    n, e = 40, 120
    s, i, j, _ = _graph(rng, n, e, integer=True)
    s = rng.uniform(-(2.0**20), 2.0**20, size=n)
    w = rng.choice([-(2.0**20), 2.0**20, -(2.0**20) + 2.0**-32, 1.0], size=e)
    _check(ops.greedy_prune(s, i, j, w, backend=backend), s, i, j, w)


@CPU_BACKENDS
def test_sums_beyond_int64(backend, rng):
    # 6,000 parallel edges of |w| ~ 2^20 among 3 claims: F and the gains sum thousands of
    # values of ~2^52 (beyond 2^63), so the C++ kernel must take its 128-bit path; they
    # stay exact.
    e = 6000
    i = rng.integers(0, 3, size=e)
    j = (i + rng.integers(1, 3, size=e)) % 3
    w = rng.choice([-(2.0**20), 2.0**20, -(2.0**20) + 2.0**-32], size=e, p=[0.7, 0.15, 0.15])
    s = np.array([2.0**20, -(2.0**20), 0.5])
    out = ops.greedy_prune(s, i, j, w, backend=backend)
    _check(out, s, i, j, w)
    assert abs(sum(quantise_ref(w))) > 2**63


@CPU_BACKENDS
def test_parallel_edges_add(backend):
    s = np.array([1.0, 1.0])
    one = ops.greedy_prune(s, np.array([0]), np.array([1]), np.array([-1.5]), backend=backend)
    two = ops.greedy_prune(s, np.array([0, 1]), np.array([1, 0]), np.array([-0.75, -0.75]), backend=backend)
    assert one.removal_order.tolist() == two.removal_order.tolist() == [0]
    assert one.F == two.F == 1.0


def test_large_cpp_local_optimum_and_threads(restore_threads_and_simd, rng):
    # Too big for the O(N^2 E) reference: check the stopping condition exactly, the removal
    # order's consistency, and that thread count changes nothing.
    n, e = 3001, 15000
    s, i, j, w = _graph(rng, n, e, integer=True)
    outs = []
    for threads in (1, 2):
        rrag_kernels.set_num_threads(threads)
        outs.append(ops.greedy_prune(s, i, j, w, backend="cpp"))
    for a, b in zip(outs[0][:2], outs[1][:2]):
        assert_bitwise_equal(a, b)
    assert outs[0].F == outs[1].F
    keep, order, F = outs[0]
    assert 0 < order.size < n
    assert sorted(order.tolist()) == np.flatnonzero(~keep).tolist()
    assert all(v <= 0 for v in _exact_gains(keep, s, i, j, w).values())
    qs, qw = quantise_ref(s), quantise_ref(w)
    f_int = sum(q for q, k in zip(qs, keep) if k) + sum(
        q for a, b, q in zip(i.tolist(), j.tolist(), qw) if keep[a] and keep[b])
    assert F == f_int / 2**32


def test_lists_and_torch(rng, torch):
    s, i, j, w = _graph(rng, 20, 40, integer=True)
    want = ops.greedy_prune(s, i, j, w)
    got = ops.greedy_prune(s.tolist(), i.tolist(), j.tolist(), w.tolist())
    assert_bitwise_equal(got.keep, want.keep) and got.F == want.F
    t = ops.greedy_prune(torch.from_numpy(s), torch.from_numpy(i), torch.from_numpy(j), torch.from_numpy(w))
    assert isinstance(t.keep, torch.Tensor) and t.keep.dtype == torch.bool
    assert_bitwise_equal(t.removal_order.numpy(), want.removal_order)


# --------------------------------------------------------------------------- validation

def _valid():
    return {"node_scores": np.array([1.0, 0.5, 0.2]), "edge_i": np.array([0, 1]), "edge_j": np.array([1, 2]),
            "edge_weight": np.array([0.5, -1.0])}


BAD = [
    ({"node_scores": np.array([1.0, np.nan, 0.2])}, ValueError, "node_scores"),
    ({"edge_weight": np.array([0.5, np.inf])}, ValueError, "edge_weight"),
    ({"edge_weight": np.array([0.5, 2.0**20 + 1])}, ValueError, "edge_weight"),
    ({"node_scores": np.array([1.0, -(2.0**21), 0.2])}, ValueError, "node_scores"),
    ({"self_penalty": np.array([0.0, np.nan, 0.0])}, ValueError, "self_penalty"),
    ({"self_penalty": np.array([0.0, 0.0])}, ValueError, "self_penalty"),
    ({"edge_i": np.array([0, 3])}, ValueError, "edge_i"),
    ({"edge_j": np.array([1, -1])}, ValueError, "edge_j"),
    ({"edge_j": np.array([1, 1])}, ValueError, "edge_j"),  # self-loop
    ({"edge_j": np.array([1])}, ValueError, "edge_j"),
    ({"edge_weight": np.array([0.5])}, ValueError, "edge_weight"),
    ({"edge_i": np.array([0.0, 1.0])}, TypeError, "edge_i"),
    ({"node_scores": np.array([True, False, True])}, TypeError, "node_scores"),
    ({"node_scores": np.ones((3, 1))}, ValueError, "node_scores"),
]


@CPU_BACKENDS
@pytest.mark.parametrize("change,exc,name", BAD, ids=[f"{b[2]}-{k}" for k, b in enumerate(BAD)])
def test_bad_input(backend, change, exc, name):
    with pytest.raises(exc, match=rf"^{name}:"):
        ops.greedy_prune(**{**_valid(), **change}, backend=backend)


def test_bad_backend():
    with pytest.raises(ValueError, match=r"^backend:"):
        ops.greedy_prune(**_valid(), backend="triton")


def test_core_rechecks(core):
    v = _valid()
    with pytest.raises(ValueError, match=r"^edge_j:.*self-loop"):
        core.greedy_prune(v["node_scores"], v["edge_i"], np.array([0, 2]), v["edge_weight"], None)
    with pytest.raises(ValueError, match=r"^node_scores:"):
        core.greedy_prune(np.array([1.0, np.nan, 0.0]), v["edge_i"], v["edge_j"], v["edge_weight"], None)
    with pytest.raises(ValueError, match=r"^self_penalty:"):
        core.greedy_prune(v["node_scores"], v["edge_i"], v["edge_j"], v["edge_weight"], np.zeros(2))
    with pytest.raises(TypeError, match=r"^edge_weight:"):
        core.greedy_prune(v["node_scores"], v["edge_i"], v["edge_j"], v["edge_weight"].astype(np.float32), None)
