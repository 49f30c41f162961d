"""Runtime configuration: what was built, what this machine can run, how many threads."""

from __future__ import annotations

import importlib.util
import os
import platform
from typing import Any

from .ops import check_int

# The compiled module is loaded in one place, ops/_dispatch.py; this module reports on it
# and sets its threads.
from .ops._dispatch import CUDA_AUTO, core_module, cuda_choice

__version__ = "0.1.0"


#: The largest value :func:`set_num_threads` accepts (the C++ pool's cap, re-checked there).
MAX_THREADS = 1024


def set_num_threads(n: int) -> None:
    """Set the number of threads the C++ kernels use (results do not depend on it).

    The kernels run on their own worker pool (see the README's "Threads" section): small calls
    stay on the calling thread, idle workers sleep after ~50 microseconds, and work is handed
    out in blocks so that a preempted worker never holds a call up for long. Threads start on
    first use.

    Parameters
    ----------
    n : int, 1 <= n <= MAX_THREADS (1024)
    """
    n = check_int(n, "n", minimum=1, maximum=MAX_THREADS, maximum_is="MAX_THREADS")
    core = core_module()
    if core is None:
        raise RuntimeError("rrag_kernels._core is not built: there are no C++ threads to set")
    core.set_num_threads(n)


def get_num_threads() -> int:
    """Threads the C++ kernels use (1 when the compiled module is missing)."""
    core = core_module()
    return core.get_num_threads() if core is not None else 1


def _triton_status() -> tuple[bool, bool]:
    """(triton importable, a CUDA device usable by torch). Imports torch only if installed."""
    triton_ok = importlib.util.find_spec("triton") is not None and importlib.util.find_spec("torch") is not None
    cuda_ok = False
    if importlib.util.find_spec("torch") is not None:
        try:
            import torch

            cuda_ok = bool(torch.cuda.is_available())
        except Exception:  # a broken torch install must not break show_config
            cuda_ok = False
    return triton_ok, cuda_ok


def show_config() -> dict[str, Any]:
    """Describe the build and the machine.

    Returns
    -------
    dict
        version, compiler, simd_level, simd_levels_available, threads, max_threads,
        memory_budget, native_build, gemm, triton_available, triton_interpret,
        cuda_available, cuda_auto (what ``backend="auto"`` runs for CUDA tensors, per op:
        "triton" or "torch"; see ``ops._dispatch.CUDA_AUTO``), python, platform, numpy.
    """
    import numpy as np

    core = core_module()
    triton_ok, cuda_ok = _triton_status()
    cfg: dict[str, Any] = {
        "version": __version__,
        "core_built": core is not None,
        "compiler": core.compiler() if core else None,
        "simd_level": core.simd_level() if core else None,
        "simd_levels_available": list(core.available_simd_levels()) if core else [],
        "threads": core.get_num_threads() if core else None,
        "max_threads": core.max_threads() if core else None,
        "memory_budget": core.memory_budget() if core else None,
        "native_build": core.native_build() if core else None,
        "gemm": f"built-in register-blocked micro-kernel ({core.simd_level()})" if core else None,
        "triton_available": triton_ok,
        "triton_interpret": os.environ.get("TRITON_INTERPRET") == "1",
        "cuda_available": cuda_ok,
        "cuda_auto": {op: cuda_choice(op) for op in CUDA_AUTO} if importlib.util.find_spec("torch") else None,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "numpy": np.__version__,
    }
    return cfg
