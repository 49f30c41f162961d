"""Shared generators for the conformal tests (claims with ties, empty responses, groups)."""

from __future__ import annotations

import numpy as np
import pytest


def claims(rng: np.random.Generator, n: int, max_p: int = 9, *, ties: bool = True, p_ok: float = 0.8,
           empty_share: float = 0.1):
    """(scores (C,) float64, labels_ok (C,) bool, offsets (n+1,) int64): rounded scores give ties."""
    p = rng.integers(1, max_p + 1, n) if max_p > 0 else np.zeros(n, dtype=np.int64)
    p[rng.random(n) < empty_share] = 0
    off = np.r_[0, np.cumsum(p)].astype(np.int64)
    C = int(off[-1])
    s = rng.random(C)
    if ties:
        s = np.round(s, 1)
    ok = rng.random(C) < p_ok
    return s, ok, off


def backend_fixture():
    @pytest.fixture(params=("reference", "cpp"))
    def backend(request):
        from conftest import cpp_skip_reason

        if request.param == "cpp" and cpp_skip_reason():
            pytest.skip(cpp_skip_reason())
        return request.param

    return backend
