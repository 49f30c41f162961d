"""ClaimConformal: a model-free split-conformal claim filter (MAPIE / TorchCP shaped)."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from ...ops import as_claims, check_level_a, check_no_nan, check_real, check_sentinel, conformal_quantile, r_scores

__all__ = ["ClaimConformal", "FORMAT_VERSION"]

FORMAT_VERSION = 1


def _hash(scores: np.ndarray, labels_ok: np.ndarray, offsets: np.ndarray, groups: Any) -> str:
    h = hashlib.sha256()
    for arr in (scores.astype("<f8"), labels_ok.astype(np.uint8), offsets.astype("<i8")):
        h.update(np.ascontiguousarray(arr).tobytes())
    if groups is not None:
        h.update(json.dumps([str(g) for g in groups]).encode())
    return "sha256:" + h.hexdigest()


def _fmt(x: float) -> Any:
    """JSON has no inf: write it as a string, read back exactly."""
    return x if math.isfinite(x) else ("inf" if x > 0 else "-inf")


def _unfmt(x: Any) -> float:
    return float(x)


class ClaimConformal:
    """Calibrate a claim-score threshold so that a response's kept claims are all supported
    (for ``a = 1``; a supported fraction >= a in general) with probability >= 1 - alpha.

    Parameters
    ----------
    alpha : float in (0, 1)
    a : float in (0, 1]
    sentinel : float -- r-score of a response with no failing threshold (-inf; -100000 and
        -1 reproduce Mohri et al. and Feng et al.)
    on_too_few : {"inf", "raise"} -- when k = ceil((n+1)(1-alpha)) > n
    score_name : str -- recorded in the saved JSON
    backend : passed to the kernels

    Attributes (after ``calibrate``)
    --------------------------------
    q_hat : float, or dict {group: float} when calibrated with groups
    n : int (or dict of int per group)
    """

    def __init__(self, alpha: float = 0.1, a: float = 1.0, sentinel: float = -np.inf, *, on_too_few: str = "inf",
                 score_name: str = "score", backend: str | None = None) -> None:
        alpha = check_real(alpha, "alpha")
        if not (0.0 < alpha < 1.0):
            raise ValueError(f"alpha: must be in (0, 1), got {alpha}")
        self.alpha = alpha
        self.a = check_level_a(a)
        self.sentinel = check_sentinel(sentinel)
        self.on_too_few = on_too_few
        self.score_name = score_name
        self.backend = backend
        self.q_hat: Any = None
        self.n: Any = None
        self.data_hash: str | None = None

    # ------------------------------------------------------------------ fitting
    def calibrate(self, scores: Any, labels: Any, offsets: Any, groups: Any = None) -> "ClaimConformal":
        """Compute q_hat from labelled calibration responses (labels: (C,) bool, True = supported)."""
        s, ok, off = as_claims(scores, labels, offsets)
        n = off.shape[0] - 1
        if n == 0:
            raise ValueError("offsets: empty calibration set (no responses)")
        r = r_scores(s, ok, off, a=self.a, sentinel=self.sentinel, backend=self.backend)
        if groups is None:
            self.q_hat = conformal_quantile(r, self.alpha, on_too_few=self.on_too_few, backend=self.backend)
            self.n = n
        else:
            g = list(groups)
            if len(g) != n:
                raise ValueError(f"groups: expected {n} labels (one per response), got {len(g)}")
            self.q_hat, self.n = {}, {}
            for label in sorted(set(g), key=str):
                rg = r[np.array([x == label for x in g])]
                self.q_hat[label] = conformal_quantile(rg, self.alpha, on_too_few=self.on_too_few, backend=self.backend)
                self.n[label] = int(rg.shape[0])
        self.data_hash = _hash(s, ok, off, groups)
        return self

    def _thresholds(self, n: int, groups: Any) -> np.ndarray:
        if self.q_hat is None:
            raise RuntimeError("ClaimConformal: call calibrate() (or load()) first")
        if isinstance(self.q_hat, dict):
            if groups is None:
                raise ValueError("groups: this calibrator is group-conditional; pass one group per response")
            g = list(groups)
            if len(g) != n:
                raise ValueError(f"groups: expected {n} labels (one per response), got {len(g)}")
            missing = [x for x in g if x not in self.q_hat]
            if missing:
                raise ValueError(f"groups: no threshold for group {missing[0]!r}")
            return np.array([self.q_hat[x] for x in g], dtype=np.float64)
        return np.full(n, float(self.q_hat))

    # ------------------------------------------------------------------ using
    def filter(self, scores: Any, offsets: Any, groups: Any = None) -> np.ndarray:
        """(C,) bool keep mask: claim kept iff its score >= its response's q_hat."""
        s, _, off = as_claims(scores, np.zeros(len(scores), dtype=bool), offsets)
        check_no_nan(s, "scores")
        q = self._thresholds(off.shape[0] - 1, groups)
        return s >= np.repeat(q, np.diff(off))

    def evaluate(self, scores: Any, labels: Any, offsets: Any, groups: Any = None) -> dict[str, float]:
        """Metrics on labelled test responses: fully_supported, retention, non_empty,
        supported_given_non_empty (definitions as in ``conformal_sweep``), n."""
        s, ok, off = as_claims(scores, labels, offsets)
        keep = self.filter(s, off, groups)
        n = off.shape[0] - 1
        if n == 0:
            raise ValueError("offsets: no responses to evaluate")
        p = np.diff(off)
        resp = np.repeat(np.arange(n), p)
        kept = np.bincount(resp[keep], minlength=n)
        bad = np.bincount(resp[keep & ~ok], minlength=n)
        fs, ne = bad == 0, kept > 0
        frac = np.where(p > 0, kept / np.maximum(p, 1), 1.0)
        return {
            "fully_supported": float(fs.mean()),
            "retention": float(frac.mean()),
            "non_empty": float(ne.mean()),
            "supported_given_non_empty": float((fs & ne).sum() / ne.sum()) if ne.any() else float("nan"),
            "n": int(n),
        }

    # ------------------------------------------------------------------ persistence
    def to_dict(self) -> dict:
        from ... import __version__

        if self.q_hat is None:
            raise RuntimeError("ClaimConformal: nothing to save; call calibrate() first")
        grouped = isinstance(self.q_hat, dict)
        return {
            "format": "rrag_kernels.ClaimConformal",
            "format_version": FORMAT_VERSION,
            "package_version": __version__,
            "alpha": self.alpha,
            "a": self.a,
            "sentinel": _fmt(self.sentinel),
            "on_too_few": self.on_too_few,
            "score_name": self.score_name,
            "grouped": grouped,
            "q_hat": {str(k): _fmt(v) for k, v in self.q_hat.items()} if grouped else _fmt(self.q_hat),
            "n": {str(k): v for k, v in self.n.items()} if grouped else self.n,
            "calibration_hash": self.data_hash,
        }

    def save(self, path: str | Path) -> None:
        """Write the calibration as versioned JSON (floats round-trip exactly)."""
        Path(path).write_text(json.dumps(self.to_dict(), indent=2) + "\n", encoding="utf-8")

    @classmethod
    def from_dict(cls, d: dict) -> "ClaimConformal":
        if d.get("format") != "rrag_kernels.ClaimConformal":
            raise ValueError("path: not a ClaimConformal file (format field missing or different)")
        if d.get("format_version") != FORMAT_VERSION:
            raise ValueError(f"path: unsupported format_version {d.get('format_version')} (this reads {FORMAT_VERSION})")
        obj = cls(d["alpha"], d["a"], _unfmt(d["sentinel"]), on_too_few=d["on_too_few"], score_name=d["score_name"])
        if d["grouped"]:
            obj.q_hat = {k: _unfmt(v) for k, v in d["q_hat"].items()}
            obj.n = dict(d["n"])
        else:
            obj.q_hat = _unfmt(d["q_hat"])
            obj.n = d["n"]
        obj.data_hash = d.get("calibration_hash")
        return obj

    @classmethod
    def load(cls, path: str | Path) -> "ClaimConformal":
        """Read a file written by :meth:`save` (group labels come back as str)."""
        return cls.from_dict(json.loads(Path(path).read_text(encoding="utf-8")))

    def __repr__(self) -> str:
        return f"ClaimConformal(alpha={self.alpha}, a={self.a}, q_hat={self.q_hat!r}, n={self.n!r})"
