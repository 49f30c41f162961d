"""ClaimConformal: calibrate / filter / evaluate, grouped thresholds, JSON round trip, errors."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conformal_data import claims

from rrag_kernels.ops import conformal_quantile, r_scores
from rrag_kernels.pipelines.conformal import ClaimConformal, from_responses, hash_noise


def test_calibrate_filter_evaluate(rng):
    s, ok, off = claims(rng, 400, ties=False)
    cc = ClaimConformal(alpha=0.1).calibrate(s, ok, off)
    assert cc.q_hat == conformal_quantile(r_scores(s, ok, off), 0.1) and cc.n == 400
    keep = cc.filter(s, off)
    assert keep.dtype == bool and keep.shape == s.shape
    np.testing.assert_array_equal(keep, s >= cc.q_hat)
    m = cc.evaluate(s, ok, off)
    assert m["fully_supported"] >= 0.9  # on its own calibration data
    assert set(m) == {"fully_supported", "retention", "non_empty", "supported_given_non_empty", "n"}


def test_grouped(rng):
    s, ok, off = claims(rng, 300)
    groups = [["a", "b", "c"][i % 3] for i in range(300)]
    cc = ClaimConformal(alpha=0.2, sentinel=-1.0).calibrate(s, ok, off, groups=groups)
    r = r_scores(s, ok, off, sentinel=-1.0)
    for g in "abc":
        idx = [i for i in range(300) if groups[i] == g]
        assert cc.q_hat[g] == conformal_quantile(r[idx], 0.2)
    keep = cc.filter(s, off, groups)
    q = np.repeat([cc.q_hat[g] for g in groups], np.diff(off))
    np.testing.assert_array_equal(keep, s >= q)
    with pytest.raises(ValueError, match="^groups:"):
        cc.filter(s, off)
    with pytest.raises(ValueError, match="^groups: no threshold"):
        cc.filter(s, off, ["z"] * 300)


@pytest.mark.parametrize("grouped", [False, True])
def test_json_round_trip(tmp_path, rng, grouped):
    s, ok, off = claims(rng, 30)
    groups = [str(i % 2) for i in range(30)] if grouped else None
    cc = ClaimConformal(alpha=0.01, a=0.9, score_name="frequency+gpt").calibrate(s, ok, off, groups=groups)
    path = tmp_path / "cal.json"
    cc.save(path)
    d = json.loads(path.read_text())
    assert d["format_version"] == 1 and d["score_name"] == "frequency+gpt" and d["calibration_hash"].startswith("sha256:")
    assert "package_version" in d and d["alpha"] == 0.01 and d["a"] == 0.9
    back = ClaimConformal.load(path)
    assert back.q_hat == cc.q_hat and back.n == cc.n and back.data_hash == cc.data_hash  # inf survives
    np.testing.assert_array_equal(back.filter(s, off, groups), cc.filter(s, off, groups))
    # the hash tracks the calibration data
    s2 = s.copy()
    s2[0] += 1e-9
    assert ClaimConformal(alpha=0.01, a=0.9).calibrate(s2, ok, off, groups=groups).data_hash != cc.data_hash


def test_load_rejects_other_files(tmp_path):
    p = tmp_path / "x.json"
    p.write_text('{"format": "other"}')
    with pytest.raises(ValueError, match="^path:"):
        ClaimConformal.load(p)


def test_errors(rng):
    s, ok, off = claims(rng, 10)
    for alpha in (0.0, 1.0, 2):
        with pytest.raises(ValueError, match="^alpha:"):
            ClaimConformal(alpha=alpha)
    with pytest.raises(ValueError, match="^a:"):
        ClaimConformal(a=1.5)
    with pytest.raises(RuntimeError):
        ClaimConformal().filter(s, off)
    with pytest.raises(ValueError, match="^labels_ok:"):
        ClaimConformal().calibrate(s, ok[:-1], off)
    with pytest.raises(ValueError, match="^offsets: empty calibration set"):
        ClaimConformal().calibrate(s[:0], ok[:0], [0])
    bad = s.copy()
    bad[0] = np.nan
    with pytest.raises(ValueError, match="^scores: contains NaN"):
        ClaimConformal().calibrate(bad, ok, off)
    with pytest.raises(ValueError, match="^alpha:"):
        ClaimConformal(alpha=0.01, on_too_few="raise").calibrate(s, ok, off)


def test_adapter_and_hash_noise():
    data = [{"prompt": "q", "claims": [
        {"subclaim": "x", "annotation": "Y", "m-score": 1.0, "noise": 0.5},
        {"subclaim": "y", "annotation": "Y ", "m-score": 2.0, "noise": 0.25},
        {"subclaim": "z", "annotation": "S", "m-score": 0.0}]}, {"prompt": "p", "claims": []}]
    d = from_responses(data, score="m")
    assert d.scores.tolist() == [1.5, 2.25, 0.0] and d.labels_ok.tolist() == [True, False, True]
    assert d.offsets.tolist() == [0, 3, 3]
    h = from_responses(data, score="m", noise="hash", noise_seed=3)
    assert h.scores[0] == 1.0 + hash_noise(3, "q", 0, "x")
    assert hash_noise(3, "q", 0, "x") != hash_noise(4, "q", 0, "x")
    assert abs(hash_noise(3, "q", 0, "x")) < 0.01
    with pytest.raises(KeyError):
        from_responses(data, score="other")


def test_plot_tradeoff_renders_png(tmp_path, rng):
    pytest.importorskip("matplotlib", reason="matplotlib is not installed (optional extra)")
    from rrag_kernels.ops import conformal_sweep
    from rrag_kernels.pipelines.conformal import plot_tradeoff

    s, ok, off = claims(rng, 200)
    sw = conformal_sweep(s, ok, off, alphas=[0.05, 0.1, 0.2, 0.3], n_splits=10, seed=0)
    path = tmp_path / "tradeoff.png"
    plot_tradeoff(sw, path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

