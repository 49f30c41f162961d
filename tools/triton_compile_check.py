"""Compile every Triton kernel of ``rrag_kernels.triton_ops`` for NVIDIA targets, without a GPU.

Usage::

    python tools/triton_compile_check.py [--arch 90 80] [--strict-dot]

The interpreter (``TRITON_INTERPRET=1``, how the suite runs the kernels on the CPU) does not
apply the compiler's shape rules: Triton <= 3.6 rejects a float32 ``tl.dot`` whose K is below
16, which the interpreter and Triton 3.9 accept, and every dot kernel once failed to compile
on a real H200 for that reason. This check closes the gap:

1. a child process runs each op with ``backend="triton"`` on small CPU tensors under the
   interpreter and records every launch (kernel, argument types, constexpr values,
   ``num_warps``);
2. this process compiles each recorded launch with the installed Triton for
   ``GPUTarget("cuda", arch, 32)`` down to a cubin (ptxas ships in Triton's wheel).

``--strict-dot`` applies the strictest ``tl.dot`` size rule of the Triton releases we support
(K >= 16 for 16- and 32-bit inputs, as in Triton 3.6) whatever the installed version's rule.
Each compiled kernel's registers and stack bytes are read from its cubin (``cuobjdump
--dump-resource-usage``, shipped in Triton's wheel): a kernel that spills registers fails the
check. The line also says whether its PTX uses tensor cores (``wgmma`` on sm_90, ``mma.sync``)
or none (the IEEE float32 dots run on the FMA units).
Exit status 0 when every launch compiles without spills, 1 otherwise; one line per kernel
and target.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _record() -> list[dict]:
    """Child side (TRITON_INTERPRET=1): launches of every Triton kernel on sample inputs."""
    import inspect

    import numpy as np
    import torch
    from triton.runtime.interpreter import InterpretedFunction

    import rrag_kernels.ops as ops

    records: list[dict] = []
    original = InterpretedFunction.run

    def recording(self, *args, grid, warmup, **kwargs):
        fn = self.fn
        sig = inspect.signature(fn).parameters
        names = list(sig)
        bound = dict(zip(names, args)) | {k: v for k, v in kwargs.items() if k in names}
        params = {}
        for name in names:
            value = bound.get(name)
            if isinstance(value, torch.Tensor):
                params[name] = {"tensor": str(value.dtype).replace("torch.", "")}
            elif isinstance(value, bool):
                params[name] = {"bool": value}
            elif isinstance(value, int):
                params[name] = {"int": value}
            elif isinstance(value, float):
                params[name] = {"float": value}
            elif value is None:
                params[name] = {"none": None}
            else:
                params[name] = {"other": repr(value)}
        constexprs = [name for name in names if "constexpr" in str(sig[name].annotation)]
        records.append({"module": fn.__module__, "name": fn.__name__, "params": params,
                        "constexprs": constexprs, "num_warps": int(kwargs.get("num_warps", 4))})
        return original(self, *args, grid=grid, warmup=warmup, **kwargs)

    InterpretedFunction.run = recording
    rng = np.random.default_rng(0)

    def t(a):
        return torch.from_numpy(np.ascontiguousarray(a))

    def emb(n, d):
        return t(rng.standard_normal((n, d)).astype(np.float32))

    kw = {"backend": "triton"}
    ops.cosine_matrix(emb(5, 24), emb(7, 24), **kw)
    # The fused kernel's row widths (rows x warps change with d), then the looped kernel's.
    for d in (24, 384, 1024, 4096, 8193):
        ops.segmented_cosine(emb(3, d), emb(6, d), t(np.array([0, 2, 4, 6])), **kw)
    for sim, clip in ((None, True), (t(rng.random(6).astype(np.float32)), False)):
        ops.claim_relevance(emb(3, 24), emb(6, 24), t(np.array([0, 2, 4, 6])), emb(5, 24),
                            t(np.array([0, 2, 3, 5])), query_doc_sim=sim, clip=clip, **kw)
    for k in (3, 40, 300):  # in-register paths of two list sizes, and the large-k path
        ops.topk_cosine(emb(4, 24), emb(400, 24), k, **kw)
    for used in (None, t(rng.random((4, 30)) < 0.2)):
        ops.triple_reliability(emb(4, 24), emb(30, 24), t(rng.random(30).astype(np.float32) * 10), k=5,
                               alpha=0.4, used=used, **kw)
    probs = rng.random((2, 5, 3)).astype(np.float32)
    probs /= probs.sum(2, keepdims=True)
    for reduce in ("max", "mean"):
        ops.nli_graph(t(np.array([0, 1, 2, 3, 4])), t(np.array([5, 6, 7, 8, 9])), t(probs[0]), t(probs[1]), 10,
                      reduce=reduce, **kw)
    return records


_TORCH_TO_TRITON = {"float32": "*fp32", "float64": "*fp64", "int64": "*i64", "int32": "*i32", "int8": "*i8",
                    "uint8": "*u8", "bool": "*i1", "float16": "*fp16", "bfloat16": "*bf16"}


def _strict_dot() -> None:
    """Make the installed NVIDIA backend apply Triton 3.6's tl.dot size rule."""
    from triton.backends.nvidia import compiler as nv

    def min_dot_size(target):
        def check(lhs_type, rhs_type):
            return (1, 1, 32) if lhs_type.scalar.primitive_bitwidth == 8 else (1, 1, 16)
        return check

    nv.min_dot_size = min_dot_size


