"""ClaimConformal: a model-free split-conformal claim filter (MAPIE / TorchCP shaped).

The saved file
--------------
:meth:`ClaimConformal.save` writes one JSON object, format ``"rrag_kernels.ClaimConformal"``,
:data:`FORMAT_VERSION` 1, with exactly the fields of :data:`FIELDS`.
:meth:`ClaimConformal.load` (and :meth:`~ClaimConformal.from_dict`) check every field and
answer any malformed file with a ValueError whose message starts with the field's name
(``"q_hat: must not be NaN (in cal.json)"``) or, when the file itself is unreadable as JSON,
with ``path:``:

==================  ============================================================================
field               rule
==================  ============================================================================
format              the string ``"rrag_kernels.ClaimConformal"``
format_version      an int in 1 .. :data:`FORMAT_VERSION`; a larger one is a file from a newer
                    rrag_kernels (the message says to upgrade)
package_version     a string (the version that wrote the file; informative)
alpha               a number in (0, 1)
a                   a number in (0, 1] (``check_level_a``)
sentinel            a number, or the string ``"inf"`` / ``"-inf"``; not NaN (``check_sentinel``)
on_too_few          ``"inf"`` or ``"raise"``
score_name          a string of at most :data:`SCORE_NAME_MAX` (200) characters
grouped             true or false
q_hat               grouped: a non-empty object {group: threshold}; else one threshold. A
                    threshold is a number or ``"inf"`` / ``"-inf"`` (JSON has no infinity);
                    never NaN (a NaN threshold would silently keep no claim)
n                   grouped: an object with exactly the groups of ``q_hat``; else one count.
                    A count is an int in 1 .. 2**63 - 1 (a float such as 30.0 is refused)
calibration_hash    ``"sha256:"`` followed by 64 lower-case hex digits: the hash of the
                    calibration *data* (scores, labels, offsets, groups), which
                    :meth:`~ClaimConformal.evaluate` checks a ``data=`` argument against
==================  ============================================================================

The file is no integrity check: ``calibration_hash`` seals the data, not the other fields,
so an edited ``q_hat`` that passes the rules above loads as written (and so would a file
whose hash was recomputed). Keep calibration files where their writer is trusted (a
read-only deployment artefact, a signed release); what the loader guarantees is that a
file it accepts is well-formed, never that it is the one you wrote.

Numbers are JSON numbers: a string where a number belongs ("0.1"), a boolean, or an
integer beyond the float range is refused. A missing field and a field of this list that
appears twice in the object are refused; so is any field not in the list: a version-1
file has exactly these fields (newer formats carry a newer ``format_version``), so an
unknown one is a typo or a hand edit that would otherwise be silently dropped.
"""

from __future__ import annotations

import hashlib
import json
import math
import numbers
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ...ops import (
    as_claims,
    check_bool,
    check_choice,
    check_int,
    check_level_a,
    check_no_nan,
    check_real,
    check_sentinel,
    conformal_quantile,
    conformal_sweep,
    r_scores,
)
from .._records import DuplicateKeyError, JSONLimitError, loads_one_value_per_key

__all__ = ["ClaimConformal", "FIELDS", "FORMAT", "FORMAT_VERSION"]

#: The ``format`` field of a saved calibration.
FORMAT = "rrag_kernels.ClaimConformal"
#: The newest file format this version reads and the one it writes.
FORMAT_VERSION = 1
#: The longest ``score_name`` (it names a column and is quoted in error messages and records).
SCORE_NAME_MAX = 200
#: Every field of a format-version-1 file, in the order :meth:`ClaimConformal.to_dict` writes them.
FIELDS = ("format", "format_version", "package_version", "alpha", "a", "sentinel", "on_too_few", "score_name",
          "grouped", "q_hat", "n", "calibration_hash")
ON_TOO_FEW = ("inf", "raise")

# How _fmt writes the infinities JSON cannot hold.
_INFINITIES = {"inf": math.inf, "-inf": -math.inf}
_HASH = re.compile(r"sha256:[0-9a-f]{64}")
_COUNT_MAX = int(np.iinfo(np.int64).max)


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


