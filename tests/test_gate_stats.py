"""gate_stats(keep, edge_i, edge_j, kind, domain_ids, *, eps, count_unknown) -> dict.

Contract: n_kept; n_support / n_contradiction = edges of kind +1 / -1 with both ends kept;
r_contr = n_contradiction / (n_support + n_contradiction + eps) (0.0 when that is 0/0);
n_domains = distinct domain ids among kept claims, where every negative id is the one
domain "unknown" (counted once when count_unknown, not at all otherwise). Every backend
returns exactly the reference's dict.
"""

from __future__ import annotations

import numpy as np
import pytest

from rrag_kernels import ops
from rrag_kernels.reference import gate_stats_ref

CPU_BACKENDS = pytest.mark.parametrize("backend", ["reference", "cpp"], indirect=True)
KEYS = {"n_kept", "n_support", "n_contradiction", "r_contr", "n_domains"}


def _problem(rng, n, e):
    keep = rng.random(n) < 0.6
    i = rng.integers(0, max(n, 1), size=e if n else 0)
    j = rng.integers(0, max(n, 1), size=e if n else 0)
    kind = rng.integers(-1, 2, size=len(i)).astype(np.int8)
    dom = rng.integers(-3, 6, size=n).astype(np.int64)  # about a third unknown (< 0)
    return keep, i.astype(np.int64), j.astype(np.int64), kind, dom


def _same(got, want):
    assert set(got) == KEYS and got == want
    for k in KEYS - {"r_contr"}:
        assert type(got[k]) is int, (k, type(got[k]))
    assert type(got["r_contr"]) is float


@CPU_BACKENDS
@pytest.mark.parametrize("n,e", [(0, 0), (1, 0), (1, 3), (2, 1), (17, 40), (128, 127), (129, 1000), (1001, 5003)])
@pytest.mark.parametrize("count_unknown", [True, False])
def test_random(backend, rng, n, e, count_unknown):
    keep, i, j, kind, dom = _problem(rng, n, e)
    for eps in (1e-9, 0.0, 0.5):
        got = ops.gate_stats(keep, i, j, kind, dom, eps=eps, count_unknown=count_unknown, backend=backend)
        _same(got, gate_stats_ref(keep, i, j, kind, dom, eps, count_unknown))


@CPU_BACKENDS
def test_by_hand(backend):
    keep = np.array([True, True, False, True, True])
    i = np.array([0, 0, 1, 3, 2, 3])
    j = np.array([1, 3, 3, 4, 0, 0])
    kind = np.array([1, -1, 1, 0, -1, -1], dtype=np.int8)
    dom = np.array([7, -1, 7, -5, 2])
    got = ops.gate_stats(keep, i, j, kind, dom, backend=backend)
    # kept edges: (0,1)+1, (0,3)-1, (1,3)+1, (3,4) 0, (3,0)-1; (2,0) has 2 dropped
    assert got["n_kept"] == 4 and got["n_support"] == 2 and got["n_contradiction"] == 2
    assert got["r_contr"] == 2 / (4 + 1e-9)
    assert got["n_domains"] == 3  # 7, 2 and "unknown" (ids -1 and -5 together)
    assert ops.gate_stats(keep, i, j, kind, dom, count_unknown=False, backend=backend)["n_domains"] == 2


@CPU_BACKENDS
def test_no_edges_and_nothing_kept(backend):
    none = np.zeros(0, np.int64)
    got = ops.gate_stats(np.array([True, False]), none, none, np.zeros(0, np.int8), np.array([-1, 3]), eps=0.0,
                       backend=backend)
    assert got == {"n_kept": 1, "n_support": 0, "n_contradiction": 0, "r_contr": 0.0, "n_domains": 1}
    got = ops.gate_stats(np.zeros(3, bool), np.array([0]), np.array([1]), np.array([-1], np.int8), np.zeros(3, np.int64),
                       backend=backend)
    assert got == {"n_kept": 0, "n_support": 0, "n_contradiction": 0, "r_contr": 0.0, "n_domains": 0}


@CPU_BACKENDS
def test_kind_dtypes(backend, rng):
    keep, i, j, kind, dom = _problem(rng, 30, 60)
    want = ops.gate_stats(keep, i, j, kind, dom, backend=backend)
    for dt in (np.int64, np.int32, np.int16):
        assert ops.gate_stats(keep, i, j, kind.astype(dt), dom, backend=backend) == want


BAD = [
    ({"keep": np.array([1, 0, 1])}, TypeError, "keep"),
    ({"keep": np.array([True, False])}, ValueError, "domain_ids"),
    ({"edge_i": np.array([0, 3])}, ValueError, "edge_i"),
    ({"edge_j": np.array([-1, 0])}, ValueError, "edge_j"),
    ({"edge_j": np.array([1])}, ValueError, "edge_j"),
    ({"kind": np.array([1, 2], np.int8)}, ValueError, "kind"),
    ({"kind": np.array([1, 255], np.int64)}, ValueError, "kind"),
    ({"kind": np.array([1.0, 0.0])}, TypeError, "kind"),
    ({"kind": np.array([1], np.int8)}, ValueError, "kind"),
    ({"domain_ids": np.array([0.0, 1.0, 2.0])}, TypeError, "domain_ids"),
    ({"eps": -1.0}, ValueError, "eps"),
    ({"eps": float("nan")}, ValueError, "eps"),
    ({"eps": "1e-9"}, TypeError, "eps"),
    ({"count_unknown": 1}, TypeError, "count_unknown"),
]


@CPU_BACKENDS
@pytest.mark.parametrize("change,exc,name", BAD, ids=[f"{b[2]}-{k}" for k, b in enumerate(BAD)])
def test_bad_input(backend, change, exc, name):
    kwargs = {"keep": np.array([True, False, True]), "edge_i": np.array([0, 1]), "edge_j": np.array([2, 2]),
              "kind": np.array([1, -1], np.int8), "domain_ids": np.array([0, 1, -1]), **change}
    with pytest.raises(exc, match=rf"^{name}:"):
        ops.gate_stats(**kwargs, backend=backend)


def test_core_rechecks(core):
    keep, i, j = np.array([True, False]), np.array([0]), np.array([1])
    with pytest.raises(ValueError, match=r"^kind:"):
        core.gate_stats(keep, i, j, np.array([3], np.int8), np.array([0, 1]), 1e-9, True)
    with pytest.raises(ValueError, match=r"^edge_j:"):
        core.gate_stats(keep, i, np.array([2]), np.array([1], np.int8), np.array([0, 1]), 1e-9, True)
    with pytest.raises(TypeError, match=r"^keep:"):
        core.gate_stats(keep.astype(np.uint8), i, j, np.array([1], np.int8), np.array([0, 1]), 1e-9, True)
    with pytest.raises(ValueError, match=r"^eps:"):
        core.gate_stats(keep, i, j, np.array([1], np.int8), np.array([0, 1]), -1.0, True)
