"""Suite-wide fixtures: seeding, the ``backend`` fixture, GPU skips, thread/SIMD restore.

Triton kernels run on CPU tensors under ``TRITON_INTERPRET=1``. ``@triton.jit`` decides
at decoration time whether a kernel is interpreted, so the variable has to be set before
anything imports ``triton`` (``rrag_kernels`` imports its Triton ops lazily or eagerly; we
do not rely on which). We set it here, at conftest import, unless the user chose a value
or a CUDA device is present (then the real GPU path is what should be tested).
"""

from __future__ import annotations

import os
import random
import sys
import zlib

import numpy as np
import pytest


def _probe_cuda() -> bool:
    # Importing torch does not import triton (checked for torch 2.13), so this is safe
    # before the environment variable is decided.
    try:
        import torch
    except Exception:
        return False
    try:
        return bool(torch.cuda.is_available())
    except Exception:
        return False


CUDA_AVAILABLE = _probe_cuda()
if "TRITON_INTERPRET" not in os.environ and not CUDA_AVAILABLE:
    # triton reads the variable lazily, but each @triton.jit reads it when it decorates:
    # Triton ops imported before this point would stay compiled-mode kernels.
    if any(name.startswith("rrag_kernels.triton_ops") for name in sys.modules):
        raise RuntimeError("rrag_kernels.triton_ops was imported before tests/conftest.py set TRITON_INTERPRET=1")
    os.environ["TRITON_INTERPRET"] = "1"
TRITON_INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"

# Make ``import helpers`` work from every test module whatever the rootdir/import mode.
sys.path.insert(0, os.path.dirname(__file__))

# RRAG_TEST_BACKENDS=reference,cpp runs those alone (tools/sanitize.sh: the torch and Triton
# backends run none of our native code).
BACKENDS = tuple(b for b in ("reference", "cpp", "triton", "torch")
                 if b in os.environ.get("RRAG_TEST_BACKENDS", "reference,cpp,triton,torch").split(","))

# The Triton interpreter executes each program instance in NumPy: ~0.5 s for a 129 x 127
# x 385 cosine matrix. Tests whose "large" case would take minutes use this many rows for
# triton instead.
TRITON_MAX_ROWS = 200


def _import_error(modname: str) -> str | None:
    try:
        __import__(modname)
    except Exception as exc:  # ImportError, or a broken build raising something else
        return f"{type(exc).__name__}: {exc}"
    return None


def cpp_skip_reason() -> str | None:
    err = _import_error("rrag_kernels._core")
    return None if err is None else f"cpp backend unavailable: rrag_kernels._core cannot be imported ({err})"


def torch_skip_reason() -> str | None:
    err = _import_error("torch")
    return None if err is None else f"torch backend unavailable: torch cannot be imported ({err})"


def triton_skip_reason() -> str | None:
    for mod in ("torch", "triton"):
        err = _import_error(mod)
        if err is not None:
            return f"triton backend unavailable: {mod} cannot be imported ({err})"
    if not (TRITON_INTERPRET or CUDA_AVAILABLE):
        return (
            "triton backend unavailable: no CUDA device and TRITON_INTERPRET is not '1' "
            f"(it is {os.environ.get('TRITON_INTERPRET')!r}, set by the user)"
        )
    return None


def pytest_report_header(config):
    lines = [
        f"rrag_kernels tests: CUDA={'yes' if CUDA_AVAILABLE else 'no'}, "
        f"TRITON_INTERPRET={os.environ.get('TRITON_INTERPRET')!r}, "
        f"seed base RRAG_TEST_SEED={os.environ.get('RRAG_TEST_SEED', '0')}",
    ]
    reason = cpp_skip_reason()
    if reason is None:
        from rrag_kernels import _core

        try:
            lines.append(f"_core SIMD levels {list(_core.available_simd_levels())}, active {_core.simd_level()}")
        except Exception as exc:  # the header must never break collection
            lines.append(f"_core imported, SIMD query failed: {exc}")
    else:
        lines.append(reason)
    reason = triton_skip_reason()
    if reason is not None:
        lines.append(reason)
    return lines


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "interp_heavy: a case too slow for the Triton interpreter (seconds per call); the "
        "triton backend skips it under TRITON_INTERPRET=1 (unless RRAG_TEST_INTERP_HEAVY=1: "
        "make test-all) and runs it on CUDA",
    )
    config.addinivalue_line(
        "markers",
        "bitwise_ties: asserts bitwise-equal results for identical rows, which the C++ and the "
        "compiled Triton kernels give (one FMA chain per output element) but a BLAS matmul need "
        "not: it may round an element differently by its position in the tile (OpenBLAS on AMD "
        "Zen 3, oneDNN, cuBLAS). So the torch backend skips it, and the triton backend under "
        "TRITON_INTERPRET=1, whose tl.dot is NumPy's matmul (benchmarks/gpu_check.py checks it on CUDA)",
    )


def pytest_collection_modifyitems(config, items):
    if CUDA_AVAILABLE:
        return
    skip_gpu = pytest.mark.skip(reason="needs a CUDA device; torch.cuda.is_available() is False here")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)


# --------------------------------------------------------------------------- hypothesis profiles

