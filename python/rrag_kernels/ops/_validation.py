"""Argument checks of the public ops: each rule once.

Every failure names the argument first ("doc_offsets: ..."), raising TypeError for the
wrong kind of object or dtype and ValueError for a wrong shape or value. The C++ bindings
re-check the same things, so a direct ``_core`` call cannot read out of bounds either.

The value rules (finiteness, index ranges, self-loops, probabilities) take numpy arrays and
torch tensors alike, so the Triton paths check CUDA tensors where they are, without a copy
to the host.
"""

from __future__ import annotations

import numbers
import re
from collections.abc import Mapping
from typing import Any

import numpy as np

_I64, _F64, _BOOL = np.dtype(np.int64), np.dtype(np.float64), np.dtype(np.bool_)
_INT64_MAX = np.iinfo(np.int64).max

# --------------------------------------------------------------------------- array kinds


def is_torch_tensor(x: Any) -> bool:
    """True for a torch.Tensor, without importing torch when it is not already loaded."""
    cls = type(x)
    return cls.__module__.startswith("torch") and cls.__name__ in ("Tensor", "Parameter")


def to_numpy(x: Any) -> Any:
    """A torch tensor as a numpy array (copied to the host); anything else as given."""
    if is_torch_tensor(x):
        x = x.detach().cpu()
        if x.dtype.is_floating_point and x.itemsize < 8 and str(x.dtype) not in ("torch.float16", "torch.float32"):
            x = x.float()  # bfloat16, float8: numpy has no such dtype; float32 holds them exactly
        return x.numpy()
    return x


def array_like(x: Any, name: str) -> Any:
    """numpy array or torch tensor as given; lists/tuples as numpy arrays (int64 when empty)."""
    if isinstance(x, np.ndarray) or is_torch_tensor(x):
        return x
    if isinstance(x, (list, tuple)):
        try:
            arr = np.asarray(x)
        except (ValueError, TypeError, OverflowError) as exc:  # ragged nesting, odd items
            raise ValueError(f"{name}: expected a rectangular list of numbers ({exc})") from None
        return arr.astype(np.int64) if arr.size == 0 else arr
    raise TypeError(f"{name}: expected a numpy array, list or torch tensor, got {type(x).__name__}")


def dtype_kind(x: Any) -> str:
    """numpy dtype kind ('i', 'u', 'f', 'b', 'c', ...) of an array or tensor."""
    if is_torch_tensor(x):
        if x.dtype.is_floating_point:
            return "f"
        if x.dtype.is_complex:
            return "c"
        return "b" if str(x.dtype) == "torch.bool" else ("u" if str(x.dtype) == "torch.uint8" else "i")
    return x.dtype.kind


def check_dtype_kind(x: Any, name: str, kinds: str, expected: str) -> None:
    """TypeError ``"<name>: expected <expected>, got dtype ..."`` unless x's dtype kind is in ``kinds``."""
    if dtype_kind(x) not in kinds:
        raise TypeError(f"{name}: expected {expected}, got dtype {x.dtype}")


def check_shape(x: Any, name: str, shape: tuple[int | None, ...], what: str = "") -> None:
    """ndim and the fixed sizes of ``shape`` (None: any size); ``what`` explains a size."""
    got = x.shape if type(x) is np.ndarray else tuple(int(s) for s in x.shape)
    if len(got) != len(shape):
        raise ValueError(f"{name}: expected a {len(shape)}-d array, got {len(got)}-d with shape {got}")
    for g, s in zip(got, shape):
        if s is not None and g != s:
            if len(shape) == 1:
                raise ValueError(f"{name}: expected length {s}{what}, got {g}")
            want = tuple("*" if d is None else d for d in shape)
            raise ValueError(f"{name}: expected shape {want}{what}, got {got}")


def is_plain(x: Any, dtype: np.dtype, ndim: int = 1) -> bool:
    """A C-contiguous, aligned numpy array of exactly this dtype and ndim (needs no conversion)."""
    return (type(x) is np.ndarray and x.dtype == dtype and x.ndim == ndim and x.flags.c_contiguous
            and x.flags.aligned)


