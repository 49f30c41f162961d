"""NLI scorers: sentence pairs -> (n, 3) entailment / neutral / contradiction probabilities.

Every scorer follows the small :class:`NLIScorer` protocol::

    scorer.labels                                   # ("entailment", "neutral", "contradiction")
    scorer.predict_proba(premises, hypotheses)      # ndarray (n, 3) float32, rows sum to 1

Backends
--------
:class:`OnnxNLI`
    A cross-encoder exported to ONNX, run with ONNX Runtime (CUDA provider when
    onnxruntime-gpu is installed, else CPU). Needs ``onnxruntime`` and ``tokenizers``.
:class:`CrossEncoderNLI`
    A sentence-transformers ``CrossEncoder`` (torch), from a local directory or a hub
    name. Needs ``sentence-transformers``.
:class:`LexicalNLI`
    The model-free scorer for minimal-edit pairs (word alignment + cue words); needs only
    NumPy. Read its docstring for what it catches and what it misses.
:class:`EnsembleNLI`
    A weighted mean of other scorers; ``load("ensemble")`` is the packaged model and
    LexicalNLI with equal weights, better than either on the held-out split.

Both model backends read the label order from the model's config (``id2label``), batch
pairs by token length, truncate over-long pairs with a logged warning, and return the
columns in the order above. Model libraries are imported only when a model is loaded.

Use :func:`load` to get one by name.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ._common import LABELS, NLIScorer, label_permutation, logger
from .cross_encoder_nli import CrossEncoderNLI
from .ensemble import EnsembleNLI
from .lexical import LexicalNLI
from .onnx_nli import OnnxNLI, find_onnx_file

__all__ = [
    "LABELS",
    "CrossEncoderNLI",
    "EnsembleNLI",
    "LexicalNLI",
    "NLIScorer",
    "OnnxNLI",
    "PACKAGED_DIR",
    "default_model_dir",
    "label_permutation",
    "load",
]

#: Where packaged ONNX NLI models live: ``rrag_kernels/models/nli/packaged/<name>/model.onnx``
#: (shipped in the wheel as package data).
PACKAGED_DIR = Path(__file__).resolve().parent / "packaged"


def default_model_dir() -> Path | None:
    """The packaged ONNX NLI model :func:`load` uses by default, or None.

    The first directory (in name order) under ``rrag_kernels/models/nli/packaged/`` that holds a
    ``model.onnx`` (or ``onnx/model.onnx``) and a ``config.json``.
    """
    if not PACKAGED_DIR.is_dir():
        return None
    for d in sorted(p for p in PACKAGED_DIR.iterdir() if p.is_dir()):
        if (d / "config.json").is_file() and find_onnx_file(d) is not None:
            return d
    return None


def _looks_like_path(name: str) -> bool:
    return name.startswith(("/", "./", "../", "~", ".\\", "..\\")) or os.path.isabs(name) or name in (".", "..")


def load(name_or_path: str | os.PathLike | None = None, **kwargs: Any) -> NLIScorer:
    """Get an NLI scorer by name, offline by default.

    Parameters
    ----------
    name_or_path : str, os.PathLike or None
        * ``None``: the default -- the ONNX model shipped in
          ``rrag_kernels/models/nli/packaged/<name>/`` when present and onnxruntime is installed
          (:class:`OnnxNLI`), else :class:`LexicalNLI` (no model needed).
        * ``"lexical"``: :class:`LexicalNLI`.
        * ``"ensemble"``: :class:`EnsembleNLI` of the packaged model and LexicalNLI (equal
          weights; ``kwargs`` go to the model's :class:`OnnxNLI`); FileNotFoundError when the
          packaged model is absent.
        * a local directory holding ``model.onnx`` or ``onnx/model.onnx`` (or a ``.onnx``
          file): :class:`OnnxNLI`.
        * another local directory, or a hub-style name such as
          ``"cross-encoder/nli-deberta-v3-base"``: :class:`CrossEncoderNLI` (a hub name
          fails with an OSError when the model is neither cached nor downloadable).
    **kwargs
        Passed to the chosen class (e.g. ``batch_size``, ``max_length``, ``providers``,
        ``device``; ``embedder`` for LexicalNLI).

    Returns
    -------
    NLIScorer
        ``.labels == ("entailment", "neutral", "contradiction")`` and
        ``.predict_proba(premises, hypotheses) -> (n, 3) float32``.

    Raises
    ------
    TypeError
        ``name_or_path`` is not a str, a path or None.
    FileNotFoundError
        ``name_or_path`` is written as a path (absolute, ``./``, ``../``, ``~``) that does
        not exist.
    """
    if name_or_path is None:
        d = default_model_dir()
        if d is not None:
            try:
                import onnxruntime  # noqa: F401
                import tokenizers  # noqa: F401
            except ImportError:
                logger.warning(
                    "rrag_kernels.models.nli.load: the packaged NLI model %s needs onnxruntime and tokenizers "
                    "(pip install 'rrag_kernels[nli]'); using the model-free LexicalNLI instead", d.name,
                )
                return LexicalNLI(**kwargs)
            return OnnxNLI(d, **kwargs)
        return LexicalNLI(**kwargs)
    if not isinstance(name_or_path, (str, os.PathLike)):
        raise TypeError(f"name_or_path: expected a model name, a directory or None, got {type(name_or_path).__name__}")
    name = os.fspath(name_or_path)
    if not name.strip():
        raise ValueError("name_or_path: empty model name")
    if name.strip().lower() == "lexical":
        return LexicalNLI(**kwargs)
    if name.strip().lower() == "ensemble":
        from .ensemble import default_ensemble

        return default_ensemble(**kwargs)
    path = Path(name).expanduser()
    if path.is_file() and path.suffix == ".onnx":
        return OnnxNLI(path, **kwargs)
    if path.is_dir():
        if find_onnx_file(path, kwargs.get("file_name")) is not None:
            return OnnxNLI(path, **kwargs)
        return CrossEncoderNLI(path, **kwargs)
    if isinstance(name_or_path, os.PathLike) or _looks_like_path(name):
        raise FileNotFoundError(f"name_or_path: no such model directory: {name!r}")
    return CrossEncoderNLI(name, **kwargs)
