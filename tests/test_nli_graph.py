"""nli_graph(i, j, probs_fwd, probs_bwd, n_claims, *, label_order, reduce) -> NliGraph.

Every output equals ``nli_graph_ref`` exactly in every backend (reference, cpp, triton):
the weights bitwise (each is one prescribed float64 expression), the kinds, the counts and
the CSR adjacency (rows sorted by neighbor, then edge id). Probabilities are drawn from a
grid of multiples of 1/8 half the time, so w_supp == w_contr ties (ignored edges) and
parallel edges are common.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from helpers import assert_bitwise_equal

import rrag_kernels
from rrag_kernels import ops
from rrag_kernels.reference import nli_graph_ref

FIELDS = ops.NliGraph._fields
ORDERS = list(itertools.permutations(("entailment", "neutral", "contradiction")))


def _edges(rng, p, n):
    i = rng.integers(0, n, size=p)
    j = (i + rng.integers(1, n, size=p)) % n  # never a self-loop
    return i.astype(np.int64), j.astype(np.int64)


def _probs(rng, p, *, grid):
    if grid:  # multiples of 1/8 (exact in binary): exact ties between w_supp and w_contr
        x = rng.integers(0, 9, size=(p, 3)) / 8.0
    else:
        x = rng.dirichlet([0.7, 0.7, 0.7], size=p)
    return x.astype(np.float64)


def _check(out, i, j, fwd, bwd, n, order, reduce):
    e, c = order.index("entailment"), order.index("contradiction")
    want = nli_graph_ref(i, j, fwd, bwd, n, e, c, reduce)
    assert isinstance(out, ops.NliGraph)
    for name, got, exp in zip(FIELDS, out, want):
        assert_bitwise_equal(got, exp, name=name)
    # First principles for the adjacency: every non-ignored edge at both ends, sorted rows.
    kind = want[2]
    indptr, nbr, eid = want[5], want[6], want[7]
    assert indptr[-1] == 2 * int((kind != 0).sum())
    for r in range(n):
        row = list(zip(nbr[indptr[r]:indptr[r + 1]].tolist(), eid[indptr[r]:indptr[r + 1]].tolist()))
        assert row == sorted(row)
        for other, edge in row:
            assert {int(i[edge]), int(j[edge])} == {r, other} and kind[edge] != 0


# P: 0, 1, odd, the Triton block (256) -1/+0/+1.
SIZES = [(0, 1), (1, 2), (2, 2), (17, 5), (255, 40), (256, 3), (257, 100), (1031, 64)]


@pytest.mark.parametrize("p,n", SIZES)
@pytest.mark.parametrize("reduce", ["max", "mean"])
def test_random(backend, rng, p, n, reduce):
    i, j = _edges(rng, p, n)
    for grid in (True, False):
        fwd, bwd = _probs(rng, p, grid=grid), _probs(rng, p, grid=grid)
        order = ORDERS[int(rng.integers(len(ORDERS)))]
        out = ops.nli_graph(i, j, fwd, bwd, n, label_order=order, reduce=reduce, backend=backend)
        _check(out, i, j, fwd, bwd, n, order, reduce)


def test_all_label_orders_and_spellings(backend, rng):
    i, j = _edges(rng, 40, 9)
    fwd, bwd = _probs(rng, 40, grid=True), _probs(rng, 40, grid=False)
    for order in ORDERS:
        out = ops.nli_graph(i, j, fwd, bwd, 9, label_order=order, backend=backend)
        _check(out, i, j, fwd, bwd, 9, order, "max")
    upper = ops.nli_graph(i, j, fwd, bwd, 9, label_order=("CONTRADICTION", "Entailment", " neutral"), backend=backend)
    id2label = ops.nli_graph(i, j, fwd, bwd, 9, label_order={2: "NEUTRAL", 0: "contradiction", 1: "ENTAILMENT"},
                           backend=backend)
    for a, b, name in zip(upper, id2label, FIELDS):
        assert_bitwise_equal(a, b, name=name)
    _check(upper, i, j, fwd, bwd, 9, ("contradiction", "entailment", "neutral"), "max")


def test_rules_by_hand(backend):
    # entail col 0, contr col 2. Edge 0: support 0.8 (2*0.9-1) vs 0.05. Edge 1: p_e <= 0.5
    # gives w_supp 0, so any p_contr > 0 is a contradiction. Edge 2: exact tie 0.5 == 0.5
    # (ignored). Edge 3: backward direction decides (max). Edge 4: parallel to edge 0.
    i = np.array([0, 1, 2, 3, 1])
    j = np.array([1, 2, 3, 0, 0])
    fwd = np.array([[0.9, 0.05, 0.05], [0.5, 0.4, 0.1], [0.75, 0.0, 0.5], [0.1, 0.8, 0.1], [1.0, 0.0, 0.0]])
    bwd = np.array([[0.2, 0.7, 0.1], [0.3, 0.7, 0.0], [0.5, 0.5, 0.0], [0.95, 0.05, 0.0], [0.5, 0.5, 0.0]])
    out = ops.nli_graph(i, j, fwd, bwd, 4, backend=backend)
    assert out.kind.tolist() == [1, -1, 0, 1, 1]
    assert out.w_supp.tolist()[:2] == [2 * 0.9 - 1, 0.0] and out.w_contr.tolist()[:3] == [0.1, 0.1, 0.5]
    assert out.support_count.tolist() == [3, 2, 0, 1] and out.contradiction_count.tolist() == [0, 1, 1, 0]
    assert out.indptr.tolist() == [0, 3, 6, 7, 8]
    assert out.neighbors.tolist() == [1, 1, 3, 0, 0, 2, 1, 0]
    assert out.edge_ids.tolist() == [0, 4, 3, 0, 4, 1, 1, 3]
    mean = ops.nli_graph(i, j, fwd, bwd, 4, reduce="mean", backend=backend)
    assert mean.w_supp.tolist()[4] == 0.5 and mean.w_contr.tolist()[1] == (0.1 + 0.0) * 0.5


def test_empty_and_isolated(backend):
    out = ops.nli_graph(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros((0, 3)), np.zeros((0, 3)), 5,
                      backend=backend)
    assert out.indptr.tolist() == [0] * 6 and out.support_count.tolist() == [0] * 5
    assert out.neighbors.dtype == np.int64 and out.kind.dtype == np.int8 and out.w_supp.dtype == np.float64
    out = ops.nli_graph(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros((0, 3)), np.zeros((0, 3)), 0,
                      backend=backend)
    assert out.indptr.tolist() == [0] and out.support_count.size == 0


def test_float32_and_torch_inputs(backend, rng, torch):
    i, j = _edges(rng, 50, 7)
    fwd32 = _probs(rng, 50, grid=False).astype(np.float32)
    bwd32 = _probs(rng, 50, grid=True).astype(np.float32)
    want = ops.nli_graph(i, j, fwd32.astype(np.float64), bwd32.astype(np.float64), 7, backend="reference")
    got = ops.nli_graph(i, j, fwd32, bwd32, 7, backend=backend)
    for a, b, name in zip(got, want, FIELDS):
        assert_bitwise_equal(a, b, name=name)
    tout = ops.nli_graph(torch.from_numpy(i), torch.from_numpy(j), torch.from_numpy(fwd32), torch.from_numpy(bwd32), 7,
                       backend=backend)
    for a, b, name in zip(tout, want, FIELDS):
        assert isinstance(a, torch.Tensor)
        assert_bitwise_equal(a.cpu().numpy(), b, name=name)


def test_threads_identical(restore_threads_and_simd, rng):
    p, n = 20_011, 3_001  # past the C++ threading threshold (8192 pairs)
    i, j = _edges(rng, p, n)
    fwd, bwd = _probs(rng, p, grid=True), _probs(rng, p, grid=False)
    want = nli_graph_ref(i, j, fwd, bwd, n, 0, 2, "max")
    for threads in (1, 2, 3):
        rrag_kernels.set_num_threads(threads)
        out = ops.nli_graph(i, j, fwd, bwd, n, backend="cpp")
        for a, b, name in zip(out, want, FIELDS):
            assert_bitwise_equal(a, b, name=f"{name} at {threads} threads")


@pytest.mark.gpu
def test_cuda_tensors(rng, torch):
    i, j = _edges(rng, 5000, 300)
    fwd, bwd = _probs(rng, 5000, grid=True), _probs(rng, 5000, grid=False)
    dev = torch.device("cuda")
    out = ops.nli_graph(torch.from_numpy(i).to(dev), torch.from_numpy(j).to(dev), torch.from_numpy(fwd).to(dev),
                      torch.from_numpy(bwd).to(dev), 300)
    want = nli_graph_ref(i, j, fwd, bwd, 300, 0, 2, "max")
    for a, b, name in zip(out, want, FIELDS):
        assert a.device.type == "cuda"
        assert_bitwise_equal(a.cpu().numpy(), b, name=name)


# --------------------------------------------------------------------------- validation

def _valid():
    return {"i": np.array([0, 1, 2]), "j": np.array([1, 2, 0]), "probs_fwd": np.full((3, 3), 1 / 3),
            "probs_bwd": np.full((3, 3), 1 / 3), "n_claims": 3}


def _with(arr_name, row, col, value):
    v = _valid()
    x = v[arr_name].copy()
    x[row, col] = value
    v[arr_name] = x
    return v


BAD = [
    (_with("probs_fwd", 1, 2, np.nan), ValueError, "probs_fwd"),
    (_with("probs_bwd", 2, 0, np.inf), ValueError, "probs_bwd"),
    (_with("probs_fwd", 0, 1, 1.5), ValueError, "probs_fwd"),
    (_with("probs_bwd", 0, 0, -0.25), ValueError, "probs_bwd"),
    ({**_valid(), "i": np.array([0, 1, 3])}, ValueError, "i"),
    ({**_valid(), "j": np.array([1, -1, 0])}, ValueError, "j"),
    ({**_valid(), "j": np.array([1, 1, 0])}, ValueError, "j"),  # self-loop at edge 1
    ({**_valid(), "j": np.array([1, 2])}, ValueError, "j"),
    ({**_valid(), "probs_fwd": np.full((3, 2), 0.5)}, ValueError, "probs_fwd"),
    ({**_valid(), "probs_bwd": np.full((2, 3), 0.5)}, ValueError, "probs_bwd"),
    ({**_valid(), "probs_fwd": np.full((3, 3), 1, dtype=np.int64)}, TypeError, "probs_fwd"),
    ({**_valid(), "i": np.array([0.0, 1.0, 2.0])}, TypeError, "i"),
    ({**_valid(), "n_claims": -1}, ValueError, "n_claims"),
    ({**_valid(), "n_claims": 3.0}, TypeError, "n_claims"),
    ({**_valid(), "label_order": ("entailment", "neutral")}, ValueError, "label_order"),
    ({**_valid(), "label_order": ("entailment", "neutral", "contra")}, ValueError, "label_order"),
    ({**_valid(), "label_order": "entailment"}, TypeError, "label_order"),
    ({**_valid(), "reduce": "sum"}, ValueError, "reduce"),
]


@pytest.mark.parametrize("kwargs,exc,name", BAD, ids=[f"{b[2]}-{k}" for k, b in enumerate(BAD)])
def test_bad_input(backend, kwargs, exc, name):
    with pytest.raises(exc, match=rf"^{name}:"):
        ops.nli_graph(**kwargs, backend=backend)


def test_core_rechecks(core):
    v = _valid()
    bad = v["probs_fwd"].copy()
    bad[2, 1] = np.nan
    with pytest.raises(ValueError, match=r"^probs_fwd:.*row 2"):
        core.nli_graph(v["i"], v["j"], bad, v["probs_bwd"], 3, 0, 2, False)
    with pytest.raises(ValueError, match=r"^i:"):
        core.nli_graph(v["i"], v["j"], v["probs_fwd"], v["probs_bwd"], 2, 0, 2, False)
    with pytest.raises(ValueError, match=r"^label_order:"):
        core.nli_graph(v["i"], v["j"], v["probs_fwd"], v["probs_bwd"], 3, 0, 0, False)
    with pytest.raises(ValueError, match=r"^probs_bwd:"):
        core.nli_graph(v["i"], v["j"], v["probs_fwd"], v["probs_bwd"][:2], 3, 0, 2, False)
    with pytest.raises(TypeError, match=r"^probs_fwd:"):
        core.nli_graph(v["i"], v["j"], v["probs_fwd"].astype(np.float32), v["probs_bwd"], 3, 0, 2, False)