def as_buffer(x: Any, dtype: Any) -> np.ndarray:
    """``x`` as what the C++ kernels read: a C-contiguous, aligned, native-byte-order numpy
    array of ``dtype`` (a view when it already is one, else a copy).

    Arrays that went through pickle, shared memory or ``np.frombuffer`` can be big-endian,
    unaligned or read-only; all of them are ordinary input.
    """
    out = np.ascontiguousarray(x, dtype=dtype)
    return out if out.flags.aligned else out.copy()


# --------------------------------------------------------------------------- float embeddings


def check_float_array(x: Any, name: str, ndim: int) -> None:
    """A floating-point numpy array or torch tensor with ``ndim`` dimensions (not converted)."""
    if not (isinstance(x, np.ndarray) or is_torch_tensor(x)):
        raise TypeError(f"{name}: expected a numpy array or torch tensor, got {type(x).__name__}")
    check_dtype_kind(x, name, "f", "a floating-point array (float16/32/64)")
    check_shape(x, name, (None,) * ndim)


def check_matrices(named: dict[str, Any]) -> int:
    """Check that each (n_i, d) matrix is 2-d floating with one shared d >= 1; return d."""
    first, *rest = named.items()
    check_float_array(first[1], first[0], 2)
    d = int(first[1].shape[1])
    if d < 1:
        raise ValueError(f"{first[0]}: the embedding dimension must be >= 1, got shape {tuple(first[1].shape)}")
    for name, x in rest:
        check_float_array(x, name, 2)
        cols = int(x.shape[1])
        if cols != d:
            raise ValueError(f"{name}: dimension mismatch: {name} has d={cols} but {first[0]} has d={d}")
    return d


def check_vector(x: Any, name: str, length: int, what: str = "") -> None:
    """A floating-point 1-d numpy array or torch tensor of ``length`` entries."""
    check_float_array(x, name, 1)
    check_shape(x, name, (length,), what)


# --------------------------------------------------------------------------- integer and float arrays


def as_index(x: Any, name: str, length: int | None = None, what: str = "") -> np.ndarray:
    """A 1-d integer argument as contiguous int64 numpy (TypeError for non-integer dtypes).

    Parameters
    ----------
    x : integer numpy array, list or torch tensor, shape (length,)
    length : int, optional
        The required length (any when None); ``what`` says where it comes from.
    """
    if is_plain(x, _I64) and (length is None or x.shape[0] == length):
        return x
    x = array_like(x, name)
    check_dtype_kind(x, name, "iu", "an integer array (int64)")
    check_shape(x, name, (length,), what)
    arr = to_numpy(x)
    if arr.dtype == np.uint64 and arr.size and arr.max() > _INT64_MAX:
        raise ValueError(f"{name}: values exceed the int64 range")
    return as_buffer(arr, np.int64)


def as_float64(x: Any, name: str, shape: tuple[int | None, ...], what: str = "", *, allow_int: bool = False) -> np.ndarray:
    """A float argument as contiguous float64 numpy (integers too when ``allow_int``)."""
    if is_plain(x, _F64, len(shape)) and all(s is None or g == s for g, s in zip(x.shape, shape)):
        return x
    x = array_like(x, name)
    check_dtype_kind(x, name, "fiu" if allow_int else "f", "a floating-point array")
    check_shape(x, name, shape, what)
    return as_buffer(to_numpy(x), np.float64)


def as_bool(x: Any, name: str, length: int | None = None, what: str = "") -> np.ndarray:
    """A 1-d bool argument as contiguous bool numpy (TypeError for any other dtype)."""
    if is_plain(x, _BOOL) and (length is None or x.shape[0] == length):
        return x
    if isinstance(x, (list, tuple)) and len(x) == 0:
        x = np.zeros(0, dtype=np.bool_)  # array_like makes an empty list int64
    x = array_like(x, name)
    check_dtype_kind(x, name, "b", "a bool array")
    check_shape(x, name, (length,), what)
    return as_buffer(to_numpy(x), np.bool_)


