"""show_config(), set_num_threads / get_num_threads, the SIMD level names, and the CLI."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import rrag_kernels as rk

REQUIRED_KEYS = {
    "version", "compiler", "simd_level", "simd_levels_available", "threads",
    "triton_available", "cuda_available", "native_build", "gemm",
}
SIMD_NAMES = {"scalar", "avx2", "avx512"}


def test_version():
    assert isinstance(rk.__version__, str) and rk.__version__
    from importlib import metadata

    try:
        installed = metadata.version("rrag_kernels")
    except metadata.PackageNotFoundError:
        pytest.skip("rrag_kernels is imported from a source tree, not an installed distribution")
    assert installed == rk.__version__


def test_show_config_keys_and_types():
    cfg = rk.show_config()
    assert isinstance(cfg, dict)
    missing = REQUIRED_KEYS - cfg.keys()
    assert not missing, f"show_config() lacks {sorted(missing)}"
    assert cfg["version"] == rk.__version__
    for key in ("triton_available", "cuda_available", "native_build"):
        assert isinstance(cfg[key], bool), f"{key} should be a bool, got {cfg[key]!r}"
    assert isinstance(cfg["compiler"], str)
    assert isinstance(cfg["gemm"], str)
    assert isinstance(cfg["threads"], int) and cfg["threads"] >= 1
    assert cfg["threads"] == rk.get_num_threads()
    levels = list(cfg["simd_levels_available"])
    assert set(levels) <= SIMD_NAMES, f"unknown SIMD level names {levels}"
    assert cfg["simd_level"] in levels


def test_show_config_cuda_matches_torch():
    torch = pytest.importorskip("torch", reason="torch is not importable", exc_type=ImportError)
    assert rk.show_config()["cuda_available"] == bool(torch.cuda.is_available())


def test_show_config_matches_core(core):
    cfg = rk.show_config()
    assert cfg["simd_level"] == core.simd_level()
    assert list(cfg["simd_levels_available"]) == list(core.available_simd_levels())


def test_core_simd_level_names(restore_threads_and_simd):
    core = restore_threads_and_simd
    levels = list(core.available_simd_levels())
    assert "scalar" in levels, "the scalar path must always be available"
    assert set(levels) <= SIMD_NAMES
    for level in levels:
        core.set_simd_level(level)
        assert core.simd_level() == level
        assert rk.show_config()["simd_level"] == level


def test_set_num_threads_is_honoured(restore_threads_and_simd):
    for n in (1, 2, 3, 1):
        rk.set_num_threads(n)
        assert rk.get_num_threads() == n
        assert rk.show_config()["threads"] == n


def test_cli_info():
    env = dict(os.environ)
    result = subprocess.run(
        [sys.executable, "-m", "rrag_kernels", "info"],
        capture_output=True, text=True, timeout=120, env=env,
    )
    assert result.returncode == 0, f"exit {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    assert rk.__version__ in result.stdout
    missing = [key for key in sorted(REQUIRED_KEYS) if key not in result.stdout]
    assert not missing, f"`info` output lacks {missing}:\n{result.stdout}"