def compile_records(records: list[dict], arches: list[int]) -> list[tuple[str, int, bool, str]]:
    import importlib

    import triton
    from triton.backends.compiler import GPUTarget

    results = []
    seen = set()
    for rec in records:
        fn = getattr(importlib.import_module(rec["module"]), rec["name"])
        signature, constexprs = {}, {}
        for name, p in rec["params"].items():
            if name in rec["constexprs"]:
                signature[name] = "constexpr"
                constexprs[name] = next(iter(p.values()))
            elif "tensor" in p:
                signature[name] = _TORCH_TO_TRITON[p["tensor"]]
            elif "bool" in p:
                signature[name] = "i1"
            elif "int" in p:
                signature[name] = "i64" if not -2**31 <= p["int"] < 2**31 else "i32"
            elif "float" in p:
                signature[name] = "fp32"
            elif "none" in p:
                signature[name] = "constexpr"
                constexprs[name] = None
            else:
                raise TypeError(f"{rec['name']}: cannot type argument {name}: {p}")
        # One compile per specialisation: launches that differ only in runtime values share it.
        key = json.dumps([rec["module"], rec["name"], signature, constexprs, rec["num_warps"]], sort_keys=True)
        if key in seen:
            continue
        seen.add(key)
        label = rec["name"] + "[" + ", ".join(f"{k}={v}" for k, v in constexprs.items() if v is not None) + "]"
        for arch in arches:
            try:
                src = triton.compiler.ASTSource(fn=fn, signature=signature, constexprs=constexprs)
                kernel = triton.compile(src, target=GPUTarget("cuda", arch, 32),
                                        options={"num_warps": rec["num_warps"]})
                regs, stack = _resource_usage(kernel.asm["cubin"])
                mma = "wgmma" if "wgmma" in kernel.asm["ptx"] else "mma.sync" if "mma.sync" in kernel.asm["ptx"] \
                    else "no tensor-core mma"
                note = f"shared {kernel.metadata.shared} B, {regs} registers, {stack} B spilled, {mma}"
                results.append((label, arch, stack == 0, note if stack == 0 else f"spills registers: {note}"))
            except Exception as exc:  # reported per launch; the others are still compiled
                text = f"{type(exc).__name__}: {exc}".replace("\n", " | ")
                results.append((label, arch, False, text[-600:]))
    return results


def _resource_usage(cubin: bytes) -> tuple[int, int]:
    """(registers per thread, stack bytes) of a cubin, read with the cuobjdump in Triton's
    wheel; stack bytes above 0 are spilled registers."""
    import re
    import tempfile

    from triton.backends.nvidia import compiler as nv

    tool = Path(nv.__file__).parent / "bin" / "cuobjdump"
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "kernel.cubin"
        path.write_bytes(cubin)
        text = subprocess.run([str(tool), "--dump-resource-usage", str(path)], capture_output=True, text=True,
                              check=True).stdout
    found = re.search(r"REG:(\d+) STACK:(\d+)", text)
    if found is None:
        raise RuntimeError(f"cuobjdump printed no resource usage: {text[-300:]}")
    return int(found[1]), int(found[2])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python tools/triton_compile_check.py",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--arch", type=int, nargs="+", default=[90], help="compute capabilities (default 90)")
    parser.add_argument("--strict-dot", action="store_true", help="Triton 3.6's tl.dot rule: K >= 16")
    parser.add_argument("--record", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.record:
        json.dump(_record(), sys.stdout)
        return 0
    # This process compiles: @triton.jit must make real JIT functions here, so the interpreter
    # switch (set by the test suite, inherited by its children) goes before triton is imported.
    os.environ.pop("TRITON_INTERPRET", None)
    if "triton" in sys.modules:
        parser.error("import this tool's main() before triton, or run it as a script")
    env = dict(os.environ, TRITON_INTERPRET="1")
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "python")] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    child = subprocess.run([sys.executable, __file__, "--record"], env=env, capture_output=True, text=True)
    if child.returncode != 0:
        print(child.stderr[-3000:], file=sys.stderr)
        return 1
    records = json.loads(child.stdout)
    if args.strict_dot:
        _strict_dot()
    import triton

    kernels = {r["name"] for r in records}
    print(f"triton {triton.__version__}: {len(records)} launches of {len(kernels)} kernels recorded "
          f"({', '.join(sorted(kernels))})" + ("; strict tl.dot rule (K >= 16)" if args.strict_dot else ""))
    results = compile_records(records, args.arch)
    failed = 0
    for label, arch, ok, note in results:
        failed += not ok
        print(f"{'ok  ' if ok else 'FAIL'} sm_{arch} {label}: {note}")
    print(f"{len(results) - failed} of {len(results)} compiled")
    return 1 if failed else 0


if __name__ == "__main__":
    if "--record" in sys.argv:
        sys.path.insert(0, str(ROOT / "python"))
    raise SystemExit(main())
