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
