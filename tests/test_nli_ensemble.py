"""EnsembleNLI: weighted mean of members, label order from each member, clear errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from rrag_kernels.models import nli
from rrag_kernels.models.nli import EnsembleNLI, LexicalNLI

TRAIN_5 = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "nli" / "train_5.jsonl"


class TableScorer:
    """Fixed rows per pair, in a label order of its own."""

    def __init__(self, labels, rows):
        self.labels = tuple(labels)
        self.rows = np.asarray(rows, dtype=np.float32)

    def predict_proba(self, premises, hypotheses):
        return self.rows[: len(premises)]


def test_weighted_mean_in_the_package_label_order(rng):
    n = 7
    a = rng.dirichlet(np.ones(3), n)
    b = rng.dirichlet(np.ones(3), n)
    # b's columns come in another order: contradiction, entailment, neutral
    sb = TableScorer(("contradiction", "entailment", "neutral"), b[:, [2, 0, 1]])
    sa = TableScorer(nli.LABELS, a)
    got = EnsembleNLI([sa, sb], weights=[3.0, 1.0]).predict_proba(["p"] * n, ["h"] * n)
    np.testing.assert_allclose(got, 0.75 * a + 0.25 * b, rtol=0, atol=1e-6)
    assert got.dtype == np.float32 and got.shape == (n, 3)
    np.testing.assert_allclose(got.sum(1), 1.0, atol=1e-6)
    equal = EnsembleNLI([sa, sb]).predict_proba(["p"] * n, ["h"] * n)
    np.testing.assert_allclose(equal, (a + b) / 2, atol=1e-6)
    assert EnsembleNLI([sa]).predict_proba([], []).shape == (0, 3)


def test_zero_weight_member_is_not_called():
    class Boom:
        labels = nli.LABELS

        def predict_proba(self, premises, hypotheses):
            raise AssertionError("called")

    ok = TableScorer(nli.LABELS, [[0.2, 0.3, 0.5]])
    np.testing.assert_allclose(EnsembleNLI([ok, Boom()], weights=[1, 0]).predict_proba(["p"], ["h"]), [[0.2, 0.3, 0.5]])


def test_errors():
    ok = TableScorer(nli.LABELS, [[0.2, 0.3, 0.5]])
    with pytest.raises(ValueError, match="^members:"):
        EnsembleNLI([])
    with pytest.raises(TypeError, match="^members:"):
        EnsembleNLI(ok)
    with pytest.raises(TypeError, match=r"^members\[1\]:"):
        EnsembleNLI([ok, "lexical"])
    with pytest.raises(ValueError, match="^weights:"):
        EnsembleNLI([ok, ok], weights=[1.0])
    for bad in ([0.0, 0.0], [1.0, -1.0], [np.nan, 1.0]):
        with pytest.raises(ValueError, match="^weights:"):
            EnsembleNLI([ok, ok], weights=bad)
    with pytest.raises(TypeError, match=r"^weights\[0\]:"):
        EnsembleNLI([ok, ok], weights=[True, 1.0])
    with pytest.raises(ValueError, match=r"members\[0\]\.labels"):
        EnsembleNLI([TableScorer(("yes", "maybe", "no"), [[1, 0, 0]])])
    with pytest.raises(ValueError, match="^hypotheses:"):
        EnsembleNLI([ok]).predict_proba(["a", "b"], ["c"])
    wrong = TableScorer(nli.LABELS, np.zeros((1, 2)))
    with pytest.raises(ValueError, match="^members:.*shape"):
        EnsembleNLI([wrong]).predict_proba(["a"], ["b"])


def test_load_ensemble_is_model_plus_lexical():
    if nli.default_model_dir() is None:
        with pytest.raises(FileNotFoundError, match="^ensemble:"):
            nli.load("ensemble")
        return
    pytest.importorskip("onnxruntime")
    pytest.importorskip("tokenizers")
    e = nli.load("ensemble")
    assert isinstance(e, EnsembleNLI) and isinstance(e.members[1], LexicalNLI)
    p, h = ["The bridge opened in 1932."], ["The bridge opened in 1952."]
    want = (np.asarray(e.members[0].predict_proba(p, h), np.float64) + LexicalNLI().predict_proba(p, h)) / 2
    np.testing.assert_allclose(e.predict_proba(p, h), want, atol=1e-6)


@pytest.mark.skipif(not TRAIN_5.is_file(), reason=f"the NLI validation data is absent ({TRAIN_5})")
@pytest.mark.slow  # make test-all: scores the held-out split with every member
def test_ensemble_beats_both_members_on_held_out_split():
    if nli.default_model_dir() is None:
        pytest.skip("the packaged NLI model is absent")
    pytest.importorskip("onnxruntime")
    rows = [json.loads(line) for line in TRAIN_5.read_text().splitlines() if line.strip()]
    p, h = [r["premise"] for r in rows], [r["hypothesis"] for r in rows]
    gold = np.array([nli.LABELS.index(r["label"]) for r in rows])
    e = nli.load("ensemble")
    acc = {name: float(np.mean(s.predict_proba(p, h).argmax(1) == gold))
           for name, s in (("model", e.members[0]), ("lexical", e.members[1]), ("ensemble", e))}
    assert acc["ensemble"] > max(acc["model"], acc["lexical"]), acc