def check_csr(off: np.ndarray, name: str, n_rows: int) -> None:
    """CSR offsets (non-empty int64 numpy) over n_rows rows: first 0, non-decreasing, last n_rows."""
    if off[0] != 0:
        raise ValueError(f"{name}: offsets[0] must be 0, got {off[0]}")
    steps = np.diff(off)
    if steps.size and steps.min() < 0:
        bad = int(np.argmax(steps < 0)) + 1
        raise ValueError(f"{name}: offsets must be non-decreasing, but offsets[{bad}] = {off[bad]} < "
                         f"offsets[{bad - 1}] = {off[bad - 1]}")
    if off[-1] != n_rows:
        raise ValueError(f"{name}: offsets[-1] must equal the number of rows ({n_rows}), got {off[-1]}")


def as_offsets(offsets: Any, name: str, n_segments: int, n_rows: int,
               what: str = " (number of queries + 1)") -> np.ndarray:
    """Validated CSR offsets as contiguous int64 numpy.

    Parameters
    ----------
    offsets : integer numpy array, list or torch tensor, shape (n_segments + 1,)
        Segment ``s`` is ``rows[offsets[s]:offsets[s + 1]]``.
    n_segments, n_rows : int
    """
    off = as_index(offsets, name, n_segments + 1, what)
    check_csr(off, name, n_rows)
    return off


# --------------------------------------------------------------------------- value rules (numpy or torch)


def _isfinite(x: Any) -> Any:
    if is_torch_tensor(x):
        import torch

        return torch.isfinite(x)
    return np.isfinite(x)


def _first(mask: Any) -> int:
    """Position of the first True of a 1-d numpy or torch bool mask; -1 when there is none."""
    if is_torch_tensor(mask):
        if mask.numel() == 0 or not bool(mask.any()):
            return -1
        return int(mask.nonzero()[0, 0])
    if mask.size == 0 or not mask.any():
        return -1
    return int(np.argmax(mask))


def check_finite(x: Any, name: str) -> None:
    """ValueError naming the argument when x (1-d or 2-d, numpy or torch) holds NaN or inf."""
    ok = _isfinite(x)
    if bool(ok.all()):
        return
    first = _first(~ok.reshape(x.shape[0], -1).all(1))
    raise ValueError(f"{name}: contains NaN or inf (first at {'row' if x.ndim == 2 else 'index'} {first})")


def check_no_nan(x: np.ndarray, name: str) -> None:
    """ValueError naming the argument when the 1-d float array x holds NaN (inf is allowed)."""
    nan = np.isnan(x)
    if nan.any():
        raise ValueError(f"{name}: contains NaN (first at index {int(np.argmax(nan))})")


def check_index_range(idx: Any, name: str, n: int, bound: str) -> None:
    """Every index in [0, n); ``bound`` names n in the message (e.g. "n_claims")."""
    p = _first((idx < 0) | (idx >= n))
    if p >= 0:
        raise ValueError(f"{name}: index {int(idx[p])} at position {p} out of range [0, {bound} = {n})")


def check_no_self_loops(a: Any, b: Any, name_a: str, name_b: str) -> None:
    """No edge with ``a[p] == b[p]``."""
    p = _first(a == b)
    if p >= 0:
        raise ValueError(f"{name_b}: self-loop: {name_a}[{p}] == {name_b}[{p}] == {int(a[p])}")


def check_in_range(x: np.ndarray, name: str, lo: float, hi: float, *, allow_nan: bool = False) -> None:
    """Every entry of the 1-d or 2-d numpy array x in [lo, hi] (NaN too when ``allow_nan``).

    The message names the first bad entry: ``"<name>: values must be in [0, 1] or NaN, got
    1.5 at row 3, column 2"`` (``at index k`` for a 1-d array).
    """
    ok = (x >= lo) & (x <= hi)
    if allow_nan:
        ok |= np.isnan(x)
    if ok.all():
        return
    k = int(np.argmin(ok.reshape(-1)))
    where = f"index {k}" if x.ndim == 1 else f"row {k // x.shape[1]}, column {k % x.shape[1]}"
    nan = " or NaN" if allow_nan else ""
    raise ValueError(f"{name}: values must be in [{lo:g}, {hi:g}]{nan}, got {x.reshape(-1)[k]} at {where}")


