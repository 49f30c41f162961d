"""Argument checks shared by the public ops.

Every failure names the argument first ("doc_offsets: ..."), raising TypeError for the
wrong kind of object or dtype and ValueError for a wrong shape or value. The C++ bindings
re-check the same things, so a direct ``_core`` call cannot read out of bounds either.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

_FLOAT_KINDS = "f"


def is_torch_tensor(x: Any) -> bool:
    """True for a torch.Tensor, without importing torch when it is not already loaded."""
    cls = type(x)
    return cls.__module__.startswith("torch") and cls.__name__ in ("Tensor", "Parameter")


def check_float_array(x: Any, name: str, ndim: int) -> None:
    """Type, dtype and ndim checks common to numpy arrays and torch tensors."""
    if is_torch_tensor(x):
        if not x.is_floating_point():
            raise TypeError(f"{name}: expected a floating-point tensor, got dtype {x.dtype}")
        shape = tuple(x.shape)
    elif isinstance(x, np.ndarray):
        if x.dtype.kind not in _FLOAT_KINDS:
            raise TypeError(f"{name}: expected a floating-point array (float16/32/64), got dtype {x.dtype}")
        shape = x.shape
    else:
        raise TypeError(f"{name}: expected a numpy array or torch tensor, got {type(x).__name__}")
    if len(shape) != ndim:
        raise ValueError(f"{name}: expected a {ndim}-d array, got {len(shape)}-d with shape {shape}")


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


def as_offsets(offsets: Any, name: str, n_segments: int, n_rows: int) -> np.ndarray:
    """Validate CSR offsets and return them as a contiguous int64 numpy array.

    Parameters
    ----------
    offsets : array-like of integers, shape (n_segments + 1,)
    n_segments, n_rows : int
        The segments are ``rows[offsets[s]:offsets[s + 1]]``.
    """
    if is_torch_tensor(offsets):
        import torch

        if offsets.is_floating_point() or offsets.is_complex() or offsets.dtype == torch.bool:
            raise TypeError(f"{name}: expected integer offsets, got dtype {offsets.dtype}")
        arr = offsets.detach().cpu().numpy()
    elif isinstance(offsets, np.ndarray):
        arr = offsets
    elif isinstance(offsets, (list, tuple)):
        arr = np.asarray(offsets)
        if arr.size == 0:
            arr = arr.astype(np.int64)
    else:
        raise TypeError(f"{name}: expected an integer numpy array, got {type(offsets).__name__}")
    if arr.dtype.kind not in "iu":
        raise TypeError(f"{name}: expected integer offsets (int64), got dtype {arr.dtype}")
    if arr.ndim != 1:
        raise ValueError(f"{name}: expected a 1-d array, got {arr.ndim}-d")
    if arr.shape[0] != n_segments + 1:
        raise ValueError(
            f"{name}: expected length {n_segments + 1} (number of queries + 1), got {arr.shape[0]}"
        )
    if arr.dtype == np.uint64 and arr.size and arr.max() > np.iinfo(np.int64).max:
        raise ValueError(f"{name}: offsets exceed the int64 range")
    arr = np.ascontiguousarray(arr, dtype=np.int64)
    if arr[0] != 0:
        raise ValueError(f"{name}: offsets[0] must be 0, got {arr[0]}")
    steps = np.diff(arr)
    if steps.size and steps.min() < 0:
        bad = int(np.argmax(steps < 0)) + 1
        raise ValueError(
            f"{name}: offsets must be non-decreasing, but offsets[{bad}] = {arr[bad]} < offsets[{bad - 1}] = {arr[bad - 1]}"
        )
    if arr[-1] != n_rows:
        raise ValueError(f"{name}: offsets[-1] must equal the number of rows ({n_rows}), got {arr[-1]}")
    return arr


def check_k(k: Any, n: int) -> int:
    """k must be an integer (not bool) with 1 <= k <= n."""
    if isinstance(k, bool) or not isinstance(k, numbers.Integral):
        raise TypeError(f"k: expected an int, got {type(k).__name__}")
    k = int(k)
    if not 1 <= k <= n:
        raise ValueError(f"k: must satisfy 1 <= k <= len(corpus) = {n}, got {k}")
    return k


def check_vector(x: Any, name: str, length: int) -> None:
    check_float_array(x, name, 1)
    if int(x.shape[0]) != length:
        raise ValueError(f"{name}: expected length {length} (one per doc), got {int(x.shape[0])}")


def check_finite_numpy(x: np.ndarray, name: str) -> None:
    """Raise ValueError naming the argument when x holds NaN or inf."""
    if x.size and not np.isfinite(x).all():
        first = int(np.argmax(~np.isfinite(x).reshape(x.shape[0], -1).all(axis=1))) if x.ndim == 2 else int(np.argmax(~np.isfinite(x)))
        where = "row" if x.ndim == 2 else "index"
        raise ValueError(f"{name}: contains NaN or inf (first at {where} {first})")


def check_finite_torch(x: Any, name: str) -> None:
    """Raise ValueError naming the argument when tensor x holds NaN or inf."""
    import torch

    if x.numel() and not bool(torch.isfinite(x).all()):
        bad = ~torch.isfinite(x)
        first = int(bad.reshape(x.shape[0], -1).any(dim=1).nonzero()[0, 0]) if x.ndim == 2 else int(bad.nonzero()[0, 0])
        where = "row" if x.ndim == 2 else "index"
        raise ValueError(f"{name}: contains NaN or inf (first at {where} {first})")


def check_bool(value: Any, name: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name}: expected a bool, got {type(value).__name__}")
    return bool(value)


# ------------------------------------------------------- arrays of the graph and conformal ops
# Coercion of numpy / list / torch arguments to contiguous int64 or float64 numpy, and the
# value checks the reference and Triton backends need (the C++ kernels check in their pass).


def to_numpy(x: Any) -> np.ndarray:
    if is_torch_tensor(x):
        return x.detach().cpu().numpy()
    return x


def array_like(x: Any, name: str) -> Any:
    """numpy array or torch tensor as given; lists/tuples as numpy arrays."""
    if isinstance(x, np.ndarray) or is_torch_tensor(x):
        return x
    if isinstance(x, (list, tuple)):
        arr = np.asarray(x)
        return arr.astype(np.int64) if arr.size == 0 else arr
    raise TypeError(f"{name}: expected a numpy array, list or torch tensor, got {type(x).__name__}")


def dtype_kind(x: Any) -> str:
    """numpy dtype kind ('i', 'u', 'f', 'b', ...) of an array or tensor."""
    if is_torch_tensor(x):
        if x.dtype.is_floating_point:
            return "f"
        if x.dtype.is_complex:
            return "c"
        return "b" if str(x.dtype) == "torch.bool" else ("u" if str(x.dtype) == "torch.uint8" else "i")
    return x.dtype.kind


def check_shape(x: Any, name: str, shape: tuple[int | None, ...], what: str = "") -> None:
    got = x.shape if type(x) is np.ndarray else tuple(int(s) for s in x.shape)
    if len(got) != len(shape):
        raise ValueError(f"{name}: expected a {len(shape)}-d array, got {len(got)}-d with shape {got}")
    for g, s in zip(got, shape):
        if s is not None and g != s:
            want = tuple("*" if d is None else d for d in shape)
            raise ValueError(f"{name}: expected shape {want}{what}, got {got}")


def is_plain(x: Any, dtype: np.dtype, ndim: int = 1) -> bool:
    """A C-contiguous numpy array of exactly this dtype and ndim (needs no conversion)."""
    return type(x) is np.ndarray and x.dtype == dtype and x.ndim == ndim and x.flags.c_contiguous


_I64, _F64 = np.dtype(np.int64), np.dtype(np.float64)
_INT64_MAX = np.iinfo(np.int64).max


def as_index(x: Any, name: str, length: int | None = None, what: str = "") -> np.ndarray:
    """A 1-d integer argument as contiguous int64 numpy (TypeError for non-integer dtypes)."""
    if is_plain(x, _I64) and (length is None or x.shape[0] == length):
        return x
    x = array_like(x, name)
    if dtype_kind(x) not in "iu":
        raise TypeError(f"{name}: expected an integer array (int64), got dtype {x.dtype}")
    check_shape(x, name, (length,), what)
    arr = to_numpy(x)
    if arr.dtype == np.uint64 and arr.size and arr.max() > _INT64_MAX:
        raise ValueError(f"{name}: values exceed the int64 range")
    return np.ascontiguousarray(arr, dtype=np.int64)


def as_float64(x: Any, name: str, shape: tuple[int | None, ...], what: str = "", *, allow_int: bool = False) -> np.ndarray:
    """A float argument as contiguous float64 numpy (integers too when ``allow_int``)."""
    if is_plain(x, _F64, len(shape)) and all(s is None or g == s for g, s in zip(x.shape, shape)):
        return x
    x = array_like(x, name)
    kinds = "fiu" if allow_int else "f"
    if dtype_kind(x) not in kinds:
        raise TypeError(f"{name}: expected a floating-point array, got dtype {x.dtype}")
    check_shape(x, name, shape, what)
    return np.ascontiguousarray(to_numpy(x), dtype=np.float64)


def check_all_finite(x: np.ndarray, name: str) -> None:
    if x.size and not np.isfinite(x).all():
        first = int(np.argmax(~np.isfinite(x.reshape(x.shape[0], -1)).all(axis=1)))
        raise ValueError(f"{name}: contains NaN or inf (first at {'row' if x.ndim == 2 else 'index'} {first})")


def check_index_range(idx: np.ndarray, name: str, n: int, bound: str) -> None:
    if idx.size:
        bad = (idx < 0) | (idx >= n)
        if bad.any():
            p = int(np.argmax(bad))
            raise ValueError(f"{name}: index {int(idx[p])} at position {p} out of range [0, {bound} = {n})")


def check_no_self_loops(a: np.ndarray, b: np.ndarray, name_a: str, name_b: str) -> None:
    if a.size:
        loops = a == b
        if loops.any():
            p = int(np.argmax(loops))
            raise ValueError(f"{name_b}: self-loop: {name_a}[{p}] == {name_b}[{p}] == {int(a[p])}")


def check_int(value: Any, name: str, *, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name}: expected an int, got {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{name}: must be >= {minimum}, got {value}")
    return int(value)


def check_real(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name}: expected a float, got {type(value).__name__}")
    return float(value)


def check_csr(off: np.ndarray, name: str, n_rows: int) -> None:
    """CSR offsets (int64 numpy) over n_rows rows: first 0, non-decreasing, last n_rows."""
    if off[0] != 0:
        raise ValueError(f"{name}: offsets[0] must be 0, got {off[0]}")
    steps = np.diff(off)
    if steps.size and steps.min() < 0:
        bad = int(np.argmax(steps < 0)) + 1
        raise ValueError(f"{name}: offsets must be non-decreasing, but offsets[{bad}] = {off[bad]} < "
                         f"offsets[{bad - 1}] = {off[bad - 1]}")
    if off[-1] != n_rows:
        raise ValueError(f"{name}: offsets[-1] must equal the number of rows ({n_rows}), got {off[-1]}")
