"""OnnxNLI: a sequence-pair classifier exported to ONNX, run with ONNX Runtime.

The model directory is what a Hugging Face NLI model exported to ONNX looks like::

    <dir>/config.json           id2label names the 3 outputs (never assumed)
    <dir>/model.onnx            or <dir>/onnx/model.onnx
    <dir>/tokenizer.json        (tokenizers library) -- or whatever AutoTokenizer loads

Nothing is downloaded: the tokenizer is read with the ``tokenizers`` library when
``tokenizer.json`` exists (no torch, fast start), else with ``transformers.AutoTokenizer``
and ``local_files_only=True``. onnxruntime and the tokenizer libraries are imported when a
model is loaded, never when :mod:`rrag_kernels.models.nli` is imported.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ...ops import check_int
from ._common import LABELS, check_pairs, empty_probs, label_permutation, length_buckets, softmax_rows

logger = logging.getLogger("rrag_kernels")

__all__ = ["OnnxNLI", "find_onnx_file"]

_MODEL_FILES = ("model.onnx", os.path.join("onnx", "model.onnx"))
_KNOWN_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def find_onnx_file(directory: str | os.PathLike, file_name: str | None = None) -> Path | None:
    """The ONNX graph of a model directory: ``file_name``, ``model.onnx`` or ``onnx/model.onnx``."""
    d = Path(directory)
    names = (file_name, os.path.join("onnx", file_name)) if file_name else _MODEL_FILES
    for name in names:
        if (d / name).is_file():
            return d / name
    return None


class _PairTokenizer:
    """Pair encoding without padding; truncation (longest_first) only on request.

    Backed by ``tokenizers.Tokenizer`` (from tokenizer.json) or a transformers tokenizer.
    """

    def __init__(self, directory: Path, max_length: int) -> None:
        self.max_length = max_length
        tok_json = directory / "tokenizer.json"
        self.kind = "tokenizers" if tok_json.is_file() else "transformers"
        if self.kind == "tokenizers":
            try:
                from tokenizers import Tokenizer
            except ImportError as exc:
                raise ImportError("OnnxNLI needs the tokenizers package: pip install 'rrag_kernels[nli]'") from exc
            self._full = Tokenizer.from_file(str(tok_json))
            self.pad_id = self._pad_from_files(directory)  # before padding is switched off
            self._full.no_truncation()
            self._full.no_padding()
            self._trunc = Tokenizer.from_file(str(tok_json))
            self._trunc.no_padding()
            self._trunc.enable_truncation(max_length, strategy="longest_first")
        else:
            try:
                from transformers import AutoTokenizer
            except ImportError as exc:
                raise ImportError(
                    f"path: {directory} has no tokenizer.json, and reading its tokenizer needs transformers: "
                    "pip install 'rrag_kernels[nli]'"
                ) from exc
            self._hf = AutoTokenizer.from_pretrained(str(directory), local_files_only=True)
            self.pad_id = self._hf.pad_token_id if self._hf.pad_token_id is not None else self._pad_from_files(directory)

    def _pad_from_files(self, directory: Path) -> int:
        """Pad id: config.json pad_token_id, else the tokenizer's pad token, else 0."""
        cfg = _read_json(directory / "config.json")
        if type(cfg.get("pad_token_id")) is int and cfg["pad_token_id"] >= 0:  # not a bool, not negative
            return int(cfg["pad_token_id"])
        full = getattr(self, "_full", None)
        if full is not None:
            padding = full.padding
            if padding and isinstance(padding.get("pad_id"), int):
                return int(padding["pad_id"])
            for name in ("[PAD]", "<pad>", "<PAD>"):
                tid = full.token_to_id(name)
                if tid is not None:
                    return int(tid)
        return 0

    def encode(self, premises: Sequence[str], hypotheses: Sequence[str], *, truncate: bool) -> list[tuple[list[int], list[int]]]:
        """(input ids, token type ids) of each pair, special tokens included."""
        if self.kind == "tokenizers":
            tok = self._trunc if truncate else self._full
            encs = tok.encode_batch(list(zip(premises, hypotheses)), add_special_tokens=True)
            return [(e.ids, e.type_ids) for e in encs]
        kwargs: dict[str, Any] = {"truncation": "longest_first", "max_length": self.max_length} if truncate else {"truncation": False}
        enc = self._hf(list(premises), list(hypotheses), add_special_tokens=True, padding=False,
                       return_attention_mask=False, verbose=False, **kwargs)
        ids = enc["input_ids"]
        types = enc.get("token_type_ids") or [[0] * len(x) for x in ids]
        return list(zip(ids, types))


