"""Every Triton kernel compiles for a real NVIDIA target (sm_90), not only in the interpreter.

The suite runs the kernels under ``TRITON_INTERPRET=1``, which skips the compiler's shape
rules; all four ``tl.dot`` kernels once passed here and failed to compile on an H200 (Triton
3.6 wants K >= 16 for a float32 dot). ``tools/triton_compile_check.py`` records each launch in
the interpreter and compiles it down to a cubin with Triton's bundled ptxas, with the
strictest ``tl.dot`` rule of the Triton releases we support. No GPU is needed.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _skip_reason() -> str | None:
    try:
        import triton  # noqa: F401
        from triton.backends.nvidia import compiler  # noqa: F401
    except Exception as exc:  # pragma: no cover - depends on the environment
        return f"triton with its NVIDIA backend is not importable ({exc})"
    bundled = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas"
    if not bundled.exists() and shutil.which("ptxas") is None:  # pragma: no cover
        return "no ptxas (Triton's wheel bundles one)"
    return None


@pytest.mark.skipif(_skip_reason() is not None, reason=str(_skip_reason()))
def test_every_triton_kernel_compiles_for_sm90_under_the_strict_dot_rule():
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "triton_compile_check.py"), "--arch", "90",
                           "--strict-dot"], capture_output=True, text=True, timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    m = re.search(r"(\d+) of (\d+) compiled", out)
    assert m and m.group(1) == m.group(2), out[-4000:]
    # Every kernel module's kernels were launched and compiled (nothing silently unrecorded).
    for kernel in ("_cosine_matrix_kernel", "_cosine_matrix_inv_norm_kernel", "_segmented_cosine_kernel",
                   "_claim_relevance_kernel", "_topk_cosine_kernel", "_topk_cosine_merge_kernel",
                   "_triple_reliability_kernel", "_nli_graph_kernel"):
        assert re.search(rf"^ok   sm_90 {kernel}\[", out, re.M), f"{kernel} not compiled:\n{out[-4000:]}"


def test_the_strict_rule_rejects_a_float32_dot_with_k_8(tmp_path):
    """The check itself: a K = 8 float32 dot (what the kernels used) is refused under --strict-dot."""
    if _skip_reason() is not None:
        pytest.skip(_skip_reason())
    script = tmp_path / "k8.py"
    script.write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(ROOT / 'tools')!r})\n"
        "import triton, triton.language as tl\n"
        "from triton.backends.compiler import GPUTarget\n"
        "import triton_compile_check as t\n"
        "@triton.jit\n"
        "def k8(a_ptr, b_ptr, o_ptr, BLOCK_K: tl.constexpr):\n"
        "    r = tl.arange(0, 16)\n"
        "    c = tl.arange(0, BLOCK_K)\n"
        "    a = tl.load(a_ptr + r[:, None] * BLOCK_K + c[None, :])\n"
        "    b = tl.load(b_ptr + c[:, None] * 16 + r[None, :])\n"
        "    tl.store(o_ptr + r[:, None] * 16 + r[None, :], tl.dot(a, b, input_precision='ieee'))\n"
        "t._strict_dot()\n"
        "sig = {'a_ptr': '*fp32', 'b_ptr': '*fp32', 'o_ptr': '*fp32', 'BLOCK_K': 'constexpr'}\n"
        "for bk in (8, 16):\n"
        "    try:\n"
        "        triton.compile(triton.compiler.ASTSource(fn=k8, signature=sig, constexprs={'BLOCK_K': bk}),\n"
        "                       target=GPUTarget('cuda', 90, 32))\n"
        "        print(bk, 'compiled')\n"
        "    except Exception as exc:\n"
        "        print(bk, 'refused', 'K >= 16' in str(exc))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}  # compile for real
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "8 refused True" in proc.stdout and "16 compiled" in proc.stdout, proc.stdout + proc.stderr[-2000:]