# tests/test_properties.py. "ci" (the default): a fixed, small budget, derandomized so CI is
# deterministic. "thorough": random, >= 100,000 examples over the file (tests/run_properties.py
# prints them per op). Pick one with RRAG_HYPOTHESIS_PROFILE=thorough or
# --hypothesis-profile=thorough; RRAG_HYPOTHESIS_MAX_EXAMPLES overrides the examples per test.
# No example database: nothing is written into the repository.
try:
    from hypothesis import HealthCheck
    from hypothesis import settings as _hyp_settings
except ImportError:  # the property tests skip themselves
    pass
else:
    _hyp_common = dict(database=None, deadline=None, print_blob=True,
                       suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                              HealthCheck.data_too_large, HealthCheck.filter_too_much])
    _hyp_n = os.environ.get("RRAG_HYPOTHESIS_MAX_EXAMPLES", "").strip()
    _hyp_settings.register_profile("ci", max_examples=int(_hyp_n or 10), derandomize=True, **_hyp_common)
    _hyp_settings.register_profile("thorough", max_examples=int(_hyp_n or 700), **_hyp_common)
    _hyp_settings.load_profile(os.environ.get("RRAG_HYPOTHESIS_PROFILE", "ci"))


# --------------------------------------------------------------------------- seeding


@pytest.fixture(autouse=True)
def seed(request) -> int:
    """Seed numpy's, Python's and torch's global generators per test.

    The seed is a stable hash of the test id (plus ``RRAG_TEST_SEED``), so a failure
    reproduces by rerunning that one test, and it is printed in the failure report.
    """
    base = int(os.environ.get("RRAG_TEST_SEED", "0"))
    value = (zlib.crc32(request.node.nodeid.encode()) + base) % (2**32)
    np.random.seed(value)
    random.seed(value)
    if "torch" in sys.modules:
        sys.modules["torch"].manual_seed(value)
    request.node.add_report_section("setup", "seed", f"seed={value} (RRAG_TEST_SEED={base})")
    return value


@pytest.fixture
def rng(seed) -> np.random.Generator:
    """A fresh generator for this test's inputs."""
    return np.random.default_rng(seed)


# --------------------------------------------------------------------------- backends


@pytest.fixture(params=BACKENDS)
def backend(request) -> str:
    """One test body, every backend; unavailable backends skip with the reason."""
    name = request.param
    reason = {"reference": None, "cpp": cpp_skip_reason(), "triton": triton_skip_reason(),
              "torch": torch_skip_reason()}[name]
    if reason is not None:
        pytest.skip(reason)
    if name == "triton" and TRITON_INTERPRET and request.node.get_closest_marker("interp_heavy") \
            and os.environ.get("RRAG_TEST_INTERP_HEAVY") != "1":
        pytest.skip("interp_heavy case: seconds to minutes in the Triton interpreter; make test-all runs it "
                    "(RRAG_TEST_INTERP_HEAVY=1), smaller cases cover this backend here")
    if request.node.get_closest_marker("bitwise_ties") and (name == "torch" or (name == "triton" and TRITON_INTERPRET)):
        pytest.skip("bitwise_ties: bitwise ties of identical rows are a property of our kernels; a BLAS matmul "
                    "(the torch formulation, the interpreter's tl.dot) may round a row by its place in the tile")
    return name


@pytest.fixture
def interpreted(backend) -> bool:
    """Whether this backend runs in the Triton interpreter (seconds per launch)."""
    return backend == "triton" and TRITON_INTERPRET


@pytest.fixture
def max_rows(backend) -> int:
    """An upper limit on corpus/segment rows for this backend's "large" cases."""
    return TRITON_MAX_ROWS if backend == "triton" and TRITON_INTERPRET else 1_000_000


@pytest.fixture
def core():
    """``rrag_kernels._core``, or a skip when the extension is not built."""
    reason = cpp_skip_reason()
    if reason is not None:
        pytest.skip(reason)
    from rrag_kernels import _core

    return _core


@pytest.fixture
def restore_threads_and_simd(core):
    """Put the thread count and SIMD level back as they were, whatever the test does.

    Meanwhile every kernel uses all its threads on any input (``_set_min_work_scale(0)``):
    the test inputs are small, and below the default work thresholds the kernels would stay
    on the calling thread, so thread-count tests would never reach the pool.
    """
    import rrag_kernels

    threads, level = rrag_kernels.get_num_threads(), core.simd_level()
    core._set_min_work_scale(0.0)
    yield core
    core._set_min_work_scale(1.0)
    rrag_kernels.set_num_threads(threads)
    core.set_simd_level(level)


@pytest.fixture
def torch():
    """The torch module, or a skip."""
    return pytest.importorskip("torch", reason="torch is not importable", exc_type=ImportError)


@pytest.fixture(scope="module")
def ray_local():
    """One local Ray per test module: 2 CPUs, no dashboard, workers quiet; the workers import
    the source tree and tests/ (test doubles are pickled by reference)."""
    import logging
    from pathlib import Path

    ray = pytest.importorskip("ray", reason="ray[data] is not installed (pip install 'rrag_kernels[ray]')")
    pytest.importorskip("ray.data")
    if ray.is_initialized():
        pytest.skip("a Ray runtime is already running in this process")
    root = Path(__file__).resolve().parents[1]
    path = os.pathsep.join([str(root / "python"), str(root / "tests")])
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level=logging.WARNING,
             runtime_env={"env_vars": {"PYTHONPATH": path}})
    ctx = ray.data.DataContext.get_current()
    bars, ctx.enable_progress_bars = ctx.enable_progress_bars, False
    try:
        yield ray
    finally:
        ctx.enable_progress_bars = bars
        ray.shutdown()
