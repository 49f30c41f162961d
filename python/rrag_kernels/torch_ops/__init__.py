"""The ops as plain torch formulations: cuBLAS (or the CPU BLAS) underneath, our contract on top.

For CUDA tensors a plain-torch formulation is the baseline our Triton kernels must beat, and
where they do not (``results/gpu.csv``) it is what ``backend="auto"`` runs
(:mod:`rrag_kernels.ops` picks per op: ``rrag info`` shows the choice). It keeps the
contract of every backend: results within the float32 tolerance of the float64 reference,
zero vectors give 0, exact tie order (lower index first) for the top-k ops, no (Q, N)
matrix for ``topk_cosine`` (bounded blocks), the same outputs and padding.

One file per kernel: ``<k>.py`` holds the launcher ``<k>`` (``common.py``: helpers the Triton
launchers share). Launchers receive already-validated, contiguous float32 tensors on one
device (CPU or CUDA) and return tensors there; validation lives in ``rrag_kernels.ops``.
Importing this package never imports torch; the launchers load on first use
(:func:`get_launcher`).

One property it keeps only on CUDA: identical rows score bitwise identically in the C++ and
the compiled Triton kernels by construction; here every block of a blocked product has one
shape (``common.padded_rows``), so cuBLAS runs one kernel and computes each element alike,
but a CPU BLAS may round an element differently by its position in its tiles (one ulp), and
duplicates of one row then rank by those bits rather than by index. Equal scores always rank
lower index first.

The matrix products follow torch's float32 matmul precision: with TF32 allowed
(``torch.set_float32_matmul_precision("high")``) cuBLAS rounds the inputs to TF32 and the
results leave the contract's tolerance, so ``auto`` then runs the Triton kernels (IEEE dots).
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any, Callable

__all__ = ["OP_NAMES", "get_launcher", "ieee_matmul", "is_available", "module_of"]

#: The launchers; ``triple_reliability`` runs the segmented one with one question.
OP_NAMES: tuple[str, ...] = ("cosine_matrix", "segmented_cosine", "claim_relevance", "topk_cosine", "nli_graph",
                             "triple_reliability_segmented")


def is_available() -> bool:
    """Whether torch can be imported.

    Returns
    -------
    bool
    """
    return importlib.util.find_spec("torch") is not None


def ieee_matmul() -> bool:
    """Whether torch's float32 matrix products on CUDA are IEEE (torch's default), read from
    ``torch.backends.cuda.matmul.fp32_precision`` where torch has it (the legacy getter
    raises once the new API has been used), else ``get_float32_matmul_precision()``.

    Returns
    -------
    bool
    """
    import torch

    precision = getattr(torch.backends.cuda.matmul, "fp32_precision", None)
    if precision is not None:
        return precision in ("ieee", "none")  # "none": unset, torch's IEEE default
    return torch.get_float32_matmul_precision() == "highest"


def get_launcher(name: str) -> Callable[..., Any]:
    """The launcher of op ``name`` (imports torch on first use).

    Parameters
    ----------
    name : str
        One of :data:`OP_NAMES`.

    Returns
    -------
    callable
    """
    if name not in OP_NAMES:
        raise ValueError(f"name: unknown torch op {name!r}; expected one of {OP_NAMES}")
    if not is_available():
        raise RuntimeError(f"{name}: the torch backend needs torch installed (pip install torch)")
    module = importlib.import_module(f"{__name__}.{module_of(name)}")
    return getattr(module, name)


def module_of(name: str) -> str:
    """The kernel file (here and in ``triton_ops``) of launcher ``name``, one of
    :data:`OP_NAMES`: ``triple_reliability_segmented`` lives in ``triple_reliability``."""
    return name.removesuffix("_segmented")
