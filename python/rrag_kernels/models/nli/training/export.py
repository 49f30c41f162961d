"""ONNX export of the trained model and its weight-only int8 copy.

The exported graph takes ``input_ids``, ``attention_mask``, ``token_type_ids`` (int64,
dynamic batch and sequence axes) and returns ``logits`` (batch, 3); TorchScript exporter
(``dynamo=False``), opset 17. Export and quantization always run on the CPU.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np

#: The tokenizer files OnnxNLI reads beside model.onnx (copied into ``--out``).
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "tokenizer_config.json", "special_tokens_map.json")


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
