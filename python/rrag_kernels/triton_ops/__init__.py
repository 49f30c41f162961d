"""Triton GPU kernels for the rrag_kernels ops.

One file per kernel: ``<k>.py`` holds the ``@triton.jit`` kernel ``_<k>_kernel`` (and its
helpers ``_<k>_<part>_kernel``) together with the launcher ``<k>``. Launchers receive
already-validated, contiguous float32 tensors on one device (CUDA, or CPU under
``TRITON_INTERPRET=1``) and return tensors on that device; validation lives in
``rrag_kernels.ops``.

Importing this package never imports triton or torch, so it works on machines that have
neither. The launchers are loaded on first attribute access::

    from rrag_kernels import triton_ops
    if triton_ops.can_run_on(x.device):
        out = triton_ops.cosine_matrix(a, b)

Each submodule shares its name with its launcher, and Python binds a package attribute to
a submodule when that submodule is first imported. To stay unambiguous, prefer either the
attribute access above (which always yields the launcher function) or the explicit form
``from rrag_kernels.triton_ops.cosine_matrix import cosine_matrix``.

Note that triton decides between compiling and interpreting when a ``@triton.jit``
function is defined, i.e. when a kernel submodule is first imported: ``TRITON_INTERPRET``
must be set before that moment.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from typing import Any, Callable

# The same launchers as the torch formulations: one list (importing torch_ops imports no torch).
from ..torch_ops import OP_NAMES, module_of

__all__ = [
    "OP_NAMES",
    "can_run_on",
    "claim_relevance",
    "cosine_matrix",
    "get_launcher",
    "interpret_mode",
    "is_available",
    "segmented_cosine",
    "topk_cosine",
]

# triton parses TRITON_INTERPRET with these spellings (case-insensitive) as true.
_TRUE_SPELLINGS = frozenset({"1", "true", "on", "yes"})


def is_available() -> bool:
    """Whether triton (and torch, which the launchers need) can be imported.

    Returns
    -------
    bool
    """
    return importlib.util.find_spec("triton") is not None and importlib.util.find_spec("torch") is not None


def interpret_mode() -> bool:
    """Whether ``TRITON_INTERPRET`` is set to a true value in the environment.

    In interpret mode triton runs kernels on CPU tensors with NumPy (slowly); it is how the
    kernels are tested without a GPU.

    Returns
    -------
    bool
    """
    return os.environ.get("TRITON_INTERPRET", "").strip().lower() in _TRUE_SPELLINGS


def can_run_on(device: Any) -> bool:
    """Whether the triton launchers can run on tensors that live on ``device``.

    Parameters
    ----------
    device : torch.device or str
        ``"cuda"`` / ``"cuda:N"`` needs triton and a visible CUDA device; ``"cpu"`` needs
        triton and ``TRITON_INTERPRET=1``, set before the kernel modules were first
        imported.

    Returns
    -------
    bool
    """
    if not is_available():
        return False
    device_type = getattr(device, "type", None) or str(device).split(":", 1)[0]
    if device_type == "cpu":
        return interpret_mode() and _loaded_kernels_interpreted() is not False
    if device_type == "cuda":
        import torch

        return bool(torch.cuda.is_available())
    return False


def _loaded_kernels_interpreted() -> bool | None:
    """Whether the already-imported kernels were defined in interpret mode (None: not imported).

    triton fixes compiled vs interpreted when a kernel is defined, so setting
    ``TRITON_INTERPRET`` after the kernel modules were imported has no effect.
    """
    module = sys.modules.get(f"{__name__}.cosine_matrix")
    if module is None:
        return None
    return type(module._cosine_matrix_kernel).__name__ == "InterpretedFunction"


def get_launcher(name: str) -> Callable[..., Any]:
    """The launcher function of op ``name`` (imports triton and torch on first use).

    Parameters
    ----------
    name : str
        One of :data:`OP_NAMES`.

    Returns
    -------
    callable
    """
    if name not in OP_NAMES:
        raise ValueError(f"name: unknown triton op {name!r}; expected one of {OP_NAMES}")
    if not is_available():
        missing = [pkg for pkg in ("triton", "torch") if importlib.util.find_spec(pkg) is None]
        raise RuntimeError(f"{name}: the triton backend needs {' and '.join(missing)} installed")
    module = importlib.import_module(f"{__name__}.{module_of(name)}")
    return getattr(module, name)


def __getattr__(name: str) -> Any:
    if name not in OP_NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    # Loading any kernel module may load the others (they share the norm helper), and
    # each first load binds the package attribute to the submodule; rebind every loaded
    # name to its launcher so the package attributes are always the functions.
    launcher = get_launcher(name)
    package = globals()
    for op in OP_NAMES:
        module = sys.modules.get(f"{__name__}.{module_of(op)}")
        if module is not None:
            package[op] = getattr(module, op)
    return launcher


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(OP_NAMES))
