"""Scores: accuracy, macro-F1 and minimal-edit recall of predictions, ONNX files scored
through OnnxNLI, and the model + LexicalNLI stacker fitted and scored.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from .data import ID2LABEL, LABEL2ID

#: The minimal-edit contradictions issue 10 asks a judge to catch (>= 0.85 recall).
MINIMAL_EDIT_CONTRADICTIONS = ("number_swap", "date_swap", "entity_swap", "location_swap", "role_swap",
                               "negation_polarity")


def minimal_edit_recall(pred: np.ndarray, rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Recall of contradiction on the minimal-edit contradiction phenomena of ``rows``
    (overall and per phenomenon); ``pred`` are class indices in ID2LABEL order."""
    contra = LABEL2ID["contradiction"]
    hits: dict[str, list[int]] = {}
    for p, r in zip(np.asarray(pred), rows):
        if r.get("label") == "contradiction" and r.get("phenomenon") in MINIMAL_EDIT_CONTRADICTIONS:
            hits.setdefault(r["phenomenon"], []).append(int(p == contra))
    total = [h for v in hits.values() for h in v]
    return {"recall": float(np.mean(total)) if total else float("nan"), "n": len(total),
            "per_phenomenon": {k: round(float(np.mean(v)), 3) for k, v in sorted(hits.items())}}


def evaluate(pred: np.ndarray, gold: Sequence[str], labels: Sequence[str] = tuple(ID2LABEL.values())) -> dict[str, Any]:
    """Accuracy, macro-F1, per-class F1 and the confusion matrix (rows gold, columns
    predicted, in ``labels`` order) of predicted class indices ``pred``."""
    y = np.array([list(labels).index(g) for g in gold], dtype=np.int64)
    pred = np.asarray(pred, dtype=np.int64)
    k = len(labels)
    conf = np.zeros((k, k), dtype=np.int64)
    np.add.at(conf, (y, pred), 1)
    f1 = {}
    for c, name in enumerate(labels):
        tp = conf[c, c]
        prec = tp / conf[:, c].sum() if conf[:, c].sum() else 0.0
        rec = tp / conf[c, :].sum() if conf[c, :].sum() else 0.0
        f1[name] = float(2 * prec * rec / (prec + rec)) if prec + rec else 0.0
    return {
        "n": int(len(y)),
        "accuracy": float((pred == y).mean()) if len(y) else float("nan"),
        "macro_f1": float(np.mean(list(f1.values()))),
        "f1": f1,
        "confusion": conf.tolist(),
    }



def _onnx_logits(directory: Path, file_name: str, premises: Sequence[str], hypotheses: Sequence[str]) -> np.ndarray:
    """Class probabilities of an ONNX file through OnnxNLI, mapped back to ID2LABEL order
    (OnnxNLI's LABELS order is the same)."""
    from .. import OnnxNLI

    return OnnxNLI(directory, file_name=file_name, providers=["CPUExecutionProvider"]).predict_proba(
        list(premises), list(hypotheses))


def _fit_and_write_stacker(out: Path, stack_rows: Sequence[dict[str, Any]], val_rows: Sequence[dict[str, Any]],
                           stack_files: Sequence[str]) -> dict[str, Any]:
    """Fit the model + LexicalNLI logistic regression on ``stack_rows``, write stacker.json,
    and score the shipped model alone and stacked on ``val_rows``."""
    from .. import LexicalNLI, OnnxNLI
    from ..stacked import fit_stacker, stack_features, stacker_record

    model = OnnxNLI(out, providers=["CPUExecutionProvider"])
    lexical = LexicalNLI()

    def feats(rows):
        prem, hyp = [r["premise"] for r in rows], [r["hypothesis"] for r in rows]
        return stack_features(model.predict_proba(prem, hyp), lexical.outcomes(prem, hyp))

    fit = fit_stacker(feats(stack_rows), [r["label"] for r in stack_rows])
    record = stacker_record(fit, fitted_on=list(stack_files), n_fitted=len(stack_rows))
    report: dict[str, Any] = {"fitted_on": list(stack_files), "n": len(stack_rows)}
    if val_rows:
        from ..stacked import StackedNLI

        gold = [r["label"] for r in val_rows]
        prem, hyp = [r["premise"] for r in val_rows], [r["hypothesis"] for r in val_rows]
        alone = model.predict_proba(prem, hyp).argmax(1)
        stacked = StackedNLI(model, fit["weights"], fit["bias"], lexical=lexical).predict_proba(prem, hyp).argmax(1)
        report["validation_model_alone"] = evaluate(alone, gold) | {
            "minimal_edit_contradiction": minimal_edit_recall(alone, val_rows)}
        report["validation_stacked"] = evaluate(stacked, gold) | {
            "minimal_edit_contradiction": minimal_edit_recall(stacked, val_rows)}
        record["validation_accuracy_alone"] = report["validation_model_alone"]["accuracy"]
        record["validation_accuracy_stacked"] = report["validation_stacked"]["accuracy"]
    (out / "stacker.json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return report
