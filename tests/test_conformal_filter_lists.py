"""ClaimConformal.filter_lists / q_hat_for: the one ragged filter that every shell uses
(``rrag conformal filter``, ``POST /filter``, Ray), against a per-response reference."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conformal_data import claims

from rrag_kernels.cli.conformal import filter_records
from rrag_kernels.pipelines.conformal import ClaimConformal

GROUPS = ("a", "b", "c")


def _calibrated(rng, grouped: bool) -> ClaimConformal:
    s, ok, off = claims(rng, 120, ties=False)
    groups = [GROUPS[i % 3] for i in range(120)] if grouped else None
    return ClaimConformal(alpha=0.2, sentinel=-1.0).calibrate(s, ok, off, groups=groups)


def _ragged(rng, n: int, empty_share: float = 0.25) -> list[list[float]]:
    """n responses, 0..8 claims each (ties included)."""
    out = []
    for _ in range(n):
        p = 0 if rng.random() < empty_share else int(rng.integers(1, 9))
        out.append(np.round(rng.random(p), 2).tolist())
    return out


def _reference(cc: ClaimConformal, score_lists, groups=None) -> list[np.ndarray]:
    """One plain ``cc.filter`` call per response."""
    out = []
    for k, scores in enumerate(score_lists):
        off = np.array([0, len(scores)], dtype=np.int64)
        out.append(cc.filter(np.asarray(scores, dtype=np.float64), off,
                             None if groups is None else [groups[k]]))
    return out


def _assert_masks_equal(got, want) -> None:
    assert len(got) == len(want)
    for k, (g, w) in enumerate(zip(got, want)):
        assert isinstance(g, np.ndarray), f"response {k}: {g!r}"
        assert g.dtype == np.bool_ and g.shape == w.shape, k
        np.testing.assert_array_equal(g, w, err_msg=f"response {k}")


# --------------------------------------------------------------------------- equality with the reference


@pytest.mark.parametrize("grouped", [False, True])
@pytest.mark.parametrize("n", [0, 1, 2, 37, 300])
def test_equals_per_response_filter_on_random_ragged_lists(rng, grouped, n):
    cc = _calibrated(rng, grouped)
    lists = _ragged(rng, n)
    groups = [GROUPS[int(i)] for i in rng.integers(0, 3, n)] if grouped else None
    got = cc.filter_lists(lists, groups)
    _assert_masks_equal(got, _reference(cc, lists, groups))
    assert sum(len(x) for x in lists) == sum(m.shape[0] for m in got)


def test_one_filter_call_for_all_good_responses(rng):
    cc = _calibrated(rng, grouped=True)
    lists = _ragged(rng, 50)
    lists[3] = [0.2, math.nan]
    groups = [GROUPS[k % 3] for k in range(50)]
    groups[7] = "zzz"
    calls = []
    real = cc.filter
    cc.filter = lambda s, off, g=None: calls.append(len(off) - 1) or real(s, off, g)
    got = cc.filter_lists(lists, groups)
    assert calls == [48]  # one call over the 48 good responses, no retry one by one
    assert isinstance(got[3], ValueError) and isinstance(got[7], ValueError)
    good = [k for k in range(50) if k not in (3, 7)]
    del cc.filter
    _assert_masks_equal([got[k] for k in good], _reference(cc, [lists[k] for k in good], [groups[k] for k in good]))


def test_group_labels_are_matched_as_given(rng):
    s, ok, off = claims(rng, 90, ties=False)
    cc = ClaimConformal(alpha=0.2).calibrate(s, ok, off, groups=[k % 2 for k in range(90)])  # int labels
    lists = _ragged(rng, 6, empty_share=0.0)
    got = cc.filter_lists(lists, [0, 1, "1", 1, 0, np.int64(1)])
    assert str(got[2]).startswith("groups[2]: no threshold for group '1'")  # "1" is not 1
    good = [0, 1, 3, 4, 5]
    _assert_masks_equal([got[k] for k in good], _reference(cc, [lists[k] for k in good], [0, 1, 1, 0, 1]))
    assert cc.q_hat_for(np.int64(1)) == cc.q_hat[1]


def test_a_single_response_with_its_claims_and_an_empty_one(rng):
    cc = _calibrated(rng, grouped=False)
    q = cc.q_hat
    [mask] = cc.filter_lists([[q - 0.1, q, q + 0.1]])
    assert mask.tolist() == [False, True, True]  # kept iff score >= q_hat, ties kept
    [empty] = cc.filter_lists([[]])
    assert empty.dtype == np.bool_ and empty.shape == (0,)
    assert cc.filter_lists([]) == []
    assert cc.filter_lists([], groups=[]) == []


def test_inputs_of_other_sequence_kinds(rng):
    cc = _calibrated(rng, grouped=False)
    lists = _ragged(rng, 20, empty_share=0.0)
    want = _reference(cc, lists)
    as_arrays = [np.asarray(x, dtype=np.float32 if k % 2 else np.float64) for k, x in enumerate(lists)]
    _assert_masks_equal(cc.filter_lists(as_arrays), _reference(cc, as_arrays))
    _assert_masks_equal(cc.filter_lists(tuple(tuple(x) for x in lists)), want)
    ints = [[0, 1, 2], [1], []]
    _assert_masks_equal(cc.filter_lists(ints), _reference(cc, ints))
    rect = np.round(rng.random((5, 4)), 2)  # a 2-d array: its rows are the responses
    _assert_masks_equal(cc.filter_lists(rect), _reference(cc, list(rect)))
    inf = [[math.inf, -math.inf, cc.q_hat]]  # infinities are scores, as in filter()
    assert cc.filter_lists(inf)[0].tolist() == [True, False, True]


# --------------------------------------------------------------------------- one bad response


@pytest.mark.parametrize("grouped", [False, True])
def test_a_nan_score_is_that_responses_error_and_the_others_are_filtered(rng, grouped):
    cc = _calibrated(rng, grouped)
    lists = _ragged(rng, 12, empty_share=0.0)
    lists[4] = [0.5, float("nan"), 0.7, float("nan")]
    lists[9] = [float("nan")]
    groups = [GROUPS[k % 3] for k in range(12)] if grouped else None
    got = cc.filter_lists(lists, groups)
    for k in (4, 9):
        assert isinstance(got[k], ValueError)
        assert str(got[k]).startswith(f"score_lists[{k}]: claim ") and "nan" in str(got[k])
    assert str(got[4]).startswith("score_lists[4]: claim 1 has score nan")  # the first NaN
    assert str(got[9]).startswith("score_lists[9]: claim 0 ")
    good = [k for k in range(12) if k not in (4, 9)]
    _assert_masks_equal([got[k] for k in good],
                        _reference(cc, [lists[k] for k in good], None if groups is None else [groups[k] for k in good]))
    # every response bad: all errors, no raise
    assert all(isinstance(x, ValueError) for x in cc.filter_lists([[math.nan]] * 3, groups and groups[:3]))


def test_non_numeric_responses_are_errors_naming_their_index(rng):
    cc = _calibrated(rng, grouped=False)
    ok = [0.1, 0.9]
    lists = [ok, None, "0.5", 0.5, [0.1, "x"], [True, False], [0.2, None], [[0.1], [0.2]], [[0.1], 0.2], ok]
    got = cc.filter_lists(lists)
    kinds = {1: TypeError, 2: TypeError, 3: TypeError, 4: TypeError, 5: TypeError, 6: TypeError,
             7: ValueError, 8: ValueError}
    for k, kind in kinds.items():
        assert type(got[k]) is kind, (k, got[k])
        assert str(got[k]).startswith(f"score_lists[{k}]: "), got[k]
    assert "claim 1 has score 'x'" in str(got[4]) and "claim 0 has score True" in str(got[5])
    assert "claim 1 has score None" in str(got[6]) and "NoneType" in str(got[1])
    _assert_masks_equal([got[0], got[9]], _reference(cc, [ok, ok]))


def test_unknown_missing_and_unhashable_groups(rng):
    cc = _calibrated(rng, grouped=True)
    lists = _ragged(rng, 6, empty_share=0.0)
    lists[5] = []
    groups = ["a", "zzz", None, ["a"], "c", "nope"]
    got = cc.filter_lists(lists, groups)
    assert isinstance(got[1], ValueError) and str(got[1]).startswith("groups[1]: no threshold for group 'zzz'")
    assert "a, b, c" in str(got[1])  # the calibration's groups
    assert isinstance(got[2], ValueError) and str(got[2]).startswith("groups[2]: missing (None)")
    assert isinstance(got[3], TypeError) and str(got[3]).startswith("groups[3]: ") and "hashable" in str(got[3])
    assert isinstance(got[5], ValueError) and str(got[5]).startswith("groups[5]: ")  # empty, yet its group counts
    _assert_masks_equal([got[0], got[4]], _reference(cc, [lists[0], lists[4]], ["a", "c"]))
    # a bad group wins over a NaN score in the same response
    both = cc.filter_lists([[math.nan]], ["zzz"])[0]
    assert str(both).startswith("groups[0]: ")


# --------------------------------------------------------------------------- raised errors


def test_call_errors_are_raised(rng):
    grouped, plain = _calibrated(rng, grouped=True), _calibrated(rng, grouped=False)
    lists = [[0.1], [0.2, 0.3]]
    with pytest.raises(ValueError, match=r"^groups: expected 2 labels \(one per response\), got 3"):
        grouped.filter_lists(lists, ["a", "b", "c"])
    with pytest.raises(ValueError, match=r"^groups: expected 2 labels"):
        plain.filter_lists(lists, ["a"])  # checked even where groups are not needed
    with pytest.raises(ValueError, match="^groups: this calibrator is group-conditional"):
        grouped.filter_lists(lists)
    with pytest.raises(ValueError, match="not calibrated"):
        ClaimConformal().filter_lists(lists)
    for bad in ("0.1 0.2", 0.5, None, {"a": [0.1]}, np.zeros(3)):
        with pytest.raises(TypeError, match="^score_lists: "):
            plain.filter_lists(bad)
    with pytest.raises(TypeError, match="^groups: "):
        grouped.filter_lists(lists, "ab")


def test_q_hat_for(rng):
    grouped, plain = _calibrated(rng, grouped=True), _calibrated(rng, grouped=False)
    assert plain.q_hat_for() == plain.q_hat and plain.q_hat_for("anything") == plain.q_hat
    assert isinstance(plain.q_hat_for(), float)
    assert [grouped.q_hat_for(g) for g in GROUPS] == [grouped.q_hat[g] for g in GROUPS]
    with pytest.raises(ValueError, match="^group: no threshold for group 'zzz'"):
        grouped.q_hat_for("zzz")
    with pytest.raises(ValueError, match=r"^group: missing \(None\)"):
        grouped.q_hat_for()
    with pytest.raises(TypeError, match="^group: "):
        grouped.q_hat_for(["a"])
    with pytest.raises(ValueError, match="not calibrated"):
        ClaimConformal().q_hat_for()


# --------------------------------------------------------------------------- filter_records on top of it


def _old_filter_records(cc, responses):
    """filter_records as it was before filter_lists (the records must not change)."""
    grouped = isinstance(cc.q_hat, dict)
    records = [None] * len(responses)
    good = []
    for k, resp in enumerate(responses):
        if grouped and (resp.get("group") is None or str(resp["group"]) not in cc.q_hat):
            records[k] = {"line": resp["line"], **({"id": resp["id"]} if resp.get("id") is not None else {}),
                          "error": f"'group' {resp.get('group')!r} is not a group of the calibration "
                                   f"({', '.join(cc.q_hat)})"}
        else:
            good.append(k)
    if good:
        sizes = [len(responses[k]["scores"]) for k in good]
        scores = np.array([x for k in good for x in responses[k]["scores"]], dtype=np.float64)
        offsets = np.r_[0, np.cumsum(sizes)].astype(np.int64)
        groups = [str(responses[k]["group"]) for k in good] if grouped else None
        keep = cc.filter(scores, offsets, groups)
        for j, k in enumerate(good):
            resp = responses[k]
            mask = keep[offsets[j]:offsets[j + 1]]
            claims_ = [{"text": t, "score": float(x), "kept": bool(m)}
                       for t, x, m in zip(resp["texts"], resp["scores"], mask)]
            rec = {"line": resp["line"]}
            if resp.get("id") is not None:
                rec["id"] = resp["id"]
            rec.update(prompt=resp["prompt"], q_hat=cc.q_hat[groups[j]] if grouped else cc.q_hat,
                       n_claims=len(claims_), n_kept=int(mask.sum()), claims=claims_,
                       kept=[c["text"] for c in claims_ if c["kept"]])
            records[k] = rec
    return records


@pytest.mark.parametrize("grouped", [False, True])
def test_filter_records_are_unchanged(rng, grouped, tmp_path):
    cc = _calibrated(rng, grouped)
    if grouped:  # as the CLI and server have it: loaded from a file, str group labels
        cc.save(tmp_path / "cal.json")
        cc = ClaimConformal.load(tmp_path / "cal.json")
    lists = _ragged(rng, 40)
    group_pool = ["a", "b", "c", "zzz", None, 7]
    responses = [{"line": k + 1, "id": None if k % 4 == 0 else f"r{k}", "prompt": f"p{k}",
                  "group": group_pool[int(rng.integers(0, 6))] if grouped else None,
                  "texts": [f"claim {k}.{c}" for c in range(len(s))], "scores": s}
                 for k, s in enumerate(lists)]
    got = filter_records(cc, responses)
    assert got == _old_filter_records(cc, responses)
    assert [r["line"] for r in got] == list(range(1, 41))
    if grouped:
        errors = [r for r, resp in zip(got, responses) if resp["group"] not in ("a", "b", "c")]
        assert errors and all("is not a group of the calibration (a, b, c)" in r["error"] for r in errors)
        assert not any("error" in r for r, resp in zip(got, responses) if resp["group"] in ("a", "b", "c"))
    assert filter_records(cc, []) == []


def test_filter_records_a_nan_score_is_an_error_record_not_a_raise(rng):
    cc = _calibrated(rng, grouped=False)
    responses = [{"line": k + 1, "id": f"r{k}", "prompt": "p", "group": None, "texts": ["x", "y"],
                  "scores": [0.9, math.nan if k == 1 else 0.1]} for k in range(3)]
    recs = filter_records(cc, responses)
    assert recs[1] == {"line": 2, "id": "r1", "error": recs[1]["error"]}
    assert recs[1]["error"].startswith("scores: claim 1 has score nan")
    assert [recs[k]["kept"] for k in (0, 2)] == [[t for t, s in zip("xy", responses[k]["scores"]) if s >= cc.q_hat]
                                                 for k in (0, 2)]
