"""Backend planning and array conversion for the public ops.

Output type follows input: numpy in -> numpy out, torch CPU in -> torch CPU out, CUDA in
-> CUDA out. ``backend=None``/"auto" sends CPU data to C++ and CUDA tensors to the faster of
our Triton kernel and the plain-torch formulation for that op (:data:`CUDA_AUTO`, from the
device measurements; :func:`cuda_choice`); a fallback (no compiled module, no Triton) logs a
warning once. This is the one module that imports the compiled ``rrag_kernels._core``.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._validation import as_buffer, check_finite, is_torch_tensor

logger = logging.getLogger("rrag_kernels")

BACKENDS = ("auto", "reference", "cpp", "triton", "torch")
_warned: set[str] = set()

#: What ``backend="auto"`` runs for CUDA tensors, per op: "triton" (our kernel) or "torch" (the
#: plain-torch formulation of ``rrag_kernels.torch_ops``, cuBLAS underneath), whichever
#: ``benchmarks/gpu_check.py`` measured faster on the device (``results/gpu.csv``). Last
#: measured on an H200 (2026-12-04): every Triton kernel at 0.15-0.64x the torch baseline,
#: so every op runs its torch formulation until a kernel is measured faster (issue 25). The
#: one-pass segmented_cosine and claim_relevance kernels written since are untimed on a
#: device (and Triton there is 3.6, here 3.9): ``benchmarks/device_check.sh`` times them and
#: prints the table its rows call for. ``nli_graph`` was not timed; its torch formulation is
#: the baseline itself.
CUDA_AUTO = {
    "cosine_matrix": "torch",
    "segmented_cosine": "torch",
    "claim_relevance": "torch",
    "topk_cosine": "torch",
    "nli_graph": "torch",
    "triple_reliability": "torch",
    "triple_reliability_segmented": "torch",
}
#: The ops whose torch formulation is a float32 matrix product: with torch's TF32 allowed
#: their cuBLAS products leave the contract's tolerance, so ``auto`` runs Triton (IEEE dots).
MATMUL_OPS = frozenset({"cosine_matrix", "claim_relevance", "topk_cosine", "triple_reliability",
                        "triple_reliability_segmented"})


def cuda_choice(op: str) -> str:
    """The backend ``auto`` runs for CUDA tensors of ``op``: "triton" or "torch".

    :data:`CUDA_AUTO`, except that a matrix-product op runs Triton while torch allows TF32
    for float32 products (:func:`rrag_kernels.torch_ops.ieee_matmul`; TF32 would break the
    accuracy contract), and that without Triton every op runs its torch formulation.

    Parameters
    ----------
    op : str
        A key of :data:`CUDA_AUTO`.

    Returns
    -------
    str
    """
    from .. import torch_ops, triton_ops

    choice = CUDA_AUTO[op]
    tf32 = op in MATMUL_OPS and not torch_ops.ieee_matmul()
    if tf32:
        choice = "triton"
    if choice == "triton" and not triton_ops.is_available():
        choice = "torch"
        if tf32:
            warn_once("auto-tf32", "torch allows TF32 for float32 matrix products and Triton is not installed: "
                                   "the CUDA ops run cuBLAS with TF32, outside the float32 accuracy contract")
    return choice


def warn_once(key: str, message: str) -> None:
    """Log ``message`` the first time ``key`` is seen in this process."""
    if key not in _warned:
        _warned.add(key)
        logger.warning(message)


def core_module():
    """The compiled module, or None when it cannot be imported."""
    try:
        from .. import _core
    except ImportError:
        return None
    return _core


@dataclass(frozen=True)
class Plan:
    """Where an op runs and what it returns."""

    backend: str  # "reference" | "cpp" | "triton"
    output: str  # "numpy" | "torch"
    device: Any  # torch.device for torch outputs, None for numpy


def triton_device():
    """Where Triton kernels run: CUDA when present, else the CPU under TRITON_INTERPRET=1."""
    import torch

    if os.environ.get("TRITON_INTERPRET") == "1":
        return torch.device("cpu")
    if torch.cuda.is_available():
        return torch.device("cuda")
    raise RuntimeError(
        "backend='triton' needs a CUDA device, or TRITON_INTERPRET=1 set before triton is "
        "imported to run the kernels on the CPU in Triton's interpreter"
    )


def plan(arrays: dict[str, Any], backend: str | None, op: str | None = None) -> Plan:
    """The backend and output type for these arguments (None entries are ignored).

    ``op`` (a key of :data:`CUDA_AUTO`) lets ``auto`` pick per op for CUDA tensors; without
    it ``auto`` runs Triton there. ValueError names ``backend`` when it is not one of
    :data:`BACKENDS`, or the first tensor when the tensors sit on different devices;
    RuntimeError when the asked-for backend is not installed.
    """
    if backend is None:
        backend = "auto"
    if not isinstance(backend, str) or backend not in BACKENDS:
        raise ValueError(f"backend: expected one of {BACKENDS} or None, got {backend!r}")
    tensors = [(n, a) for n, a in arrays.items() if a is not None and is_torch_tensor(a)]
    devices = {str(a.device) for _, a in tensors}
    if len(devices) > 1:
        names = ", ".join(f"{n} on {a.device}" for n, a in tensors)
        raise ValueError(f"{tensors[0][0]}: all tensors must be on one device, got {names}")
    output = "torch" if tensors else "numpy"
    device = tensors[0][1].device if tensors else None
    on_cuda = device is not None and device.type == "cuda"
    if backend == "auto":
        if on_cuda:
            from .. import triton_ops

            if op is not None:
                backend = cuda_choice(op)
                if logger.isEnabledFor(logging.DEBUG):
                    logger.debug("%s: backend='auto' runs %s for CUDA tensors", op, backend)
            elif triton_ops.is_available():
                backend = "triton"
            else:
                warn_once("auto-cuda", "Triton is not installed: CUDA tensors are copied to the CPU kernels")
                backend = "cpp"
        else:
            backend = "cpp"
        if backend == "cpp" and core_module() is None:
            warn_once("auto-core", "rrag_kernels._core is not built: falling back to the slow NumPy reference")
            backend = "reference"
    if backend == "cpp" and core_module() is None:
        raise RuntimeError("backend='cpp': the compiled module rrag_kernels._core cannot be imported")
    if backend == "triton":
        from .. import triton_ops

        if not triton_ops.is_available():
            raise RuntimeError("backend='triton': torch and triton must be installed (pip install 'rrag_kernels[gpu]')")
    if backend == "torch":
        from .. import torch_ops

        if not torch_ops.is_available():
            raise RuntimeError("backend='torch': torch must be installed (pip install torch)")
    return Plan(backend, output, device)


def to_numpy32(x: Any) -> np.ndarray:
    """Contiguous float32 numpy copy-or-view of a numpy array or torch tensor."""
    if is_torch_tensor(x):
        x = x.detach()
        if x.device.type != "cpu":
            x = x.cpu()
        return as_buffer(x.to(dtype=_torch().float32).numpy(), np.float32)
    return as_buffer(x, np.float32)


def to_torch32(x: Any, device) -> Any:
    """Contiguous float32 torch tensor on `device`."""
    torch = _torch()
    if not is_torch_tensor(x):
        x = torch.from_numpy(as_buffer(x, x.dtype.newbyteorder("=")))
    return x.detach().to(device=device, dtype=torch.float32).contiguous()


def to_torch_index(x: np.ndarray, device) -> Any:
    """int64 torch tensor on `device` (offsets for the Triton kernels)."""
    torch = _torch()
    return torch.from_numpy(as_buffer(x, np.int64)).to(device)


def numpy_float32(p: Plan, arrays: dict[str, Any], check: bool) -> dict[str, np.ndarray]:
    """The float arguments as contiguous float32 numpy (None entries dropped).

    With ``check`` the reference backend checks finiteness here; the C++ kernels check it
    inside their own pass over the data.
    """
    out = {name: to_numpy32(x) for name, x in arrays.items() if x is not None}
    if check and p.backend == "reference":
        for name, x in out.items():
            check_finite(x, name)
    return out


def torch_device(p: Plan):
    """Where a torch-run plan computes: the tensors' CUDA device; for the torch backend the
    tensors' device (the CPU for numpy input); for Triton on CPU data, :func:`triton_device`."""
    if p.device is not None and p.device.type == "cuda":
        return p.device
    if p.backend == "torch":
        return _torch().device("cpu")
    return triton_device()


