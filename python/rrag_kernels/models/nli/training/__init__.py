"""Train the packaged 3-way NLI cross-encoder, export it to ONNX, optionally int8.

Usage::

    python -m rrag_kernels.train_nli --data-dir ../shared/data/nli --out DIR \\
        [--seed 0] [--epochs 4] [--base PATH] [--quantize]

What it does
------------
1. Reads the training files and the held-out validation split ``train_5.jsonl`` from
   ``--data-dir`` (:mod:`.data`). Validation pairs are never trained on and never used to
   pick an epoch or a setting: they are only scored at the end and written to metadata.json.
2. Augments the training pairs (:func:`augment`, deterministic given the seed; the rules are
   in :mod:`.augmentation`). Pass ``--no-augment`` to train on the original pairs only.
3. Builds a 3-label ``BertForSequenceClassification`` from all-MiniLM-L6-v2 (or ``--base``)
   and fine-tunes it, deterministically for a given seed and thread count (:mod:`.train`).
4. Exports it to ONNX, optionally int8 (:mod:`.export`), scores the validation split
   (:mod:`.evaluation`) and writes ``--out`` (:func:`run`, :mod:`.cli`, which lists the files).

``--device cuda`` trains on a GPU (float32, TF32 off, cuBLAS in its deterministic mode):
deterministic for a device and seed, not bitwise equal to the CPU run. Export, quantization
and scoring always run on the CPU. ``tools/nli_sweep.py`` runs several recipes and seeds at
once on one device and chooses on the selection split.

``--from-checkpoint OUT/full`` skips training and redoes the export, quantization and
scoring of an earlier run's checkpoint.

To ship a model, copy ``--out`` without ``full/`` to
``python/rrag_kernels/models/nli/packaged/<name>/`` (the packaged model is
``packaged/minilm-nli``; :func:`rrag_kernels.models.nli.default_model_dir` finds it, and the
wheel carries it as package data).

Modules
-------
:mod:`.data`          labels (:data:`ID2LABEL`), split files, :func:`load_pairs`, :func:`load_vitaminc`
:mod:`.augmentation`  :func:`augment`, :func:`slot_swap_augment`, :func:`training_rows`
:mod:`.train`         :class:`TrainConfig`, :func:`build_model`, :func:`train_model`,
                      :func:`check_device`, :func:`predict_logits`
:mod:`.evaluation`    :func:`evaluate`, :func:`minimal_edit_recall`, ONNX and stacker scoring
:mod:`.export`        :func:`export_onnx`, :func:`quantize_int8`
:mod:`.cli`           :func:`run` (the whole recipe) and :func:`main` (the command line)

The face :mod:`rrag_kernels.models.nli` does not import this package, so torch and
transformers stay optional; they are imported inside the functions that need them. The
command keeps its documented path: ``rrag_kernels/train_nli.py`` re-exports these names.
"""

from __future__ import annotations

from .augmentation import augment, slot_swap_augment, training_rows
from .cli import main, run
from .data import (
    ID2LABEL,
    LABEL2ID,
    STACK_FILES,
    TRAIN_FILES,
    VAL_FILES,
    VITAMINC_CREDIT,
    VITAMINC_TASK,
    load_pairs,
    load_vitaminc,
)
from .evaluation import MINIMAL_EDIT_CONTRADICTIONS, evaluate, minimal_edit_recall
from .export import TOKENIZER_FILES, export_onnx, quantize_int8
from .train import TrainConfig, build_model, check_device, default_base, predict_logits, train_model

__all__ = [
    "ID2LABEL",
    "LABEL2ID",
    "MINIMAL_EDIT_CONTRADICTIONS",
    "STACK_FILES",
    "TOKENIZER_FILES",
    "TRAIN_FILES",
    "TrainConfig",
    "VAL_FILES",
    "VITAMINC_CREDIT",
    "VITAMINC_TASK",
    "augment",
    "build_model",
    "check_device",
    "default_base",
    "evaluate",
    "export_onnx",
    "load_pairs",
    "load_vitaminc",
    "main",
    "minimal_edit_recall",
    "predict_logits",
    "quantize_int8",
    "run",
    "slot_swap_augment",
    "train_model",
    "training_rows",
]
