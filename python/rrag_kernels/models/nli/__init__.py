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
:class:`LLMJudgeNLI`
    An LLM asked for the label over any OpenAI-compatible chat endpoint (vLLM, llama.cpp,
    Ollama, OpenAI) through :class:`~rrag_kernels.models.OpenAIChatLLM`: probabilities from
    the answer token's log-probabilities (or the answer word), one cached request per pair,
    requests sent concurrently. ``load("llm:http://127.0.0.1:8080/v1")`` builds one.

The two model backends read the label order from the model's config (``id2label``), batch
pairs by token length, truncate over-long pairs with a logged warning, and return the
columns in the order above. Model libraries are imported only when a model is loaded.
Every scorer cleans its texts with :func:`rrag_kernels.models.clean_text` first (lone
surrogates -> U+FFFD, control characters -> space), so no tokenizer sees invalid text.

Use :func:`load` to get one by name: ``None`` (the default), a packaged name
(:func:`packaged_names`: ``"minilm-nli"``, ``"lexical"``, ``"ensemble"``), a local path or
a hub id ``"org/model"``, or ``"llm:<base_url>"`` for :class:`LLMJudgeNLI`; a bare name that
is none of these fails at once.
"""

from __future__ import annotations

import difflib
import os
import re
from pathlib import Path
from typing import Any

from ._common import LABELS, NLIScorer, checked_probs, label_permutation, logger
from .cross_encoder_nli import CrossEncoderNLI
from .ensemble import EnsembleNLI
from .lexical import LexicalNLI
from .llm_judge import LLMJudgeNLI
from .onnx_nli import OnnxNLI, find_onnx_file
from .stacked import STACKER_FILE, StackedNLI

__all__ = [
    "BUILTIN_NAMES",
    "LABELS",
    "CrossEncoderNLI",
    "EnsembleNLI",
    "LLMJudgeNLI",
    "LexicalNLI",
    "NLIScorer",
    "OnnxNLI",
    "PACKAGED_DIR",
    "StackedNLI",
    "checked_probs",
    "default_model_dir",
    "label_permutation",
    "load",
    "packaged_names",
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


#: The prefix of :func:`load`'s names for :class:`LLMJudgeNLI`: ``"llm:<base_url>"``.
_LLM_PREFIX = "llm:"

#: Names :func:`load` builds a scorer for in code (no model directory of their own).
BUILTIN_NAMES = ("lexical", "ensemble")

# A model-hub id as the Hugging Face hub spells them, "org/model" (ASCII letters, digits,
# "-", "_", "."): the only bare form that CrossEncoderNLI may look up on a hub.
_HUB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*")


def _packaged_model_names() -> list[str]:
    """The directories under ``packaged/``, in name order (hidden and ``_`` ones left out)."""
    if not PACKAGED_DIR.is_dir():
        return []
    return sorted(p.name for p in PACKAGED_DIR.iterdir() if p.is_dir() and not p.name.startswith(("_", ".")))


def packaged_names() -> tuple[str, ...]:
    """The names :func:`load` resolves offline, without touching a hub.

    Returns
    -------
    tuple of str
        Each directory under ``rrag_kernels/models/nli/packaged/`` (in name order; the
        packaged ONNX model is ``"minilm-nli"``), then :data:`BUILTIN_NAMES`
        (``"lexical"``, ``"ensemble"``).
    """
    return (*_packaged_model_names(), *BUILTIN_NAMES)


def _looks_like_path(name: str) -> bool:
    return name.startswith(("/", "./", "../", "~", ".\\", "..\\")) or os.path.isabs(name) or name in (".", "..")


def _default_scorer(**kwargs: Any) -> NLIScorer:
    """``load(None)``: the packaged ONNX model when it and onnxruntime are there, else LexicalNLI."""
    d = default_model_dir()
    if d is None:
        return LexicalNLI(**kwargs)
    try:
        import onnxruntime  # noqa: F401
        import tokenizers  # noqa: F401
    except ImportError:
        logger.warning(
            "rrag_kernels.models.nli.load: the packaged NLI model %s needs onnxruntime and tokenizers "
            "(pip install 'rrag_kernels[nli]'); using the model-free LexicalNLI instead", d.name,
        )
        return LexicalNLI(**kwargs)
    return _with_stacker(OnnxNLI(d, **kwargs), d)


def _with_stacker(model: NLIScorer, directory: Path) -> NLIScorer:
    """The model alone, or :class:`StackedNLI` when its directory has a ``stacker.json``."""
    stacker = directory / STACKER_FILE
    return StackedNLI.from_file(model, stacker) if stacker.is_file() else model


def _path_scorer(path: Path, **kwargs: Any) -> NLIScorer:
    """A model at an existing local path: OnnxNLI for a ``.onnx`` file or a directory holding
    an ONNX graph, CrossEncoderNLI for another directory."""
    if not path.is_dir():
        if path.suffix != ".onnx":
            raise ValueError(f"name: {str(path)!r} is a file but not an ONNX model (.onnx); give the model directory")
        return OnnxNLI(path, **kwargs)
    if find_onnx_file(path, kwargs.get("file_name")) is not None:
        return _with_stacker(OnnxNLI(path, **kwargs), path)
    return CrossEncoderNLI(path, **kwargs)


def _unknown_name(name: str) -> ValueError:
    names = packaged_names()
    close = difflib.get_close_matches(name.lower(), names, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return ValueError(
        f"name: unknown NLI model {name!r}{hint}; the packaged names are "
        f"{', '.join(repr(n) for n in names)} (or None for the default); a hub id looks like "
        f"'org/model', and a local path must exist"
    )


def load(name: str | os.PathLike | None = None, **kwargs: Any) -> NLIScorer:
    """Get an NLI scorer by name, offline by default.

    Parameters
    ----------
    name : str, os.PathLike or None
        Resolved in this order:

        * ``None``: the default -- the ONNX model shipped in
          ``rrag_kernels/models/nli/packaged/<name>/`` when present and onnxruntime is installed
          (:class:`OnnxNLI`), else :class:`LexicalNLI` (no model needed).
        * a packaged name (:func:`packaged_names`; case-insensitive, surrounding spaces
          ignored), never looked up on a hub:

          - ``"minilm-nli"`` (any directory under ``packaged/``): that packaged model
            (:class:`OnnxNLI`);
          - ``"lexical"``: :class:`LexicalNLI`;
          - ``"ensemble"``: :class:`EnsembleNLI` of the packaged model and LexicalNLI
            (equal weights; ``kwargs`` go to the model's :class:`OnnxNLI`);
            FileNotFoundError when the packaged model is absent.

          A local directory of the same name is read as a path when written as one
          (``"./lexical"``).
        * an existing local path: a ``.onnx`` file or a directory holding ``model.onnx`` or
          ``onnx/model.onnx`` -> :class:`OnnxNLI`; another directory ->
          :class:`CrossEncoderNLI`. An ``os.PathLike`` is always a path.
        * a hub id ``"org/model"`` (e.g. ``"cross-encoder/nli-deberta-v3-base"``) that is
          not an existing path -> :class:`CrossEncoderNLI`, from the local Hugging Face
          cache or the hub. When ``HF_HUB_OFFLINE`` is set or the hub cannot be reached,
          only the cache is read, and a model not in it fails at once with an OSError.
        * ``"llm:<base_url>"`` (the prefix in any case; e.g.
          ``"llm:http://127.0.0.1:8080/v1"``) -> :class:`LLMJudgeNLI` asking the
          OpenAI-compatible server there (``kwargs`` such as ``model``, ``api_key``,
          ``label_from``, ``max_concurrency`` go to it). Checked before the paths.
        * anything else (a bare name such as a typo ``"minlm-nli"``, or a path that does not
          exist) fails at once; nothing is downloaded.
    **kwargs
        Passed to the chosen class (e.g. ``batch_size``, ``max_length``, ``providers``,
        ``device``, ``local_files_only``; ``embedder`` for LexicalNLI; ``model``,
        ``label_from`` for LLMJudgeNLI).

    Returns
    -------
    NLIScorer
        ``.labels == ("entailment", "neutral", "contradiction")`` and
        ``.predict_proba(premises, hypotheses) -> (n, 3) float32``.

    Raises
    ------
    TypeError
        ``name`` is not a str, a path or None.
    ValueError
        ``name`` is empty, a bare name that is neither a packaged name nor an existing
        path (the message lists :func:`packaged_names`), a file other than ``.onnx``, or
        ``"llm:"`` without an ``http(s)://`` URL.
    FileNotFoundError
        ``name`` is an ``os.PathLike`` or written as a path (``/``, ``./``, ``../``, ``~``,
        or more than one ``/``) that does not exist.
    OSError
        A hub id that is neither in the local cache nor downloadable.
    """
    if name is None:
        return _default_scorer(**kwargs)
    if not isinstance(name, (str, os.PathLike)):
        raise TypeError(f"name: expected a model name, a path or None, got {type(name).__name__}")
    if isinstance(name, os.PathLike):
        path = Path(name).expanduser()
        if not path.exists():
            raise FileNotFoundError(f"name: no such model file or directory: {os.fspath(name)!r}")
        return _path_scorer(path, **kwargs)
    key = name.strip().lower()
    if not key:
        raise ValueError("name: empty model name")
    if key.startswith(_LLM_PREFIX):
        url = name.strip()[len(_LLM_PREFIX):].strip()
        if not url.lower().startswith(("http://", "https://")):
            raise ValueError(f"name: {name!r}: 'llm:' must be followed by an OpenAI-compatible server's base URL, "
                             f"e.g. 'llm:http://127.0.0.1:8080/v1'")
        return LLMJudgeNLI(url, **kwargs)
    if key == "lexical":
        return LexicalNLI(**kwargs)
    if key == "ensemble":
        from .ensemble import default_ensemble

        return default_ensemble(**kwargs)
    packaged = {n.lower(): n for n in _packaged_model_names()}
    if key in packaged:
        return _with_stacker(OnnxNLI(PACKAGED_DIR / packaged[key], **kwargs), PACKAGED_DIR / packaged[key])
    path = Path(name).expanduser()
    if path.exists():
        return _path_scorer(path, **kwargs)
    if _HUB_ID.fullmatch(name) and ".." not in name:
        return CrossEncoderNLI(name, **kwargs)
    if _looks_like_path(name):
        raise FileNotFoundError(f"name: no such model file or directory: {name!r}")
    if "/" in name or "\\" in name:
        raise FileNotFoundError(f"name: no such model file or directory: {name!r} (nor a hub id, which is 'org/model')")
    raise _unknown_name(name)