def launcher(p: Plan, op: str):
    """The Triton or torch launcher of ``op`` for a plan that runs on torch tensors."""
    if p.backend == "torch":
        from .. import torch_ops

        return torch_ops.get_launcher(op)
    from .. import triton_ops

    return triton_ops.get_launcher(op)


def torch_float32(p: Plan, arrays: dict[str, Any], check: bool) -> tuple[dict[str, Any], Any]:
    """The float arguments as contiguous float32 tensors where the plan computes, and that device."""
    device = torch_device(p)
    out = {name: to_torch32(x, device) for name, x in arrays.items() if x is not None}
    if check:
        for name, x in out.items():
            check_finite(x, name)
    return out, device


def finish(result: Any, p: Plan) -> Any:
    """Convert a numpy array or torch tensor result to the caller's output type."""
    if p.output == "numpy":
        if is_torch_tensor(result):
            return result.detach().cpu().numpy()
        return result
    torch = _torch()
    if not is_torch_tensor(result):
        result = torch.from_numpy(result)
    return result.to(p.device)


def _torch():
    import torch

    return torch


_CPP_NUMPY = Plan("cpp", "numpy", None)
_core_cache: list = []


def core_cached():
    """The compiled module (cached after the first call), or None."""
    if not _core_cache:
        _core_cache.append(core_module())
    return _core_cache[0]


def numpy_cpp(backend: str | None, arrays) -> bool:
    """The common case: numpy inputs (no tensors) and the C++ backend, asked for or auto."""
    if not (backend is None or backend == "auto" or backend == "cpp") or core_cached() is None:
        return False
    for x in arrays:
        if not (x is None or type(x) is np.ndarray or isinstance(x, (list, tuple))):
            return False
    return True


def cpu_plan(arrays: dict[str, Any], backend: str | None, op: str) -> Plan:
    """``plan`` for a kernel with no Triton version: CUDA data goes to the C++ kernel."""
    if numpy_cpp(backend, arrays.values()):
        return _CPP_NUMPY
    if backend in ("triton", "torch"):
        raise ValueError(f"backend: {op} has no {backend.capitalize()} version; use 'cpp', 'reference' or None")
    p = plan(arrays, backend)
    if p.backend in ("triton", "torch"):
        p = Plan("cpp" if core_module() is not None else "reference", p.output, p.device)
    return p