def _shown(value: Any) -> str:
    """A value for a message, cut short (a file may hold a number with thousands of digits)."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _read(rule: Any, value: Any, name: str, **kwargs: Any) -> Any:
    """A shared argument rule applied to a value read from a file.

    In a file a wrong kind is a wrong value: the rule's TypeError becomes a ValueError with
    the same message (which starts with ``name``).
    """
    try:
        return rule(value, name, **kwargs)
    except TypeError as exc:
        raise ValueError(str(exc)) from None


def _read_threshold(value: Any, name: str) -> float:
    """A q_hat or sentinel: a JSON number or the string "inf" / "-inf" (as _fmt writes); never NaN."""
    if isinstance(value, str) and value in _INFINITIES:
        return _INFINITIES[value]
    x = _read(check_real, value, name)
    if math.isnan(x):
        raise ValueError(f"{name}: must not be NaN")
    return x


def _read_str(value: Any, name: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{name}: expected a string, got {type(value).__name__}")
    return value


def _read_groups(d: dict) -> tuple[dict[str, float], dict[str, int]]:
    """The per-group q_hat and n of a grouped file: objects with the same, non-empty keys."""
    q_hat, n = d["q_hat"], d["n"]
    for name, value in (("q_hat", q_hat), ("n", n)):
        if not isinstance(value, dict):
            raise ValueError(f"{name}: expected an object {{group: value}} (grouped is true), "
                             f"got {type(value).__name__}")
    if not q_hat:
        raise ValueError("q_hat: a grouped calibration has at least one group, got {}")
    if set(n) != set(q_hat):
        odd = sorted(set(n) ^ set(q_hat))[0]
        raise ValueError(f"n: the groups must be those of q_hat, but group {odd!r} is in only one of them")
    return ({g: _read_threshold(v, f"q_hat[{g!r}]") for g, v in q_hat.items()},
            {g: _read(check_int, n[g], f"n[{g!r}]", minimum=1, maximum=_COUNT_MAX) for g in q_hat})


def _groups_shown(q_hat: dict) -> str:
    """A grouped calibration's groups for a message (the first few)."""
    names = [str(g) for g in list(q_hat)[:8]]
    return ", ".join(names) + (", ..." if len(q_hat) > 8 else "")


