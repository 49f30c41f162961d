"""Input/output types and dispatch: torch tensors in -> torch tensors out, float16/float64
NumPy inputs accepted, the auto backend, and CUDA tensors (GPU only)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from helpers import (
    assert_close,
    check_topk,
    error_bound,
    naive_claim_relevance_f32,
    naive_cosine_matrix_f32,
    naive_segmented_cosine_f32,
    offsets_from_counts,
    random_counts,
    random_rows,
)

import rrag_kernels as rk
from rrag_kernels.reference import claim_relevance_ref, cosine_matrix_ref, segmented_cosine_ref


def _problem(rng, dtype=np.float32, d=33):
    q = 9
    doc_off = offsets_from_counts(random_counts(rng, q, max_count=8, empty_frac=0.2))
    claim_off = offsets_from_counts(random_counts(rng, q, max_count=5, empty_frac=0.2))
    return {
        "a": random_rows(rng, 19, d, dtype=dtype),
        "b": random_rows(rng, 23, d, dtype=dtype),
        "queries": random_rows(rng, q, d, dtype=dtype),
        "docs": random_rows(rng, int(doc_off[-1]), d, dtype=dtype),
        "doc_offsets": doc_off,
        "claims": random_rows(rng, int(claim_off[-1]), d, dtype=dtype),
        "claim_offsets": claim_off,
        "corpus": random_rows(rng, 41, d, dtype=dtype),
    }


def _as32(x):
    """What a kernel sees: the input converted to float32 (exact for float16)."""
    return np.asarray(x, dtype=np.float32)


def _check_all(p, outputs, *, exact_ties: bool):
    """Compare the four kernels' outputs (NumPy) with the reference on ``p``'s values.

    The reference runs on the original inputs (float64 inputs keep their full precision);
    the naive yardstick, like the kernels, sees them converted to float32.
    """
    cm, seg, cr, (ts, ti) = outputs
    ref = cosine_matrix_ref(p["a"], p["b"])
    assert_close(cm, ref, atol=error_bound(naive_cosine_matrix_f32(_as32(p["a"]), _as32(p["b"])), ref),
                 name="cosine_matrix")
    args = (p["queries"], p["docs"], p["doc_offsets"])
    args32 = (_as32(p["queries"]), _as32(p["docs"]), p["doc_offsets"])
    ref = segmented_cosine_ref(*args)
    assert_close(seg, ref, atol=error_bound(naive_segmented_cosine_f32(*args32), ref), name="segmented_cosine")
    ref = claim_relevance_ref(*args, p["claims"], p["claim_offsets"])
    naive = naive_claim_relevance_f32(*args32, _as32(p["claims"]), p["claim_offsets"])
    assert_close(cr, ref, atol=error_bound(naive, ref), name="claim_relevance")
    # check_topk measures the naive error on float32-converted inputs against the
    # reference on what it is given; give it the float32 view so that for float64 inputs
    # the exact index checks use the values the kernel actually ranked.
    check_topk(ts, ti, _as32(p["queries"]), _as32(p["corpus"]), 5, exact_ties=exact_ties)


def _call_all(p, backend, convert=lambda x: x):
    c = {k: (convert(v) if k not in ("doc_offsets", "claim_offsets") else v) for k, v in p.items()}
    return (
        rk.cosine_matrix(c["a"], c["b"], backend=backend),
        rk.segmented_cosine(c["queries"], c["docs"], p["doc_offsets"], backend=backend),
        rk.claim_relevance(c["queries"], c["docs"], p["doc_offsets"], c["claims"], p["claim_offsets"],
                           backend=backend),
        rk.topk_cosine(c["queries"], c["corpus"], 5, backend=backend),
    )


def _flatten(outputs):
    cm, seg, cr, (ts, ti) = outputs
    return [cm, seg, cr, ts, ti]


# --------------------------------------------------------------------------- NumPy dtypes


@pytest.mark.parametrize("dtype", [np.float16, np.float64], ids=["float16", "float64"])
def test_numpy_float16_and_float64_inputs(backend, rng, dtype):
    p = _problem(rng, dtype=dtype)
    outputs = _call_all(p, backend)
    for out, want in zip(_flatten(outputs), [np.float32] * 4 + [np.int64]):
        assert isinstance(out, np.ndarray), type(out)
        assert out.dtype == want, f"got {out.dtype}, expected {want} for {dtype.__name__} input"
    _check_all(p, outputs, exact_ties=backend != "reference")


# --------------------------------------------------------------------------- torch CPU


def test_torch_cpu_tensors_in_torch_out(backend, rng, torch):
    p = _problem(rng)
    outputs = _call_all(p, backend, convert=torch.from_numpy)
    flat = _flatten(outputs)
    for out, want in zip(flat, [torch.float32] * 4 + [torch.int64]):
        assert isinstance(out, torch.Tensor), f"torch in must give torch out, got {type(out)}"
        assert out.device.type == "cpu"
        assert out.dtype == want
    cm, seg, cr, (ts, ti) = outputs
    _check_all(p, (cm.numpy(), seg.numpy(), cr.numpy(), (ts.numpy(), ti.numpy())),
               exact_ties=backend != "reference")


def test_torch_offsets_accepted(backend, rng, torch):
    # Offsets given as int64 tensors alongside tensor embeddings.
    p = _problem(rng)
    off = torch.from_numpy(p["doc_offsets"])
    out = rk.segmented_cosine(torch.from_numpy(p["queries"]), torch.from_numpy(p["docs"]), off, backend=backend)
    assert isinstance(out, torch.Tensor)
    ref = segmented_cosine_ref(p["queries"], p["docs"], p["doc_offsets"])
    naive = naive_segmented_cosine_f32(p["queries"], p["docs"], p["doc_offsets"])
    assert_close(out, ref, atol=error_bound(naive, ref), name="segmented_cosine with tensor offsets")


def test_torch_non_contiguous(backend, rng, torch):
    a = torch.from_numpy(random_rows(rng, 33, 40)).t()  # (40, 33), column-major view
    b = torch.from_numpy(random_rows(rng, 17, 80))[:, ::2]  # strided columns
    b = b[:, :33]
    assert not a.is_contiguous() and not b.is_contiguous()
    out = rk.cosine_matrix(a, b, backend=backend)
    assert isinstance(out, torch.Tensor) and out.shape == (40, 17)
    an, bn = a.numpy(), b.numpy()
    ref = cosine_matrix_ref(an, bn)
    assert_close(out, ref, atol=error_bound(naive_cosine_matrix_f32(an, bn), ref), name="non-contiguous tensors")


# --------------------------------------------------------------------------- auto backend


@pytest.mark.parametrize("choice", [None, "auto"])
def test_auto_backend_numpy(rng, choice):
    p = _problem(rng)
    outputs = _call_all(p, choice)
    assert all(isinstance(o, np.ndarray) for o in _flatten(outputs))
    _check_all(p, outputs, exact_ties=True)


def test_auto_backend_torch_cpu(rng, torch):
    p = _problem(rng)
    outputs = _call_all(p, None, convert=torch.from_numpy)
    assert all(isinstance(o, torch.Tensor) and o.device.type == "cpu" for o in _flatten(outputs))
    cm, seg, cr, (ts, ti) = outputs
    _check_all(p, (cm.numpy(), seg.numpy(), cr.numpy(), (ts.numpy(), ti.numpy())), exact_ties=True)


def test_triton_without_interpreter_or_cuda_names_what_is_missing(tmp_path):
    pytest.importorskip("triton", reason="triton is not importable", exc_type=ImportError)
    # A fresh interpreter with the interpreter off and CUDA hidden.
    script = textwrap.dedent(
        """
        import numpy as np, rrag_kernels as rk
        a = np.ones((2, 3), np.float32)
        try:
            rk.cosine_matrix(a, a, backend="triton")
        except RuntimeError as exc:
            print("RUNTIME_ERROR:", exc)
        else:
            print("NO_ERROR")
        """
    )
    env = dict(os.environ, TRITON_INTERPRET="0", CUDA_VISIBLE_DEVICES="")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env)
    assert result.returncode == 0, result.stderr
    assert "RUNTIME_ERROR:" in result.stdout, result.stdout + result.stderr
    message = result.stdout.split("RUNTIME_ERROR:", 1)[1]
    assert "TRITON_INTERPRET" in message or "CUDA" in message, message


# --------------------------------------------------------------------------- what auto runs on CUDA


def test_cuda_auto_table_names_every_op_with_a_torch_version():
    from rrag_kernels import torch_ops, triton_ops
    from rrag_kernels.ops._dispatch import CUDA_AUTO, MATMUL_OPS

    # ops.triple_reliability runs the segmented launcher with one question.
    assert set(CUDA_AUTO) == set(torch_ops.OP_NAMES) | {"triple_reliability"} == set(triton_ops.OP_NAMES) | {
        "triple_reliability"}
    assert set(CUDA_AUTO.values()) <= {"triton", "torch"} and MATMUL_OPS <= set(CUDA_AUTO)
    for op in torch_ops.OP_NAMES:
        assert callable(torch_ops.get_launcher(op))
        assert not triton_ops.is_available() or callable(triton_ops.get_launcher(op))


def test_cuda_choice_keeps_the_accuracy_contract(torch, monkeypatch):
    """A matrix-product op leaves cuBLAS for Triton's IEEE dots while TF32 is allowed; without
    Triton every op runs its torch formulation."""
    from rrag_kernels import triton_ops
    from rrag_kernels.ops import _dispatch

    monkeypatch.setattr(_dispatch, "CUDA_AUTO", dict.fromkeys(_dispatch.CUDA_AUTO, "torch"))
    before = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("high")
        chosen = {op: _dispatch.cuda_choice(op) for op in _dispatch.CUDA_AUTO}
        if triton_ops.is_available():
            assert {op for op, c in chosen.items() if c == "triton"} == _dispatch.MATMUL_OPS
    finally:
        torch.set_float32_matmul_precision(before)
    assert {_dispatch.cuda_choice(op) for op in _dispatch.CUDA_AUTO} == {"torch"}
    monkeypatch.setattr(_dispatch, "CUDA_AUTO", dict.fromkeys(_dispatch.CUDA_AUTO, "triton"))
    monkeypatch.setattr(triton_ops, "is_available", lambda: False)
    assert {_dispatch.cuda_choice(op) for op in _dispatch.CUDA_AUTO} == {"torch"}


def test_tf32_through_torchs_new_precision_api_is_read_too(torch, monkeypatch):
    """torch's legacy getter raises once the new fp32_precision API is used; the choice and
    rrag info must read the new one instead of failing."""
    from rrag_kernels import show_config, torch_ops, triton_ops
    from rrag_kernels.ops import _dispatch

    if not hasattr(torch.backends.cuda.matmul, "fp32_precision"):
        pytest.skip("this torch has no fp32_precision API")
    monkeypatch.setattr(_dispatch, "CUDA_AUTO", dict.fromkeys(_dispatch.CUDA_AUTO, "torch"))
    before = torch.backends.cuda.matmul.fp32_precision
    try:
        torch.backends.cuda.matmul.fp32_precision = "tf32"
        assert not torch_ops.ieee_matmul()
        chosen = {op: _dispatch.cuda_choice(op) for op in _dispatch.CUDA_AUTO}
        assert set(show_config()["cuda_auto"]) == set(_dispatch.CUDA_AUTO)
    finally:
        torch.backends.cuda.matmul.fp32_precision = before
    assert torch_ops.ieee_matmul()
    if triton_ops.is_available():
        assert {op for op, c in chosen.items() if c == "triton"} == _dispatch.MATMUL_OPS


def test_show_config_says_what_auto_runs_on_cuda(torch):
    from rrag_kernels import show_config
    from rrag_kernels.ops._dispatch import CUDA_AUTO

    assert set(show_config()["cuda_auto"]) == set(CUDA_AUTO)


def test_torch_backend_on_numpy_input_returns_numpy(rng, torch):
    p = _problem(rng)
    outputs = _call_all(p, "torch")
    assert all(isinstance(o, np.ndarray) for o in _flatten(outputs))
    _check_all(p, outputs, exact_ties=True)


def test_ops_without_a_torch_version_say_so():
    keep = np.ones(3, bool)
    with pytest.raises(ValueError, match="backend: gate_stats has no Torch version"):
        rk.ops.gate_stats(keep, np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int8),
                          np.zeros(3, np.int64), backend="torch")


# --------------------------------------------------------------------------- CUDA


@pytest.mark.gpu
def test_cuda_auto_runs_the_chosen_backend(rng, torch, caplog):
    import logging

    p = _problem(rng, d=385)
    with caplog.at_level(logging.DEBUG, logger="rrag_kernels"):
        outputs = _call_all(p, None, convert=lambda x: torch.from_numpy(x).cuda())
    assert "cosine_matrix: backend='auto' runs" in caplog.text
    cm, seg, cr, (ts, ti) = outputs
    _check_all(p, (cm.cpu().numpy(), seg.cpu().numpy(), cr.cpu().numpy(), (ts.cpu().numpy(), ti.cpu().numpy())),
               exact_ties=True)


@pytest.mark.gpu
@pytest.mark.parametrize("choice", [None, "triton", "torch"])
def test_cuda_tensors_in_cuda_out(rng, torch, choice):
    p = _problem(rng, d=385)
    outputs = _call_all(p, choice, convert=lambda x: torch.from_numpy(x).cuda())
    flat = _flatten(outputs)
    for out, want in zip(flat, [torch.float32] * 4 + [torch.int64]):
        assert isinstance(out, torch.Tensor) and out.device.type == "cuda", f"{type(out)} on {getattr(out, 'device', None)}"
        assert out.dtype == want
    cm, seg, cr, ts, ti = (o.cpu().numpy() for o in flat)
    _check_all(p, (cm, seg, cr, (ts, ti)), exact_ties=True)


@pytest.mark.gpu
def test_cuda_large_topk(rng, torch):
    queries = random_rows(rng, 64, 384)
    corpus = random_rows(rng, 100_003, 384, zero_rows=7)
    scores, indices = rk.topk_cosine(torch.from_numpy(queries).cuda(), torch.from_numpy(corpus).cuda(), 10)
    assert scores.device.type == "cuda" and indices.device.type == "cuda"
    check_topk(scores.cpu().numpy(), indices.cpu().numpy(), queries, corpus, 10)
