"""``python -m rrag_kernels.train_nli``: train the packaged NLI cross-encoder (the command).

The code lives in :mod:`rrag_kernels.models.nli.training`, one module per concern (data,
augmentation, train, evaluation, export, cli), whose docstring describes the recipe. This
module keeps the documented command and the names scripts import from it
(``from rrag_kernels.train_nli import evaluate``, ``train_nli.TrainConfig``). The names are
the training package's own objects, so patch a function in the module that defines it
(``rrag_kernels.models.nli.training.train.build_model``): :func:`run` looks names up there,
not here.
"""

from __future__ import annotations

from .models.nli.training import (
    ID2LABEL,
    LABEL2ID,
    MINIMAL_EDIT_CONTRADICTIONS,
    STACK_FILES,
    TOKENIZER_FILES,
    TRAIN_FILES,
    VAL_FILES,
    VITAMINC_CREDIT,
    VITAMINC_TASK,
    TrainConfig,
    augment,
    build_model,
    check_device,
    default_base,
    evaluate,
    export_onnx,
    load_pairs,
    load_vitaminc,
    main,
    minimal_edit_recall,
    predict_logits,
    quantize_int8,
    run,
    slot_swap_augment,
    train_model,
    training_rows,
)
# tools/nli_sweep.py records the package version through this module.
from .models.nli.training.cli import _package_version, logger  # noqa: F401

__all__ = [
    "ID2LABEL",
    "TrainConfig",
    "augment",
    "build_model",
    "slot_swap_augment",
    "check_device",
    "evaluate",
    "export_onnx",
    "load_pairs",
    "load_vitaminc",
    "main",
    "predict_logits",
    "quantize_int8",
    "train_model",
]

if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