def _score_array(x: Any, name: str) -> np.ndarray | Exception:
    """One response's scores as a (P,) float64 array, or the error (not raised) naming ``name``.

    The rule is :meth:`ClaimConformal.filter`'s for its ``scores``: numbers (float or int
    dtype), no bool, str or object; an empty sequence is zero claims. NaN is checked later,
    over all responses at once.
    """
    if isinstance(x, np.ndarray):
        arr = x
    elif isinstance(x, (str, bytes, bytearray)) or not isinstance(x, Sequence):
        return TypeError(f"{name}: expected a sequence of scores (numbers), got {type(x).__name__}")
    else:
        try:
            arr = np.asarray(x)
        except Exception as exc:  # ragged nesting, an item numpy cannot take
            return ValueError(f"{name}: expected a flat sequence of scores ({exc})")
        if arr.size == 0:
            return np.zeros(0, dtype=np.float64)
    if arr.ndim != 1:
        return ValueError(f"{name}: expected a flat sequence of scores, got a {arr.ndim}-d array")
    if arr.dtype.kind in "fiu":
        return arr.astype(np.float64, copy=False)
    for c, v in enumerate(arr.tolist() if x is arr else x):  # the items as given: numpy makes [0.1, "x"] all str
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Real):
            return TypeError(f"{name}: claim {c} has score {_shown(v)}, not a number")
    return TypeError(f"{name}: expected float or int scores, got dtype {arr.dtype}")


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

    ``calibrate`` also keeps a copy of its data in memory (never in the saved file), so that
    :meth:`sweep` and :meth:`plot_tradeoff` can draw the trade-off without it being passed
    again; a loaded calibrator takes the data as ``data=`` (checked against its hash).
    """

    def __init__(self, alpha: float = 0.1, a: float = 1.0, sentinel: float = -np.inf, *, on_too_few: str = "inf",
                 score_name: str = "score", backend: str | None = None) -> None:
        alpha = check_real(alpha, "alpha")
        if not (0.0 < alpha < 1.0):
            raise ValueError(f"alpha: must be in (0, 1), got {alpha}")
        check_choice(on_too_few, "on_too_few", ON_TOO_FEW)
        if not isinstance(score_name, str):
            raise TypeError(f"score_name: expected a string, got {type(score_name).__name__}")
        if len(score_name) > SCORE_NAME_MAX:  # it is echoed in messages and records: keep them small
            raise ValueError(f"score_name: at most {SCORE_NAME_MAX} characters, got {len(score_name)}")
        self.alpha = alpha
        self.a = check_level_a(a)
        self.sentinel = check_sentinel(sentinel)
        self.on_too_few = on_too_few
        self.score_name = score_name
        self.backend = backend
        self.q_hat: Any = None
        self.n: Any = None
        self.data_hash: str | None = None
        self._data: tuple[np.ndarray, np.ndarray, np.ndarray, Any] | None = None  # what calibrate() saw

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
        self._data = (s.copy(), ok.copy(), off.copy(), None if groups is None else list(groups))
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

    def q_hat_for(self, group: Any = None) -> float:
        """The threshold a response of ``group`` is filtered with (its record's ``q_hat``).

        Parameters
        ----------
        group : hashable, optional
            The response's group; required, and one of ``q_hat``'s keys, when the calibration
            is grouped; ignored otherwise.

        Returns
        -------
        float
            ``q_hat`` (ungrouped) or ``q_hat[group]``; may be ``inf`` (keeps no claim).

        Raises
        ------
        ValueError
            Not calibrated; grouped and ``group`` is None or not a group of the calibration.
        TypeError
            Grouped and ``group`` is unhashable.
        """
        if self.q_hat is None:
            raise ValueError("ClaimConformal: not calibrated; call calibrate() (or load()) first")
        if not isinstance(self.q_hat, dict):
            return float(self.q_hat)
        problem = self._group_problem(group, "group")
        if problem is not None:
            raise problem
        return float(self.q_hat[group])

    def _group_problem(self, group: Any, name: str) -> Exception | None:
        """Why a grouped calibration has no threshold for ``group`` (an error naming
        ``name``, not raised), or None when it has one."""
        try:
            known = group in self.q_hat
        except TypeError:
            return TypeError(f"{name}: a group label must be hashable, got {type(group).__name__}")
        if known:
            return None
        what = "missing (None)" if group is None else f"no threshold for group {_shown(group)}"
        return ValueError(f"{name}: {what}; the calibration is group-conditional "
                          f"(its groups: {_groups_shown(self.q_hat)})")

    def filter_lists(self, score_lists: Any, groups: Any = None) -> list[np.ndarray | Exception]:
        """Keep masks for ragged per-response score lists; a bad response is an error, not a raise.

        Every shell that filters responses one record at a time (``rrag conformal filter``
        and ``POST /filter`` through :func:`rrag_kernels.pipelines.conformal.filter_responses`, the
        Ray ``conformal_filter_dataset`` batches) needs the same thing: flatten the ragged
        lists into CSR form, filter them in one call, and turn a response that cannot be
        filtered into that response's error while the others are still filtered. This is
        that one ragged filter. Each response is validated on its own first (its group,
        then its scores; NaN over all claims at once), then all the good ones go through
        one :meth:`filter` call, so the masks equal those of :meth:`filter` called on each
        response alone.

        Parameters
        ----------
        score_lists : sequence of sequences of float, length n
            Response ``k``'s claim scores, ``score_lists[k]``: a list, tuple or 1-d numpy
            array of float or int (shape ``(P_k,)``, ``P_k >= 0``; ragged across responses;
            ``inf`` allowed, as in :meth:`filter`). A list of lists, a tuple, an object
            array of 1-d arrays or a 2-d array (its rows); not a str.
        groups : sequence of hashable, length n, optional
            Response ``k``'s group, ``groups[k]``: required when the calibration is grouped
            (``q_hat`` is a dict); checked for length but otherwise ignored when not.

        Returns
        -------
        list of length n, in the order of ``score_lists``
            Entry ``k`` is either a ``(P_k,)`` bool numpy array, claim ``c`` kept iff
            ``score_lists[k][c] >= self.q_hat_for(groups[k])`` (the masks are slices of one
            ``(sum P_k,)`` array), or, for a response that cannot be filtered, the exception
            (not raised) saying why, its message starting with the argument and index:

            - ``TypeError("score_lists[k]: ...")``: not a sequence of numbers (None, a str,
              a number, a bool / str / None / object score);
            - ``ValueError("score_lists[k]: ...")``: nested deeper than one level, or a NaN
              score (``"claim c has score nan ..."``);
            - ``ValueError("groups[k]: ...")``: grouped, and the group is None or has no
              threshold; ``TypeError("groups[k]: ...")``: an unhashable group.

            A response with both a bad group and bad scores gets the group's error.

        Raises
        ------
        ValueError
            Not calibrated; grouped and ``groups`` is None; ``len(groups) != n``.
        TypeError
            ``score_lists`` or ``groups`` is not a sequence (a str, a dict, a number, a 0-d
            or 1-d non-object numpy array for ``score_lists``).
        """
        if self.q_hat is None:
            raise ValueError("ClaimConformal: not calibrated; call calibrate() (or load()) first")
        if isinstance(score_lists, np.ndarray):
            if score_lists.ndim != 2 and not (score_lists.ndim == 1 and score_lists.dtype == object):
                raise TypeError(f"score_lists: expected one sequence of scores per response (a list of lists or a "
                                f"2-d array), got a {score_lists.ndim}-d {score_lists.dtype} array")
        elif isinstance(score_lists, (str, bytes, bytearray)) or not isinstance(score_lists, Sequence):
            raise TypeError(f"score_lists: expected a sequence of score sequences (one per response), "
                            f"got {type(score_lists).__name__}")
        n = len(score_lists)
        grouped = isinstance(self.q_hat, dict)
        if groups is None:
            if grouped:
                raise ValueError("groups: this calibrator is group-conditional; pass one group per response")
        else:
            if not isinstance(groups, np.ndarray) and (
                    isinstance(groups, (str, bytes, bytearray)) or not isinstance(groups, Sequence)):
                raise TypeError(f"groups: expected a sequence of group labels (one per response), "
                                f"got {type(groups).__name__}")
            if len(groups) != n:
                raise ValueError(f"groups: expected {n} labels (one per response), got {len(groups)}")
        out: list[Any] = [None] * n
        good: list[int] = []
        arrays: list[np.ndarray] = []
        for k in range(n):
            if grouped:
                problem = self._group_problem(groups[k], f"groups[{k}]")
                if problem is not None:
                    out[k] = problem
                    continue
            arr = _score_array(score_lists[k], f"score_lists[{k}]")
            if isinstance(arr, Exception):
                out[k] = arr
            else:
                good.append(k)
                arrays.append(arr)
        if not good:
            return out
        sizes = np.fromiter((a.shape[0] for a in arrays), dtype=np.int64, count=len(arrays))
        scores = np.concatenate(arrays)
        nan = np.isnan(scores)
        if nan.any():  # rare: find the responses (first NaN of each) and leave them out
            offsets = np.r_[0, np.cumsum(sizes)]
            at = np.flatnonzero(nan)
            owner = np.searchsorted(offsets, at, side="right") - 1
            bad = np.zeros(len(good), dtype=bool)
            for j, pos in zip(owner.tolist(), at.tolist()):
                if not bad[j]:
                    bad[j] = True
                    out[good[j]] = ValueError(f"score_lists[{good[j]}]: claim {pos - int(offsets[j])} has score "
                                              "nan (a NaN score cannot be compared with a threshold)")
            scores = scores[~np.repeat(bad, sizes)]
            good = [k for j, k in enumerate(good) if not bad[j]]
            sizes = sizes[~bad]
            if not good:
                return out
        offsets = np.r_[0, np.cumsum(sizes)].astype(np.int64)
        keep = self.filter(scores, offsets, [groups[k] for k in good] if grouped else None)
        for j, k in enumerate(good):
            out[k] = keep[offsets[j]:offsets[j + 1]]
        return out

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

    # ------------------------------------------------------------------ trade-off
    def sweep(self, alphas: Any = None, *, n_splits: int = 100, calib_fraction: float = 0.5, seed: int = 0,
              data: Any = None) -> Any:
        """The trade-off around this calibration: :func:`rrag_kernels.ops.conformal_sweep` on
        its calibration data, with its ``a``, ``sentinel`` and groups.

        Parameters
        ----------
        alphas : float array, shape (A,), optional
            Default: 0.05, 0.1, 0.2, 0.3, 0.4 and this calibrator's ``alpha``.
        n_splits, calib_fraction, seed
            As in ``conformal_sweep`` (random calibration/test splits of the data).
        data : (scores, labels, offsets) or (scores, labels, offsets, groups), optional
            The calibration data, needed after :meth:`load` (the file holds only its hash);
            default: what :meth:`calibrate` saw.

        Returns
        -------
        SweepResult (``meta["alpha"]`` is this calibrator's alpha)

        Raises
        ------
        RuntimeError
            Neither calibrated here nor given ``data``.
        ValueError
            ``data`` is not the data this calibrator was calibrated on (its hash differs); for
            other data call ``conformal_sweep`` and ``plot_tradeoff`` on its result.
        """
        if self.q_hat is None:
            raise RuntimeError("ClaimConformal: call calibrate() (or load()) first")
        if data is None:
            if self._data is None:
                raise RuntimeError("data: this calibrator was loaded from a file, which holds only the hash of its "
                                   "calibration data; pass data=(scores, labels, offsets[, groups])")
            s, ok, off, groups = self._data
        else:
            if not isinstance(data, (tuple, list)) or len(data) not in (3, 4):
                raise TypeError("data: expected (scores, labels, offsets) or (scores, labels, offsets, groups)")
            s, ok, off = as_claims(*data[:3])
            groups = list(data[3]) if len(data) == 4 and data[3] is not None else None
            if (groups is None) != (not isinstance(self.q_hat, dict)):
                raise ValueError("data: groups must be given exactly when the calibrator is group-conditional")
            if _hash(s, ok, off, groups) != self.data_hash:
                raise ValueError("data: not the data this calibrator was calibrated on (its hash differs; same "
                                 "scores, tie-break noise, labels, offsets and groups?); for other data use "
                                 "plot_tradeoff(conformal_sweep(...))")
        if alphas is None:
            alphas = sorted({0.05, 0.1, 0.2, 0.3, 0.4, self.alpha})
        res = conformal_sweep(s, ok, off, alphas=alphas, n_splits=n_splits, calib_fraction=calib_fraction,
                              seed=seed, a=self.a, sentinel=self.sentinel,
                              groups=None if groups is None else np.asarray(groups), backend=self.backend)
        res.meta["alpha"] = self.alpha
        return res

    def plot_tradeoff(self, path: str | Path | None = None, *, ax: Any = None, alphas: Any = None,
                      n_splits: int = 100, calib_fraction: float = 0.5, seed: int = 0, data: Any = None,
                      title: str | None = None) -> Any:
        """Draw :meth:`sweep`'s trade-off (fully supported, claims retained, non-empty against
        the target 1 - alpha) with this calibrator's alpha and q_hat marked; see
        :func:`rrag_kernels.pipelines.conformal.plot_tradeoff`. Returns the matplotlib Figure."""
        from .plot import plot_tradeoff

        res = self.sweep(alphas, n_splits=n_splits, calib_fraction=calib_fraction, seed=seed, data=data)
        return plot_tradeoff(res, path, ax=ax, title=title, mark_alpha=self.alpha,
                             mark_label=None if isinstance(self.q_hat, dict) else f"q_hat {self.q_hat:.4g}")

    # ------------------------------------------------------------------ persistence
    def to_dict(self) -> dict:
        from ... import __version__

        if self.q_hat is None:
            raise RuntimeError("ClaimConformal: nothing to save; call calibrate() first")
        grouped = isinstance(self.q_hat, dict)
        return {
            "format": FORMAT,
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
    def from_dict(cls, d: Any) -> "ClaimConformal":
        """A calibrator from the object :meth:`to_dict` returns (the parsed JSON of :meth:`save`).

        Every field is checked (the rules are in the module docstring); group labels come
        back as str.

        Raises
        ------
        ValueError
            ``d`` is not a dict; a field is missing, unknown, of the wrong kind or out of
            range; ``format_version`` is newer than :data:`FORMAT_VERSION`. The message
            starts with the field's name (``path:`` when ``d`` is not an object).
        """
        from ... import __version__

        if not isinstance(d, dict):
            raise ValueError(f"path: expected a JSON object at the top level, got {type(d).__name__}")
        if d.get("format") != FORMAT:
            raise ValueError(f"format: not a ClaimConformal file (expected format {FORMAT!r}, "
                             f"got {_shown(d.get('format'))})")
        if "format_version" not in d:
            raise ValueError("format_version: missing")
        version = _read(check_int, d["format_version"], "format_version", minimum=1)
        if version > FORMAT_VERSION:
            raise ValueError(f"format_version: the file has format {version}, written by a newer rrag_kernels "
                             f"({_shown(d.get('package_version'))}); rrag_kernels {__version__} reads format "
                             f"{FORMAT_VERSION} at most: upgrade rrag_kernels to load it")
        unknown = [k for k in d if k not in FIELDS]
        if unknown:
            raise ValueError(f"{unknown[0]}: not a field of a format {FORMAT_VERSION} file "
                             f"(its fields: {', '.join(FIELDS)})")
        missing = [k for k in FIELDS if k not in d]
        if missing:
            raise ValueError(f"{missing[0]}: missing")
        _read_str(d["package_version"], "package_version")
        obj = cls(_read(check_real, d["alpha"], "alpha"), _read(check_real, d["a"], "a"),
                  _read_threshold(d["sentinel"], "sentinel"), on_too_few=d["on_too_few"],
                  score_name=_read_str(d["score_name"], "score_name"))
        _read(check_bool, d["grouped"], "grouped")
        if d["grouped"]:
            obj.q_hat, obj.n = _read_groups(d)
        else:
            obj.q_hat = _read_threshold(d["q_hat"], "q_hat")
            obj.n = _read(check_int, d["n"], "n", minimum=1, maximum=_COUNT_MAX)
        digest = _read_str(d["calibration_hash"], "calibration_hash")
        if not _HASH.fullmatch(digest):
            raise ValueError(f"calibration_hash: expected 'sha256:' and 64 lower-case hex digits, got {_shown(digest)}")
        obj.data_hash = digest
        return obj

    @classmethod
    def load(cls, path: str | Path) -> "ClaimConformal":
        """Read a file written by :meth:`save` (group labels come back as str).

        Raises
        ------
        FileNotFoundError, OSError
            The file cannot be read.
        ValueError
            The file is not UTF-8 JSON (``path: ...``), or a field breaks its rule (the
            message starts with the field's name and ends with the file's path). Never a
            KeyError, TypeError or OverflowError from inside.
        """
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise ValueError(f"path: {path} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
        try:
            d = loads_one_value_per_key(text)
        except DuplicateKeyError as exc:  # json.loads alone would keep the last
            raise ValueError(f"{exc.args[0]}: appears twice in one JSON object (in {path})") from None
        except JSONLimitError as exc:  # nested too deeply, an integer too long to read
            raise ValueError(f"path: {path}: JSON {exc}, not a ClaimConformal file") from None
        except ValueError as exc:  # json.JSONDecodeError
            raise ValueError(f"path: {path} is not valid JSON: {exc}") from None
        try:
            return cls.from_dict(d)
        except ValueError as exc:
            raise ValueError(f"{exc} (in {path})") from exc

    def __repr__(self) -> str:
        return f"ClaimConformal(alpha={self.alpha}, a={self.a}, q_hat={self.q_hat!r}, n={self.n!r})"