def check_probabilities(x: Any, name: str) -> None:
    """Every entry of the (P, 3) probabilities finite and in [0, 1] (rows need not sum to 1)."""
    p = _first(~(_isfinite(x) & (x >= 0) & (x <= 1)).all(1))
    if p >= 0:
        raise ValueError(f"{name}: probabilities must be finite and in [0, 1] (first bad row {p})")


# --------------------------------------------------------------------------- scalars


def check_bool(value: Any, name: str) -> bool:
    """A Python or numpy bool."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name}: expected a bool, got {type(value).__name__}")
    return bool(value)


def check_int(value: Any, name: str, *, minimum: int = 0, maximum: int | None = None,
              maximum_is: str = "") -> int:
    """An integer (Python or numpy, never bool) with ``minimum <= value <= maximum``.

    ``maximum_is`` names the upper bound in the message ("len(corpus)").
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name}: expected an int, got {type(value).__name__}")
    value = int(value)
    if maximum is None:
        if value < minimum:
            raise ValueError(f"{name}: must be >= {minimum}, got {value}")
    elif not minimum <= value <= maximum:
        bound = f"{maximum_is} = {maximum}" if maximum_is else str(maximum)
        raise ValueError(f"{name}: must satisfy {minimum} <= {name} <= {bound}, got {value}")
    return value


