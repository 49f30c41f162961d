"""CrossEncoderNLI: a sentence-transformers ``CrossEncoder`` (torch) behind the NLI protocol."""

from __future__ import annotations

import logging
import os
import socket
import threading
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import numpy as np

from ...ops import check_int
from ._common import LABELS, check_pairs, empty_probs, label_permutation, length_buckets, softmax_rows
from .onnx_nli import _read_json, truncate_warning

logger = logging.getLogger("rrag_kernels")

__all__ = ["HUB_PROBE_TIMEOUT_S", "CrossEncoderNLI"]


def _offline() -> bool:
    return any(os.environ.get(v, "").strip().lower() in ("1", "true", "yes", "on") for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


#: Seconds the hub probe waits for a TCP connection (DNS lookup included).
HUB_PROBE_TIMEOUT_S = 3.0
_PROXY_VARS = ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy", "HTTP_PROXY", "http_proxy")


def _hub_unreachable(timeout: float = HUB_PROBE_TIMEOUT_S) -> str | None:
    """Why the model hub cannot be reached, or None when it can (or when it cannot be told).

    One TCP connection to the hub endpoint (``HF_ENDPOINT``, default huggingface.co:443),
    run on a daemon thread so that a slow DNS lookup is bounded by ``timeout`` too. Without
    it, the hub client retries a failing connection with backoff for about a minute before
    it gives up. Behind a proxy the direct connection says nothing, so it is not tried.
    """
    if any(os.environ.get(v) for v in _PROXY_VARS):
        return None
    endpoint = urlsplit(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    host = endpoint.hostname
    if not host:
        return None
    try:
        port = endpoint.port or (80 if endpoint.scheme == "http" else 443)
    except ValueError:
        return None
    outcome: list[str | None] = []

    def probe() -> None:
        try:
            socket.create_connection((host, port), timeout=timeout).close()
            outcome.append(None)
        except OSError as exc:
            outcome.append(f"{type(exc).__name__}: {exc}")

    worker = threading.Thread(target=probe, name="rrag-hub-probe", daemon=True)
    worker.start()
    worker.join(timeout)
    if not outcome:
        return f"no connection to {host}:{port} within {timeout:g} s"
    return None if outcome[0] is None else f"cannot connect to {host}:{port} ({outcome[0]})"


class CrossEncoderNLI:
    """NLI with a sentence-transformers ``CrossEncoder`` (a torch sequence-pair classifier).

    Parameters
    ----------
    name_or_path : str or os.PathLike
        A local model directory (config.json + weights + tokenizer), or a hub name such as
        ``"cross-encoder/nli-deberta-v3-base"``; a hub name needs the model in the local
        Hugging Face cache or a reachable hub.
    device : str, optional
        torch device ("cpu", "cuda", ...); default: sentence-transformers' choice (CUDA when
        available).
    batch_size : int >= 1
        Pairs per forward pass; pairs are sorted by token length and batched in that order.
    max_length : int >= 1
        Longest encoded pair (special tokens included); longer pairs are truncated
        (longest_first) with a warning logged once per call. For a local directory, capped
        at ``model_max_length`` from its ``tokenizer_config.json`` when that is smaller.
    local_files_only : bool, optional
        Never contact the hub. Default: True for a local directory, when
        ``HF_HUB_OFFLINE`` / ``TRANSFORMERS_OFFLINE`` is set, or when a TCP connection to
        the hub (``HF_ENDPOINT``) fails within :data:`HUB_PROBE_TIMEOUT_S` seconds (not
        tried behind a proxy); else False. So a hub name that is not in the cache fails
        in seconds rather than after a minute of the hub client's retries.
    **kwargs
        Passed to ``sentence_transformers.CrossEncoder``.

    Attributes
    ----------
    labels : ("entailment", "neutral", "contradiction")
        Column order of :meth:`predict_proba`, permuted from ``model.config.id2label``.
    id2label : dict
        The model's own mapping.

    Raises
    ------
    OSError
        The model cannot be loaded (not a local directory, and not in the cache or the hub
        is unreachable).
    ValueError
        The model's ``id2label`` does not name entailment / neutral / contradiction.
    ImportError
        sentence-transformers is not installed.
    """

    labels: tuple[str, str, str] = LABELS

    def __init__(
        self,
        name_or_path: str | os.PathLike,
        *,
        device: str | None = None,
        batch_size: int = 32,
        max_length: int = 512,
        local_files_only: bool | None = None,
        **kwargs: Any,
    ) -> None:
        if not isinstance(name_or_path, (str, os.PathLike)):
            raise TypeError(f"name_or_path: expected a model name or directory, got {type(name_or_path).__name__}")
        self.batch_size = check_int(batch_size, "batch_size", minimum=1)
        self.max_length = check_int(max_length, "max_length", minimum=1)
        name = os.fspath(name_or_path)
        is_dir = Path(name).expanduser().is_dir()
        if is_dir:
            # The same cap as OnnxNLI: never more tokens than the tokenizer was made for.
            tok_cfg = _read_json(Path(name).expanduser() / "tokenizer_config.json")
            model_max = tok_cfg.get("model_max_length")
            if isinstance(model_max, int) and 0 < model_max < self.max_length:
                logger.debug("CrossEncoderNLI: max_length %d capped at model_max_length %d", self.max_length, model_max)
                self.max_length = model_max
        try:
            import torch
            from sentence_transformers import CrossEncoder
        except ImportError as exc:
            raise ImportError(
                "CrossEncoderNLI needs sentence-transformers (and torch): pip install 'rrag_kernels[nli-torch]'"
            ) from exc
        self._torch = torch
        unreachable = None
        if local_files_only is None:
            local_files_only = is_dir or _offline()
            if not local_files_only:
                unreachable = _hub_unreachable()
                if unreachable is not None:
                    logger.warning("CrossEncoderNLI: the model hub is unreachable (%s); reading %r from the "
                                   "local Hugging Face cache only", unreachable, name)
                    local_files_only = True
        try:
            model = CrossEncoder(
                str(Path(name).expanduser()) if is_dir else name,
                device=device,
                max_length=self.max_length,
                local_files_only=bool(local_files_only),
                **kwargs,
            )
        except Exception as exc:  # OSError, ValueError, HTTP errors: all mean "cannot load"
            if is_dir:
                where = "the local directory"
            elif unreachable is not None:
                where = f"the local Hugging Face cache (the model hub is unreachable: {unreachable})"
            elif local_files_only:
                where = "the local Hugging Face cache (offline)"
            else:
                where = "the local cache or the model hub"
            raise OSError(
                f"name_or_path: cannot load the CrossEncoder {name!r} from {where}: {type(exc).__name__}: {exc}"
            ) from exc
        model.max_seq_length = self.max_length
        config = model.config
        self.id2label = dict(getattr(config, "id2label", None) or {})
        self._perm = label_permutation(getattr(config, "id2label", None), source=f"{name} config")
        self._model = model
        self.name_or_path = name
        self.device = str(model.device)
        logger.info("CrossEncoderNLI: loaded %s on %s", name, self.device)

    def __repr__(self) -> str:
        return f"CrossEncoderNLI({self.name_or_path!r}, device={self.device!r}, max_length={self.max_length})"

    def _lengths(self, premises: list[str], hypotheses: list[str]) -> np.ndarray:
        enc = self._model.tokenizer(
            premises, hypotheses, add_special_tokens=True, truncation=False, padding=False,
            return_attention_mask=False, return_token_type_ids=False, verbose=False,
        )
        return np.fromiter((len(x) for x in enc["input_ids"]), dtype=np.int64, count=len(premises))

    def predict_proba(self, premises: list[str], hypotheses: list[str]) -> np.ndarray:
        """NLI probabilities of each (premise, hypothesis) pair.

        Parameters
        ----------
        premises, hypotheses : list of str, same length n

        Returns
        -------
        ndarray, shape (n, 3), float32
            Softmax of the model's logits, columns in the order of ``labels``; rows sum
            to 1.
        """
        premises, hypotheses = check_pairs(premises, hypotheses)
        n = len(premises)
        if n == 0:
            return empty_probs()
        lengths = self._lengths(premises, hypotheses)
        n_long = int((lengths > self.max_length).sum())
        if n_long:
            truncate_warning("CrossEncoderNLI", n_long, n, int(lengths.max()), self.max_length)
        identity = self._torch.nn.Identity()
        out = np.empty((n, 3), dtype=np.float32)
        for rows in length_buckets(lengths, self.batch_size):
            logits = self._model.predict(
                [(premises[k], hypotheses[k]) for k in rows],
                batch_size=len(rows), activation_fn=identity, apply_softmax=False,
                convert_to_numpy=True, show_progress_bar=False,
            )
            logits = np.asarray(logits).reshape(len(rows), -1)
            if logits.shape[1] != 3:
                raise ValueError(f"logits: expected 3 outputs per pair from {self.name_or_path!r}, got {logits.shape[1]}")
            out[rows] = softmax_rows(logits)[:, self._perm]
        return out
