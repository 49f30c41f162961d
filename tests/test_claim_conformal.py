"""ClaimConformal: calibrate / filter / evaluate, grouped thresholds, JSON round trip, errors."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conformal_data import claims

from rrag_kernels.ops import conformal_quantile, r_scores
from rrag_kernels.pipelines.conformal import FIELDS, ClaimConformal, from_responses, hash_noise


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
    with pytest.raises(ValueError, match="^format: not a ClaimConformal file"):
        ClaimConformal.load(p)


# --------------------------------------------------------------------------- load(): every field checked

_DELETE = object()  # the field is removed


def _saved(tmp_path, grouped=False):
    """The parsed JSON of a saved calibration (groups "0" and "1" when grouped)."""
    off = np.arange(0, 61, 3, dtype=np.int64)  # 20 responses of 3 claims
    s = np.linspace(0.0, 1.0, 60)
    ok = np.arange(60) % 4 != 0
    groups = [str(i % 2) for i in range(20)] if grouped else None
    cc = ClaimConformal(alpha=0.2).calibrate(s, ok, off, groups=groups)
    cc.save(tmp_path / "good.json")
    return json.loads((tmp_path / "good.json").read_text())


def _write(tmp_path, d, edits):
    for path, value in edits:
        *parents, last = path
        target = d
        for key in parents:
            target = target[key]
        if value is _DELETE:
            del target[last]
        else:
            target[last] = value
    p = tmp_path / "cal.json"
    p.write_text(json.dumps(d))
    return p


# (case id, grouped, [(path of the field, new value), ...], message that must start the ValueError)
_MALFORMED = [
    ("no format", False, [(("format",), _DELETE)], "format: not a ClaimConformal file"),
    ("other format", False, [(("format",), "rrag_kernels.Other")], "format: not a ClaimConformal file"),
    ("no version", False, [(("format_version",), _DELETE)], "format_version: missing"),
    ("newer version", False, [(("format_version",), 2)], "format_version: the file has format 2, written by a newer"),
    ("version 0", False, [(("format_version",), 0)], "format_version: must be >= 1"),
    ("version string", False, [(("format_version",), "1")], "format_version: expected an int"),
    ("version float", False, [(("format_version",), 1.0)], "format_version: expected an int"),
    ("version bool", False, [(("format_version",), True)], "format_version: expected an int"),
    ("unknown field", False, [(("qhat",), 0.5)], "qhat: not a field of a format 1 file"),
    ("package_version int", False, [(("package_version",), 1)], "package_version: expected a string"),
    ("alpha string", False, [(("alpha",), "0.1")], "alpha: expected a float, got str"),
    ("alpha null", False, [(("alpha",), None)], "alpha: expected a float, got NoneType"),
    ("alpha bool", False, [(("alpha",), True)], "alpha: expected a float, got bool"),
    ("alpha NaN", False, [(("alpha",), float("nan"))], r"alpha: must be in \(0, 1\)"),
    ("alpha 0", False, [(("alpha",), 0)], r"alpha: must be in \(0, 1\)"),
    ("alpha 1", False, [(("alpha",), 1.0)], r"alpha: must be in \(0, 1\)"),
    ("alpha inf", False, [(("alpha",), float("inf"))], r"alpha: must be in \(0, 1\)"),
    ("alpha huge int", False, [(("alpha",), 10**400)], "alpha: an integer of about 10\\*\\*400 is beyond the float range"),
    ("a 0", False, [(("a",), 0.0)], r"a: the factuality level must be in \(0, 1\]"),
    ("a 1.5", False, [(("a",), 1.5)], r"a: the factuality level must be in \(0, 1\]"),
    ("a NaN", False, [(("a",), float("nan"))], r"a: the factuality level must be in \(0, 1\]"),
    ("a list", False, [(("a",), [1.0])], "a: expected a float, got list"),
    ("sentinel NaN", False, [(("sentinel",), float("nan"))], "sentinel: must not be NaN"),
    ("sentinel 'nan'", False, [(("sentinel",), "nan")], "sentinel: expected a float, got str"),
    ("sentinel 'Infinity'", False, [(("sentinel",), "Infinity")], "sentinel: expected a float, got str"),
    ("sentinel null", False, [(("sentinel",), None)], "sentinel: expected a float"),
    ("on_too_few other", False, [(("on_too_few",), "clip")], "on_too_few: expected one of"),
    ("on_too_few list", False, [(("on_too_few",), ["inf"])], "on_too_few: expected one of"),
    ("score_name int", False, [(("score_name",), 3)], "score_name: expected a string"),
    ("score_name too long", False, [(("score_name",), "s" * 201)], "score_name: at most 200 characters, got 201"),
    ("grouped string", False, [(("grouped",), "false")], "grouped: expected a bool"),
    ("grouped int", False, [(("grouped",), 0)], "grouped: expected a bool"),
    ("q_hat NaN", False, [(("q_hat",), float("nan"))], "q_hat: must not be NaN"),
    ("q_hat 'nan'", False, [(("q_hat",), "nan")], "q_hat: expected a float, got str"),
    ("q_hat numeric string", False, [(("q_hat",), "0.5")], "q_hat: expected a float, got str"),
    ("q_hat huge int", False, [(("q_hat",), 10**400)], "q_hat: an integer of about 10\\*\\*400 is beyond the float range"),
    ("q_hat object, not grouped", False, [(("q_hat",), {"0": 0.5})], "q_hat: expected a float, got dict"),
    ("n 0", False, [(("n",), 0)], "n: must satisfy 1 <= n"),
    ("n negative", False, [(("n",), -3)], "n: must satisfy 1 <= n"),
    ("n float", False, [(("n",), 20.0)], "n: expected an int, got float"),
    ("n string", False, [(("n",), "20")], "n: expected an int, got str"),
    ("n beyond int64", False, [(("n",), 2**63)], "n: must satisfy 1 <= n <= 9223372036854775807"),
    ("hash null", False, [(("calibration_hash",), None)], "calibration_hash: expected a string"),
    ("hash md5", False, [(("calibration_hash",), "md5:0123")], "calibration_hash: expected 'sha256:'"),
    ("hash upper-case", False, [(("calibration_hash",), "sha256:" + "AB" * 32)],
     "calibration_hash: expected 'sha256:'"),
    ("hash short", False, [(("calibration_hash",), "sha256:abc")], "calibration_hash: expected 'sha256:'"),
    ("grouped q_hat number", True, [(("q_hat",), 0.5)], r"q_hat: expected an object \{group: value\}"),
    ("grouped n number", True, [(("n",), 20)], r"n: expected an object \{group: value\}"),
    ("grouped no groups", True, [(("q_hat",), {}), (("n",), {})],
     "q_hat: a grouped calibration has at least one group"),
    ("grouped n lacks a group", True, [(("n", "1"), _DELETE)], "n: the groups must be those of q_hat, but group '1'"),
    ("grouped n extra group", True, [(("n", "2"), 5)], "n: the groups must be those of q_hat, but group '2'"),
    ("grouped q_hat NaN", True, [(("q_hat", "0"), float("nan"))], r"q_hat\['0'\]: must not be NaN"),
    ("grouped q_hat string", True, [(("q_hat", "1"), "high")], r"q_hat\['1'\]: expected a float, got str"),
    ("grouped n 0", True, [(("n", "0"), 0)], r"n\['0'\]: must satisfy 1 <="),
    ("grouped n float", True, [(("n", "1"), 10.5)], r"n\['1'\]: expected an int, got float"),
]
_MALFORMED += [(f"no {field}", False, [((field,), _DELETE)], f"{field}: missing")
               for field in FIELDS if field not in ("format", "format_version")]


@pytest.mark.parametrize("grouped, edits, message", [c[1:] for c in _MALFORMED], ids=[c[0] for c in _MALFORMED])
def test_load_rejects_each_malformed_field(tmp_path, grouped, edits, message):
    path = _write(tmp_path, _saved(tmp_path, grouped), edits)
    with pytest.raises(ValueError, match="^" + message) as info:
        ClaimConformal.load(path)
    assert str(info.value).endswith(f"(in {path})")  # the message names the file too


# (case id, file content, message that must start the ValueError)
_BAD_FILES = [
    ("empty file", b"", "path: .* is not valid JSON"),
    ("truncated JSON", b'{"format": "rrag_kernels.ClaimConformal", ', "path: .* is not valid JSON"),
    ("not UTF-8", b'{"format": "\xff"}', "path: .* is not UTF-8 text"),
    ("top-level list", b"[1, 2]", "path: expected a JSON object at the top level, got list"),
    ("top-level number", b"0.5", "path: expected a JSON object at the top level, got float"),
    ("deep nesting", b"[" * 100_000 + b"]" * 100_000, "path: "),
    ("integer of 5000 digits", b'{"q_hat": ' + b"9" * 5000 + b"}", "path: .*: JSON a number too long to read"),
]


@pytest.mark.parametrize("content, message", [c[1:] for c in _BAD_FILES], ids=[c[0] for c in _BAD_FILES])
def test_load_rejects_unreadable_files(tmp_path, content, message):
    path = tmp_path / "cal.json"
    path.write_bytes(content)
    with pytest.raises(ValueError, match="^" + message):
        ClaimConformal.load(path)


def test_load_rejects_a_field_given_twice_and_a_nan_literal(tmp_path):
    good = _saved(tmp_path)
    text = json.dumps(good)
    path = tmp_path / "cal.json"
    path.write_text('{"alpha": 0.5, ' + text[1:])  # json.loads alone would keep the last alpha
    with pytest.raises(ValueError, match="^alpha: appears twice"):
        ClaimConformal.load(path)
    # The case: a NaN q_hat was accepted and then silently kept nothing.
    path.write_text(text.replace(f'"q_hat": {json.dumps(good["q_hat"])}', '"q_hat": NaN'))
    assert "NaN" in path.read_text()
    with pytest.raises(ValueError, match="^q_hat: must not be NaN"):
        ClaimConformal.load(path)
    with pytest.raises(ValueError, match="^path: expected a JSON object"):
        ClaimConformal.from_dict([good])


def test_load_round_trips_infinities(tmp_path):
    """inf / -inf are written as strings and read back; JSON's Infinity literal reads too."""
    off = np.array([0, 2, 4], dtype=np.int64)
    cc = ClaimConformal(alpha=0.05).calibrate([0.1, 0.9, 0.5, 0.7], [True, False, True, True], off)
    assert cc.q_hat == np.inf and cc.sentinel == -np.inf  # too few responses: keep nothing
    cc.save(tmp_path / "cal.json")
    d = json.loads((tmp_path / "cal.json").read_text())
    assert d["q_hat"] == "inf" and d["sentinel"] == "-inf"
    back = ClaimConformal.load(tmp_path / "cal.json")
    assert (back.q_hat, back.sentinel, back.n, back.alpha, back.a) == (np.inf, -np.inf, 2, 0.05, 1.0)
    assert back.to_dict() == cc.to_dict()
    d["q_hat"], d["sentinel"] = float("inf"), -1.0
    (tmp_path / "lit.json").write_text(json.dumps(d))  # Infinity, as json.dumps writes it
    assert ClaimConformal.load(tmp_path / "lit.json").q_hat == np.inf


def test_constructor_checks_on_too_few_and_score_name():
    with pytest.raises(ValueError, match="^on_too_few: expected one of"):
        ClaimConformal(on_too_few="clip")
    with pytest.raises(TypeError, match="^score_name: expected a string"):
        ClaimConformal(score_name=None)


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



def test_the_file_is_no_integrity_check_an_edited_q_hat_loads_as_written(tmp_path):
    # documented (pipelines/conformal/calibrator.py): calibration_hash seals the data only
    path = _write(tmp_path, _saved(tmp_path), [(("q_hat",), 0.123)])
    assert ClaimConformal.load(path).q_hat == 0.123