def _read_json(path: Path) -> dict:
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise ValueError(f"path: cannot read {path}: {exc}") from exc
    return data if isinstance(data, dict) else {}


def _default_providers(ort: Any) -> list[str]:
    available = ort.get_available_providers()
    if "CUDAExecutionProvider" in available:
        return ["CUDAExecutionProvider", "CPUExecutionProvider"]
    return ["CPUExecutionProvider"]


def truncate_warning(cls: str, n_long: int, n: int, longest: int, max_length: int) -> None:
    logger.warning(
        "%s: %d of %d pairs are longer than max_length=%d tokens (longest %d) and were truncated "
        "(longest_first: tokens come off the longer text first)",
        cls, n_long, n, max_length, longest,
    )


class OnnxNLI:
    """NLI cross-encoder exported to ONNX, run with ONNX Runtime.

    Parameters
    ----------
    path : str or os.PathLike
        A local model directory with ``config.json``, ``model.onnx`` (or
        ``onnx/model.onnx``) and a tokenizer (``tokenizer.json``, or files
        ``transformers.AutoTokenizer`` reads offline).
    providers : list of str, optional
        ONNX Runtime execution providers. Default: ``["CUDAExecutionProvider",
        "CPUExecutionProvider"]`` when onnxruntime-gpu offers CUDA, else
        ``["CPUExecutionProvider"]``. The ones in use are in ``.providers``.
    batch_size : int >= 1
        Pairs per ONNX Runtime call. Pairs are sorted by token length and batched in that
        order (length buckets: little padding), then returned in input order.
    max_length : int >= 1
        Longest encoded pair (special tokens included). Longer pairs are truncated
        (longest_first) and a warning is logged once per call. Capped at the tokenizer's
        ``model_max_length`` from ``tokenizer_config.json`` when that is smaller.
    file_name : str, optional
        Another ONNX file in the directory (e.g. an int8 ``model_quantized.onnx``).
    session_options : onnxruntime.SessionOptions, optional

    Attributes
    ----------
    labels : ("entailment", "neutral", "contradiction")
        Column order of :meth:`predict_proba`; the model's own order comes from
        ``config.json`` ``id2label`` and is permuted into this one.
    id2label : dict
        The model's mapping, as read.
    providers : list of str
        The execution providers the session runs on.

    Raises
    ------
    FileNotFoundError
        ``path`` is not a directory, or holds no ONNX model.
    ValueError
        ``config.json`` lacks an ``id2label`` that names entailment / neutral /
        contradiction; the model does not output (batch, 3) logits; it needs an input
        other than input_ids / attention_mask / token_type_ids.
    ImportError
        onnxruntime or the tokenizer library is missing.
    """

    labels: tuple[str, str, str] = LABELS

    def __init__(
        self,
        path: str | os.PathLike,
        *,
        providers: Sequence[str] | None = None,
        batch_size: int = 32,
        max_length: int = 512,
        file_name: str | None = None,
        session_options: Any = None,
    ) -> None:
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"path: expected a directory path (str or os.PathLike), got {type(path).__name__}")
        self.batch_size = check_int(batch_size, "batch_size", minimum=1)
        max_length = check_int(max_length, "max_length", minimum=1)
        if providers is not None and (isinstance(providers, str) or not all(isinstance(p, str) for p in providers)):
            raise TypeError("providers: expected a list of execution provider names")
        directory = Path(path).expanduser()
        if directory.is_file() and directory.suffix == ".onnx":
            model_file = directory
            directory = directory.parent.parent if directory.parent.name == "onnx" else directory.parent
        else:
            if not directory.is_dir():
                raise FileNotFoundError(f"path: {str(path)!r} is not a directory")
            model_file = find_onnx_file(directory, file_name)
            if model_file is None:
                wanted = file_name or "model.onnx or onnx/model.onnx"
                raise FileNotFoundError(f"path: no {wanted} in {directory}")
        config = _read_json(directory / "config.json")
        if not config:
            raise ValueError(f"path: {directory} has no readable config.json (it must hold id2label)")
        self.id2label = dict(config.get("id2label") or {})
        self._perm = label_permutation(config.get("id2label"), source=str(directory / "config.json"))

        tok_cfg = _read_json(directory / "tokenizer_config.json")
        model_max = tok_cfg.get("model_max_length")
        if type(model_max) is int and 0 < model_max < max_length:  # a bool is not a length
            logger.debug("OnnxNLI: max_length %d capped at the tokenizer's model_max_length %d", max_length, model_max)
            max_length = model_max
        self.max_length = max_length

        try:
            import onnxruntime as ort
        except ImportError as exc:
            raise ImportError("OnnxNLI needs onnxruntime: pip install 'rrag_kernels[nli]'") from exc
        self._tok = _PairTokenizer(directory, max_length)
        if session_options is None:
            session_options = ort.SessionOptions()
            session_options.log_severity_level = 3  # errors only: no graph-optimiser chatter
        self._session = ort.InferenceSession(
            str(model_file), sess_options=session_options,
            providers=list(providers) if providers is not None else _default_providers(ort),
        )
        self.providers = list(self._session.get_providers())
        self.path = directory
        self.model_file = model_file

        self._inputs: dict[str, np.dtype] = {}
        for inp in self._session.get_inputs():
            if inp.name not in _KNOWN_INPUTS:
                raise ValueError(
                    f"path: {model_file.name} needs the input {inp.name!r}; OnnxNLI feeds only {_KNOWN_INPUTS}"
                )
            self._inputs[inp.name] = np.int32 if "int32" in inp.type else np.int64
        if "input_ids" not in self._inputs:
            raise ValueError(f"path: {model_file.name} has no input_ids input")
        outputs = self._session.get_outputs()
        names = [o.name for o in outputs]
        self._output = "logits" if "logits" in names else names[0]
        shape = next(o.shape for o in outputs if o.name == self._output)
        if len(shape) != 2 or (isinstance(shape[1], int) and shape[1] != 3):
            raise ValueError(f"path: {model_file.name} output {self._output!r} has shape {shape}; expected (batch, 3) logits")
        logger.info("OnnxNLI: loaded %s on %s (tokenizer: %s)", model_file, self.providers, self._tok.kind)

    def __repr__(self) -> str:
        return f"OnnxNLI({str(self.path)!r}, providers={self.providers}, max_length={self.max_length})"

    def predict_proba(self, premises: list[str], hypotheses: list[str]) -> np.ndarray:
        """NLI probabilities of each (premise, hypothesis) pair.

        Parameters
        ----------
        premises, hypotheses : list of str, same length n

        Returns
        -------
        ndarray, shape (n, 3), float32
            Softmax of the model's logits, columns in the order of ``labels``
            (entailment, neutral, contradiction); rows sum to 1. The result does not
            depend on ``batch_size`` beyond float32 rounding.
        """
        premises, hypotheses = check_pairs(premises, hypotheses)
        n = len(premises)
        if n == 0:
            return empty_probs()
        encoded = self._tok.encode(premises, hypotheses, truncate=False)
        lengths = np.fromiter((len(ids) for ids, _ in encoded), dtype=np.int64, count=n)
        long_rows = np.flatnonzero(lengths > self.max_length)
        if long_rows.size:
            truncate_warning("OnnxNLI", int(long_rows.size), n, int(lengths.max()), self.max_length)
            redo = self._tok.encode([premises[k] for k in long_rows], [hypotheses[k] for k in long_rows], truncate=True)
            for k, enc in zip(long_rows, redo):
                encoded[k] = enc
                lengths[k] = len(enc[0])
        out = np.empty((n, 3), dtype=np.float32)
        for rows in length_buckets(lengths, self.batch_size):
            logits = self._run([encoded[k] for k in rows], int(lengths[rows].max()))
            out[rows] = softmax_rows(logits)[:, self._perm]
        return out

    def _run(self, batch: list[tuple[list[int], list[int]]], width: int) -> np.ndarray:
        b = len(batch)
        ids = np.full((b, width), self._tok.pad_id, dtype=np.int64)
        types = np.zeros((b, width), dtype=np.int64)
        mask = np.zeros((b, width), dtype=np.int64)
        for r, (tok_ids, type_ids) in enumerate(batch):
            m = len(tok_ids)
            ids[r, :m] = tok_ids
            types[r, :m] = type_ids
            mask[r, :m] = 1
        arrays = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        feed = {name: arrays[name].astype(dtype, copy=False) for name, dtype in self._inputs.items()}
        logits = self._session.run([self._output], feed)[0]
        if logits.ndim != 2 or logits.shape != (b, 3):
            raise ValueError(f"logits: expected shape ({b}, 3) from the model, got {logits.shape}")
        return logits
