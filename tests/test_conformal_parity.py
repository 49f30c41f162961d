"""Bit-exact parity with the released conformal-factuality artifacts (../shared/data/reference).

Through the public API only: load_claims -> r_scores -> conformal_quantile (and ClaimConformal
for the group thresholds), with the rule in ../shared/data/README.md: claim score = score +
stored noise (float64), supported = annotation in {"Y", "S"} (exact), keep iff s >= q_hat,
sentinel -100000 (Mohri) / -1 (Feng). Plus the coverage property on random splits.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from rrag_kernels.ops import conformal_quantile, conformal_sweep, r_scores
from rrag_kernels.pipelines.conformal import ClaimConformal, load_claims

REF = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "reference"
MOHRI = REF / "mohri2024" / "out"
FENG = REF / "feng2025"
FENG_GROUPS = ("kqa_golden", "kqa_silver_wogold", "live_qa", "medication_qa")

pytestmark = pytest.mark.skipif(not REF.is_dir(), reason=f"released reference data not present at {REF}")

BACKENDS = ("reference", "cpp")


def _backends():
    from conftest import cpp_skip_reason

    out = [pytest.param("reference")]
    reason = cpp_skip_reason()
    out.append(pytest.param("cpp", marks=pytest.mark.skip(reason=reason)) if reason else pytest.param("cpp"))
    return out


def _mohri_threshold_files():
    return sorted(MOHRI.glob("*_a=*_alpha=*_conf=frequency+gpt.txt")) if MOHRI.is_dir() else []


_TXT = re.compile(r"^(?P<ds>[^_]+)_a=(?P<a>[0-9.]+)_alpha=(?P<alpha>[0-9.]+)_conf=frequency\+gpt\.txt$")
_MERGED = re.compile(r"^(?P<ds>[^_]+)_merged_a=(?P<a>[0-9.]+)_alpha=(?P<alpha>[0-9.]+)_conf=frequency\+gpt\.jsonl$")


def _mohri(ds):
    return load_claims(MOHRI / f"{ds}_subclaims_with_scores.jsonl", score="frequency+gpt", noise="stored")


def test_six_full_data_thresholds_present():
    assert len(_mohri_threshold_files()) == 6


@pytest.mark.parametrize("backend", _backends())
@pytest.mark.parametrize("path", _mohri_threshold_files(), ids=lambda p: p.name)
def test_mohri_full_data_threshold(path, backend):
    m = _TXT.match(path.name)
    d = _mohri(m["ds"])
    r = r_scores(d.scores, d.labels_ok, d.offsets, a=float(m["a"]), sentinel=-100000.0, backend=backend)
    q = conformal_quantile(r, float(m["alpha"]), backend=backend)
    expected = float(path.read_text().strip())
    assert q == expected, f"{path.name}: q_hat {q!r} != released {expected!r}"


def _merged_files():
    return sorted(MOHRI.glob("*_merged_*.jsonl")) if MOHRI.is_dir() else []


@pytest.mark.parametrize("backend", _backends())
@pytest.mark.parametrize("path", _merged_files(), ids=lambda p: p.name)
def test_mohri_leave_one_out_accepted_claims(path, backend):
    m = _MERGED.match(path.name)
    d = _mohri(m["ds"])
    merged = json.loads(path.read_text())["data"]
    assert len(merged) == d.n == 50
    a, alpha = float(m["a"]), float(m["alpha"])
    r = r_scores(d.scores, d.labels_ok, d.offsets, a=a, sentinel=-100000.0, backend=backend)
    matched = 0
    for i in range(d.n):
        others = np.delete(r, i)
        cc_q = conformal_quantile(others, alpha, backend=backend)
        sl = d.claims_of(i)
        keep = d.scores[sl] >= cc_q
        got = [d.texts[sl][k] for k in np.flatnonzero(keep)]
        want = [c["subclaim"] for c in merged[i]["accepted-subclaims"]]
        assert merged[i]["prompt"] == d.prompts[i]
        assert got == want, f"{path.name} response {i}: accepted {got} != released {want}"
        matched += 1
    assert matched == 50


def _feng_threshold_files():
    return sorted(FENG.glob("similarity_a=1.00_alpha=*_thresholds.json")) if FENG.is_dir() else []


def test_feng_36_group_thresholds_counted():
    n = sum(sum(g in json.loads(p.read_text()) for g in FENG_GROUPS) for p in _feng_threshold_files())
    assert n == 36


@pytest.mark.parametrize("backend", _backends())
def test_feng_group_thresholds(backend):
    data = {g: load_claims(FENG / f"{g}_subclaims_with_scores.jsonl", score="similarity", noise=None)
            for g in FENG_GROUPS}
    scores = np.concatenate([data[g].scores for g in FENG_GROUPS])
    labels = np.concatenate([data[g].labels_ok for g in FENG_GROUPS])
    sizes = np.concatenate([np.diff(data[g].offsets) for g in FENG_GROUPS])
    offsets = np.r_[0, np.cumsum(sizes)]
    groups = [g for g in FENG_GROUPS for _ in range(data[g].n)]
    matched = 0
    for path in _feng_threshold_files():
        alpha = float(re.search(r"alpha=([0-9.]+)_", path.name)[1])
        released = json.loads(path.read_text())
        cc = ClaimConformal(alpha=alpha, a=1.0, sentinel=-1.0, backend=backend).calibrate(scores, labels, offsets, groups)
        for g in FENG_GROUPS:
            assert cc.q_hat[g] == float(released[g]), f"{path.name} {g}: {cc.q_hat[g]!r} != {released[g]!r}"
            matched += 1
    assert matched == 36


@pytest.mark.parametrize("backend", _backends())
def test_coverage_property_on_released_data(backend):
    """Over many random splits the test fully-supported rate is >= 1 - alpha on average."""
    d = load_claims(FENG / "medication_qa_subclaims_with_scores.jsonl", score="similarity", noise=None)
    alphas = np.array([0.05, 0.1, 0.2, 0.3])
    n_splits = 200 if backend == "cpp" else 20
    sw = conformal_sweep(d.scores, d.labels_ok, d.offsets, alphas=alphas, n_splits=n_splits, seed=1, backend=backend)
    mean = sw.fully_supported.mean(axis=0)
    tol = 3 * np.sqrt(alphas * (1 - alphas) / (d.n // 2) / n_splits) + 0.01
    assert (mean >= 1 - alphas - tol).all(), (mean, 1 - alphas)
