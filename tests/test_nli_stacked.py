"""StackedNLI (a learned model + LexicalNLI combined by a fitted logistic regression), its
fitting, and the training script's data helpers (VitaminC converter, minimal-edit recall)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rrag_kernels.models.nli import LABELS, LexicalNLI, StackedNLI, load
from rrag_kernels.models.nli.lexical import OUTCOMES
from rrag_kernels.models.nli.stacked import STACKER_FILE, fit_stacker, stack_features, stacker_record


class FixedScorer:
    """Test double: returns given probability rows in a scrambled label order."""

    labels = ("contradiction", "entailment", "neutral")

    def __init__(self, rows_in_labels_order):
        rows = np.asarray(rows_in_labels_order, dtype=np.float32)
        self.rows = rows[:, [2, 0, 1]]  # columns as self.labels

    def predict_proba(self, premises, hypotheses):
        return self.rows[: len(premises)]


def test_stack_features_layout():
    x = stack_features(np.array([[0.7, 0.2, 0.1]]), ["contradiction"])
    assert x.shape == (1, 3 + len(OUTCOMES))
    np.testing.assert_allclose(x[0, :3], np.log([0.7, 0.2, 0.1]))
    assert x[0, 3 + OUTCOMES.index("contradiction")] == 1.0 and x[0, 3:].sum() == 1.0


def test_fit_stacker_learns_the_lexical_override():
    """On data where the model says entailment but LexicalNLI found a conflict and the gold
    label is contradiction, the fitted combination follows LexicalNLI; elsewhere the model."""
    rng = np.random.default_rng(0)
    n = 600
    gold = rng.integers(0, 3, size=n)
    probs = np.full((n, 3), 0.1)
    probs[np.arange(n), gold] = 0.8
    outcomes = ["neutral"] * n
    fooled = rng.random(n) < 0.3
    for k in np.flatnonzero(fooled):  # model fooled into entailment on a visible swap
        gold[k] = 2
        probs[k] = [0.8, 0.1, 0.1]
        outcomes[k] = "contradiction"
    labels = [LABELS[g] for g in gold]
    fit = fit_stacker(stack_features(probs, outcomes), labels, l2=0.1)
    w, b = np.array(fit["weights"]), np.array(fit["bias"])
    z = stack_features(probs, outcomes) @ w.T + b
    acc = float((z.argmax(1) == gold).mean())
    assert acc > 0.99, acc
    # The model alone gets the fooled ones wrong.
    assert float((probs.argmax(1) == gold).mean()) < 0.8


def test_stacked_scorer_reorders_the_model_columns_and_loads_from_file(tmp_path):
    rows = [[0.9, 0.05, 0.05], [0.05, 0.05, 0.9]]  # entailment, contradiction (LABELS order)
    model = FixedScorer(rows)
    # Weights that copy the model's log-probabilities: the stacked output is the model's.
    w = np.zeros((3, 3 + len(OUTCOMES)))
    w[:, :3] = np.eye(3)
    scorer = StackedNLI(model, w, np.zeros(3))
    out = scorer.predict_proba(["a b c", "d e f"], ["a b c", "d e g"])
    np.testing.assert_allclose(out, np.array(rows), atol=1e-6)
    assert out.dtype == np.float32 and scorer.labels == LABELS
    (tmp_path / STACKER_FILE).write_text(json.dumps(stacker_record({"weights": w.tolist(), "bias": [0, 0, 0]},
                                                                    fitted_on=["x.jsonl"])))
    again = StackedNLI.from_file(model, tmp_path / STACKER_FILE)
    np.testing.assert_allclose(again.predict_proba(["a", "b"], ["a", "b"]), out, atol=1e-6)
    assert "x.jsonl" in repr(again)


@pytest.mark.parametrize("bad", [
    {"features": ["nope"], "weights": [], "bias": []},
    "not an object",
])
def test_stacker_file_errors(tmp_path, bad):
    path = tmp_path / STACKER_FILE
    path.write_text(json.dumps(bad))
    with pytest.raises(ValueError, match="^features:"):
        StackedNLI.from_file(FixedScorer([[1, 0, 0]]), path)
    path.write_text("{not json")
    with pytest.raises(ValueError, match="^path:"):
        StackedNLI.from_file(FixedScorer([[1, 0, 0]]), path)


def test_stacked_scorer_argument_errors():
    with pytest.raises(TypeError, match="^model:"):
        StackedNLI(object(), np.zeros((3, 9)), np.zeros(3))
    with pytest.raises(ValueError, match="^weights:"):
        StackedNLI(FixedScorer([[1, 0, 0]]), np.zeros((3, 4)), np.zeros(3))
    with pytest.raises(ValueError, match="^bias:"):
        StackedNLI(FixedScorer([[1, 0, 0]]), np.zeros((3, 3 + len(OUTCOMES))), np.zeros(2))


def test_load_wraps_a_model_directory_with_a_stacker(tmp_path, monkeypatch):
    """A model directory with stacker.json loads as StackedNLI (the ONNX model itself is
    replaced by a recorder: no model is built here)."""
    import rrag_kernels.models.nli as nli

    made = []

    class RecordingOnnx(FixedScorer):
        def __init__(self, path, **kwargs):
            super().__init__([[1 / 3, 1 / 3, 1 / 3]])
            made.append(path)

    (tmp_path / "model.onnx").write_bytes(b"")
    (tmp_path / "config.json").write_text("{}")
    w = np.zeros((3, 3 + len(OUTCOMES)))
    (tmp_path / STACKER_FILE).write_text(json.dumps(stacker_record({"weights": w.tolist(), "bias": [0, 0, 0]})))
    monkeypatch.setattr(nli, "OnnxNLI", RecordingOnnx)
    scorer = load(str(tmp_path))
    assert isinstance(scorer, StackedNLI) and made == [tmp_path]


def test_vitaminc_converter_and_minimal_edit_recall(tmp_path):
    from rrag_kernels.train_nli import load_vitaminc, minimal_edit_recall

    examples = []
    for k in range(30):
        target = ("True", "False", "Neither")[k % 3]
        examples.append({"input": f"Page {k}: evidence {k} says 1{k}.\nClaim: claim {k}",
                         "target_scores": {t: int(t == target) for t in ("True", "False", "Neither")}})
    path = tmp_path / "task.json"
    path.write_text(json.dumps({"examples": examples}))
    rows = load_vitaminc(path)
    assert len(rows) == 30 and {r["label"] for r in rows} == set(LABELS)
    first = next(r for r in rows if r["id"] == "vitc-0")
    assert first == {"id": "vitc-0", "premise": "Page 0: evidence 0 says 10.", "hypothesis": "claim 0",
                     "label": "entailment", "phenomenon": "vitaminc"}
    sub = load_vitaminc(path, pairs=9, seed=1)
    assert len(sub) == 9 and sorted(r["label"] for r in sub).count("neutral") == 3
    assert [r["id"] for r in sub] == [r["id"] for r in load_vitaminc(path, pairs=9, seed=1)]
    path.write_text(json.dumps({"examples": [{"input": "no separator", "target_scores": {"True": 1}}]}))
    with pytest.raises(ValueError, match="not a VitaminC evidence / claim pair"):
        load_vitaminc(path)

    val = [{"label": "contradiction", "phenomenon": "date_swap"}, {"label": "contradiction", "phenomenon": "date_swap"},
           {"label": "contradiction", "phenomenon": "misleading_reframe"}, {"label": "entailment", "phenomenon": "paraphrase"}]
    rec = minimal_edit_recall(np.array([2, 0, 0, 0]), val)
    assert rec["recall"] == 0.5 and rec["n"] == 2 and rec["per_phenomenon"] == {"date_swap": 0.5}


def test_lexical_outcomes_feed_the_stacker():
    """The outcome names LexicalNLI returns are the stacker's one-hot columns."""
    outs = LexicalNLI().outcomes(["The canal opened on 15 August 1914."], ["The canal opened on 15 August 1904."])
    assert outs == ["contradiction"] and set(outs) <= set(OUTCOMES)
