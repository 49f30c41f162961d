"""Adapters for the released conformal-factuality schemas.

Both released codebases (Mohri & Hashimoto 2024, tatsu-lab/conformal-factual-lm; Feng et al.
2025, n4feng/rag_conformal_pred) write ``{"data": [{"prompt", "original-output",
"claims": [{"subclaim", "annotation", "<method>-score", "noise"?, ...}]}]}``: one JSON
document (despite the ``.jsonl`` name). :func:`load_claims` turns such a file (or the
parsed dict) into flat arrays for the kernels.
"""

from __future__ import annotations

import hashlib
import json
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

__all__ = ["DEFAULT_SUPPORTED", "ClaimData", "hash_noise", "load_claims", "from_responses"]

#: Annotations that count as supported (exact string match: "Y " is unsupported).
DEFAULT_SUPPORTED = ("Y", "S")


@dataclass
class ClaimData:
    """Flat claims of n responses.

    Attributes
    ----------
    scores : (C,) float64 -- score + noise
    labels_ok : (C,) bool -- annotation in the supported set (all False when unannotated)
    offsets : (n + 1,) int64 -- response i owns claims offsets[i]:offsets[i + 1]
    texts : list of C str; prompts : list of n str
    annotations : list of C (str or None)
    score_name : str
    """

    scores: np.ndarray
    labels_ok: np.ndarray
    offsets: np.ndarray
    texts: list
    prompts: list
    annotations: list
    score_name: str

    @property
    def n(self) -> int:
        return int(self.offsets.shape[0] - 1)

    def claims_of(self, i: int) -> slice:
        return slice(int(self.offsets[i]), int(self.offsets[i + 1]))

    def subset(self, idx: Sequence[int]) -> "ClaimData":
        """The responses ``idx``, in that order."""
        parts = [np.arange(self.offsets[i], self.offsets[i + 1]) for i in idx]
        take = np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, dtype=np.int64)
        sizes = np.array([self.offsets[i + 1] - self.offsets[i] for i in idx], dtype=np.int64)
        return ClaimData(self.scores[take], self.labels_ok[take], np.r_[0, np.cumsum(sizes)].astype(np.int64),
                         [self.texts[c] for c in take], [self.prompts[i] for i in idx],
                         [self.annotations[c] for c in take], self.score_name)


def hash_noise(seed: int, query: str, index: int, text: str, scale: float = 0.001) -> float:
    """Deterministic N(0, scale) tie-break noise from a hash of (seed, query, claim index, text):
    the same claim gets the same noise whatever the order it is read in."""
    h = hashlib.blake2b(digest_size=16)
    for part in (str(int(seed)), query, str(int(index)), text):
        b = part.encode("utf-8", "surrogatepass")
        h.update(struct.pack("<Q", len(b)))
        h.update(b)
    u1, u2 = struct.unpack("<QQ", h.digest())
    # Box-Muller on two 53-bit uniforms in (0, 1].
    x1 = ((u1 >> 11) + 1) / 2.0**53
    x2 = (u2 >> 11) / 2.0**53
    return float(scale * np.sqrt(-2.0 * np.log(x1)) * np.cos(2.0 * np.pi * x2))


def from_responses(responses: Iterable[dict], *, score: str, noise: Any = "stored",
                   supported: Sequence[str] = DEFAULT_SUPPORTED, noise_seed: int = 0) -> ClaimData:
    """Flat arrays from the parsed ``data`` list.

    Parameters
    ----------
    score : the method name: claim[f"{score}-score"] is read (e.g. "frequency+gpt", "similarity")
    noise : "stored" (claim["noise"] when present, else 0), "hash" (:func:`hash_noise`), or
        None (no noise). The claim score is the float64 sum ``score + noise``.
    supported : annotations counted as supported (exact match)
    """
    if noise not in ("stored", "hash", None):
        raise ValueError(f"noise: expected 'stored', 'hash' or None, got {noise!r}")
    ok_set = frozenset(supported)
    key = f"{score}-score"
    scores, ok, texts, prompts, ann, sizes = [], [], [], [], [], []
    for r, resp in enumerate(responses):
        claims = resp.get("claims", [])
        prompt = resp.get("prompt", "")
        prompts.append(prompt)
        sizes.append(len(claims))
        for c, cl in enumerate(claims):
            if key not in cl:
                raise KeyError(f"score: claim {c} of response {r} has no {key!r} field")
            s = float(cl[key])
            if noise == "stored":
                s = s + float(cl.get("noise", 0.0))
            elif noise == "hash":
                s = s + hash_noise(noise_seed, prompt, c, cl.get("subclaim", ""))
            scores.append(s)
            a = cl.get("annotation")
            ann.append(a)
            ok.append(a in ok_set)
            texts.append(cl.get("subclaim", ""))
    return ClaimData(np.asarray(scores, dtype=np.float64), np.asarray(ok, dtype=bool),
                     np.r_[0, np.cumsum(sizes, dtype=np.int64)].astype(np.int64), texts, prompts, ann, score)


def load_claims(source: Any, *, score: str, noise: Any = "stored", supported: Sequence[str] = DEFAULT_SUPPORTED,
                noise_seed: int = 0) -> ClaimData:
    """Read a released ``*_subclaims_with_scores.jsonl`` (path or parsed dict) -> :class:`ClaimData`."""
    if isinstance(source, (str, Path)):
        with open(source, encoding="utf-8") as f:
            source = json.load(f)
    data = source["data"] if isinstance(source, dict) else source
    return from_responses(data, score=score, noise=noise, supported=supported, noise_seed=noise_seed)
