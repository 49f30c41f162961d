"""The training data: labels, the split files, jsonl pairs and VitaminC rows.

Reads :data:`TRAIN_FILES` (``train_1`` ... ``train_4``, ``train_6``, ``train_8``) from
``--data-dir`` for training, :data:`STACK_FILES` (``train_7``) for the stacker only, and
``train_5.jsonl`` (its own domain group: literature, art, music, film, sport) as the
held-out validation split. Validation pairs are never trained on and never used to pick
an epoch or a setting: they are only scored at the end and written to metadata.json.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any, Sequence

#: Label order of the trained model (written into config.json).
ID2LABEL: dict[int, str] = {0: "entailment", 1: "neutral", 2: "contradiction"}
LABEL2ID: dict[str, int] = {v: k for k, v in ID2LABEL.items()}

TRAIN_FILES = ("train_1.jsonl", "train_2.jsonl", "train_3.jsonl", "train_4.jsonl", "train_6.jsonl", "train_8.jsonl")
#: Held out: never trained on, never used to choose anything; scored at the end.
VAL_FILES = ("train_5.jsonl",)
#: Not trained on either: the model + LexicalNLI combination (stacker.json) is fitted on it, and
#: it chose the recipe (lr, epochs) among the runs tried.
STACK_FILES = ("train_7.jsonl",)


def load_pairs(data_dir: str | Path, files: Sequence[str]) -> list[dict[str, Any]]:
    """Read jsonl pairs ``{"premise", "hypothesis", "label", ...}`` from ``data_dir/files``.

    Raises
    ------
    FileNotFoundError
        A file is missing.
    ValueError
        A line lacks premise / hypothesis, or its label is not one of ID2LABEL's.
    """
    rows: list[dict[str, Any]] = []
    for name in files:
        path = Path(data_dir) / name
        with open(path, encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                row = json.loads(line)
                if not isinstance(row.get("premise"), str) or not isinstance(row.get("hypothesis"), str):
                    raise ValueError(f"{path}:{lineno}: premise and hypothesis must be strings")
                if row.get("label") not in LABEL2ID:
                    raise ValueError(f"{path}:{lineno}: label {row.get('label')!r} not in {tuple(LABEL2ID)}")
                rows.append(row)
    return rows


#: Where VitaminC lives inside the ``bigbench==1.0.0`` sdist (``pip download --no-deps``, or the
#: file from PyPI's simple index; 358 MB), relative to the unpacked ``bigbench-1.0.0/``.
VITAMINC_TASK = "bigbench/benchmark_tasks/vitaminc_fact_verification/task.json"
VITAMINC_CREDIT = ("VitaminC (Schuster, Fisch & Barzilay, NAACL 2021, 'Get Your Vitamin C! Robust Fact "
                   "Verification with Contrastive Evidence'), CC BY-SA 3.0, as shipped in BIG-bench "
                   "(bigbench==1.0.0, task vitaminc_fact_verification)")
_VITAMINC_LABELS = {"True": "entailment", "False": "contradiction", "Neither": "neutral"}


def load_vitaminc(task_json: str | Path, *, pairs: int | None = None, seed: int = 0) -> list[dict[str, Any]]:
    """VitaminC's evidence / claim pairs as NLI rows, read from BIG-bench's ``task.json``.

    Each example's input is ``"<page title>: <evidence>\nClaim: <claim>"`` with target
    True / False / Neither; the row is ``premise = "<page title>: <evidence>"``, ``hypothesis =
    <claim>``, label entailment / contradiction / neutral, ``phenomenon = "vitaminc"``. Nothing
    converted is stored: the rows are rebuilt from the task file on every run.

    Parameters
    ----------
    task_json : path
        ``.../bigbench/benchmark_tasks/vitaminc_fact_verification/task.json``, or a gzip copy
        of it ending in ``.gz``.
    pairs : int, optional
        A class-balanced, seeded subsample of this many rows (all 54,668 when None).
    seed : int

    Raises
    ------
    ValueError
        An example without the ``Claim:`` separator or with an unknown target.
    """
    path = Path(task_json)
    if path.suffix == ".gz":  # a gzip copy of task.json (1.8 MB instead of 23 MB)
        import gzip

        with gzip.open(path, "rt", encoding="utf-8") as fh:
            data = json.load(fh)
    else:
        data = json.loads(path.read_text(encoding="utf-8"))
    by_label: dict[str, list[dict[str, Any]]] = {lab: [] for lab in LABEL2ID}
    for k, ex in enumerate(data.get("examples", [])):
        text = ex.get("input", "")
        evidence, sep, claim = text.rpartition("\nClaim:")
        scores = ex.get("target_scores", {})
        target = max(scores, key=scores.get) if scores else None
        if not sep or target not in _VITAMINC_LABELS:
            raise ValueError(f"{task_json}: example {k} is not a VitaminC evidence / claim pair")
        label = _VITAMINC_LABELS[target]
        by_label[label].append({"id": f"vitc-{k}", "premise": evidence.strip(), "hypothesis": claim.strip(),
                                "label": label, "phenomenon": "vitaminc"})
    rng = random.Random(seed)
    if pairs is None:
        rows = [r for lab in LABEL2ID for r in by_label[lab]]
    else:
        # Balanced: an equal share per class, the smallest class taken whole if it is short.
        rows, left = [], pairs
        for n_left, lab in zip((3, 2, 1), sorted(LABEL2ID, key=lambda x: len(by_label[x]))):
            take = min(len(by_label[lab]), left // n_left)
            rows += rng.sample(by_label[lab], take)
            left -= take
    rng.shuffle(rows)
    return rows