def check_real(value: Any, name: str) -> float:
    """A real number (int or float, never bool) as a Python float; ValueError for an
    integer beyond the float range (10**400)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name}: expected a float, got {type(value).__name__}")
    try:
        return float(value)
    except OverflowError:
        # Neither str() nor a float format works on such an int (digit limit, overflow).
        magnitude = int(int(value).bit_length() * 0.30103)
        raise ValueError(f"{name}: an integer of about 10**{magnitude} is beyond the float range") from None


def check_choice(value: Any, name: str, choices: tuple[str, ...]) -> str:
    """One of a few option strings."""
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name}: expected one of {choices}, got {value!r}")
    return value


# --------------------------------------------------------------------------- NLI label order

#: The column order of every NLI scorer in this package, and nli_graph's default.
LABELS: tuple[str, str, str] = ("entailment", "neutral", "contradiction")

# Names a model may use for each class (compared lower-cased, with any non-letter characters
# removed, so "CONTRADICTION", "Contradiction", " contradiction" all match).
_LABEL_ALIASES: dict[str, str] = {
    "entailment": "entailment",
    "entail": "entailment",
    "entails": "entailment",
    "entailed": "entailment",
    "neutral": "neutral",
    "contradiction": "contradiction",
    "contradict": "contradiction",
    "contradicts": "contradiction",
    "contradictory": "contradiction",
}


def _canonical_label(name: Any) -> str | None:
    if not isinstance(name, str):
        return None
    return _LABEL_ALIASES.get(re.sub(r"[^a-z]", "", name.lower()))


def label_order_columns(label_order: Any, name: str = "label_order", *, source: str = "") -> tuple[int, int, int]:
    """The columns of entailment, neutral and contradiction in an NLI model's output.

    Parameters
    ----------
    label_order : sequence of 3 str, or mapping {column: name}
        What each output column is, e.g. ``("contradiction", "entailment", "neutral")`` or a
        Hugging Face ``id2label`` (keys may be strings, as in a JSON config). Names are
        compared case-insensitively, ignoring non-letters, and may be spelled "entails",
        "contradicts", ...
    name : str
        The argument's name in messages.
    source : str
        Where the order came from (a config path), for messages.

    Returns
    -------
    (int, int, int)
        ``cols`` such that ``output[:, cols]`` is in the order of :data:`LABELS`.
    """
    where = f"{source} " if source else ""
    if isinstance(label_order, Mapping):
        try:
            items = sorted((int(k), v) for k, v in label_order.items())
        except (TypeError, ValueError):
            raise ValueError(f"{name}: {where}has non-integer keys {sorted(map(str, label_order))}") from None
        keys, names = [k for k, _ in items], [v for _, v in items]
    elif isinstance(label_order, (list, tuple)):
        keys, names = list(range(len(label_order))), list(label_order)
    else:
        raise TypeError(f"{name}: expected a sequence of 3 label names or a mapping {{column: name}}, "
                        f"got {type(label_order).__name__}")
    if keys != [0, 1, 2]:
        raise ValueError(f"{name}: {where}must name the 3 outputs 0, 1, 2 (entailment, neutral and "
                         f"contradiction in some order), got {label_order!r}")
    canon = [_canonical_label(v) for v in names]
    if sorted(c for c in canon if c is not None) != sorted(LABELS):
        raise ValueError(f"{name}: {where}does not name the classes entailment, neutral and contradiction "
                         f"(case-insensitive), got {label_order!r}")
    return canon.index(LABELS[0]), canon.index(LABELS[1]), canon.index(LABELS[2])


# --------------------------------------------------------------------------- conformal claims


def check_level_a(a: Any) -> float:
    """The factuality level a as a float in (0, 1]; TypeError / ValueError naming ``a``."""
    a = check_real(a, "a")
    if not (0.0 < a <= 1.0):
        raise ValueError(f"a: the factuality level must be in (0, 1], got {a}")
    return a


def check_sentinel(sentinel: Any) -> float:
    """The r-score sentinel as a float; TypeError for a non-number, ValueError for NaN."""
    sentinel = check_real(sentinel, "sentinel")
    if np.isnan(sentinel):
        raise ValueError("sentinel: must not be NaN (use -inf, -100000.0 or -1.0)")
    return sentinel


def check_alphas(alpha: Any, name: str) -> tuple[np.ndarray, bool]:
    """Miscoverage levels as ((A,) float64, whether a scalar was given); each in (0, 1)."""
    if isinstance(alpha, bool):
        raise TypeError(f"{name}: expected a float or a 1-d array of floats, got bool")
    scalar = isinstance(alpha, numbers.Real)
    if scalar:
        arr = np.array([check_real(alpha, name)], dtype=np.float64)  # 10**400: ValueError, not OverflowError
    else:
        arr = as_float64(alpha, name, (None,), allow_int=True)
    bad = ~((arr > 0.0) & (arr < 1.0))
    if bad.any():
        raise ValueError(f"{name}: every alpha must be in (0, 1), got {arr[int(np.argmax(bad))]}")
    return arr, scalar


def as_claims(scores: Any, labels_ok: Any, offsets: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Claims in CSR form, shapes and dtypes checked, as contiguous numpy arrays.

    Parameters
    ----------
    scores : float (or integer) array, shape (C,)
    labels_ok : bool array (or list of bools / 0-1 values), shape (C,), True = supported
    offsets : integer array, shape (n + 1,), n >= 0
        Response ``i`` owns claims ``offsets[i]:offsets[i + 1]``.

    Returns
    -------
    scores (C,) float64, labels_ok (C,) bool, offsets (n + 1,) int64
        The values (NaN, CSR offsets) are checked by :func:`check_claim_values` or the C++
        kernels.
    """
    s = as_float64(scores, "scores", (None,), allow_int=True)
    if isinstance(labels_ok, (list, tuple)):  # a list of labels may hold 0/1 as well as bools
        arr = array_like(labels_ok, "labels_ok")
        if arr.dtype.kind in "iuf":
            bad = ~np.isin(arr, (0, 1))
            if bad.any():
                raise ValueError(f"labels_ok: a list of labels holds bools or 0/1, got {arr.reshape(-1)[np.argmax(bad)]!r}")
            arr = arr.astype(np.bool_)
        labels_ok = arr
    ok = as_bool(labels_ok, "labels_ok", s.shape[0], " (len(scores))")
    off = as_index(offsets, "offsets")
    if off.shape[0] < 1:
        raise ValueError("offsets: expected length n + 1 >= 1, got 0")
    return s, ok, off


def check_claim_values(scores: np.ndarray, offsets: np.ndarray) -> None:
    """The value rules of :func:`as_claims`' output: CSR offsets over the claims, no NaN score."""
    check_csr(offsets, "offsets", scores.shape[0])
    check_no_nan(scores, "scores")
