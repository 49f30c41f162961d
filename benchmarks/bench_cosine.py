"""Benchmarks of the cosine relevance kernels against what a user runs today.

Kernels: cosine_matrix, segmented_cosine, claim_relevance, topk_cosine (issue 2).

Providers per kernel
--------------------
baselines (what a user would write with numpy / torch / faiss today):
  * ``numpy``            normalise + matmul (cosine_matrix)
  * ``numpy-loop``       a Python loop over queries, one small matmul each (ragged kernels)
  * ``numpy-segids``     segment ids + ``np.einsum('ij,ij->i')`` (segmented_cosine)
  * ``numpy-padded``     pad the CSR segments to ``(Q, K, d)`` (a free reshape when every
                         query has the same count) + batched ``np.matmul``
  * ``torch``            ``F.normalize`` + ``mm`` (cosine_matrix)
  * ``torch-bmm``        the padded formulation with ``torch.bmm`` (ragged kernels)
  * ``numpy-chunked`` / ``torch-chunked``  blocks of queries: matmul + argpartition / topk
  * ``faiss-flatip``     ``faiss.IndexFlatIP`` over the normalised corpus (built once,
                         outside the timing; the queries' normalisation is timed)
ours:
  * ``rrag-cpp``         ``rrag_kernels.ops.<kernel>(..., backend="cpp")``, defaults
  * ``rrag-cpp-nocheck`` the same with ``check_finite=False`` (full mode, memory-bound
                         kernels only)
  * ``reference``        the float64 truth (``--quick`` only: it is slow by design)

Every provider's output is checked first (subset against ``rrag_kernels.reference``, whole
output against the first baseline); a wrong or failing provider gets no speed row.

Usage::

    python benchmarks/bench_cosine.py --quick
    python benchmarks/bench_cosine.py --kernel claim_relevance --threads 2
    python benchmarks/bench_cosine.py                       # full sizes, d=384 and 1024
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402
from harness import REFERENCE, RRAG, Case, Provider, assert_close, check_topk  # noqa: E402

KERNELS = ("cosine_matrix", "segmented_cosine", "claim_relevance", "topk_cosine")

#: float32 results of different summation orders differ by ~1e-6 at d=1024; a wrong kernel
#: is off by far more.
ATOL = 2e-5

# Sizes. Full sizes are issue 2's; quick sizes keep the whole run well under a minute.
FULL = {
    "dims": (384, 1024),
    "cosine_matrix": [(2048, 8192)],
    "segmented_cosine": [(10_000, 20), (1_000, 20)],
    "claim_relevance": [(10_000, 10, 8)],
    "topk_cosine": [(4096, 100_000, 10)],
}
QUICK = {
    "dims": (384,),
    "cosine_matrix": [(256, 2048)],
    "segmented_cosine": [(1_000, 20)],
    "claim_relevance": [(1_000, 10, 8)],
    # Q >= 512 so that faiss takes its BLAS path (below ~128000 / d queries it scans).
    "topk_cosine": [(512, 10_000, 10)],
}
#: Kernels whose floor is memory traffic: there a NaN/inf scan could cost a visible share,
#: so full runs also time ``check_finite=False``.
MEMORY_BOUND = ("segmented_cosine", "claim_relevance")
CHECK_QUERIES = {"segmented_cosine": 500, "claim_relevance": 300, "topk_cosine": 32,
                 "cosine_matrix": 64}


# --------------------------------------------------------------------------------------
# Inputs
# --------------------------------------------------------------------------------------


def _counts(rng: np.random.Generator, n: int, mean: int, ragged: bool) -> np.ndarray:
    """Per-query segment sizes: all ``mean``, or Poisson around it with some empty ones."""
    if not ragged:
        return np.full(n, mean, dtype=np.int64)
    counts = rng.poisson(mean, n).astype(np.int64)
    counts[rng.random(n) < 0.05] = 0
    return counts


def _offsets(counts: np.ndarray) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)


def _embeddings(rng: np.random.Generator, n: int, d: int) -> np.ndarray:
    return rng.standard_normal((n, d), dtype=np.float32)


def _near(rng: np.random.Generator, base: np.ndarray) -> np.ndarray:
    """Rows correlated with ``base`` (cosine ~0.7), so scores are O(1), not O(1/sqrt(d))."""
    return base + rng.standard_normal(base.shape, dtype=np.float32)


# --------------------------------------------------------------------------------------
# Baseline building blocks (what a careful numpy / torch user writes)
# --------------------------------------------------------------------------------------


def _inv_norms_np(x: np.ndarray) -> np.ndarray:
    """(..., d) -> (...) float32 inverse norms, 0 for a zero row."""
    n = np.sqrt(np.einsum("...d,...d->...", x, x))
    return np.divide(np.float32(1), n, out=np.zeros_like(n), where=n > 0)


def _normalize_np(x: np.ndarray) -> np.ndarray:
    return x * _inv_norms_np(x)[:, None]


def _pad_np(x: np.ndarray, offsets: np.ndarray):
    """CSR rows -> padded ``(Q, K, d)``; a view when every segment has the same size.

    Returns
    -------
    padded : (Q, K, d), seg : (n,) int64 or None, pos : (n,) int64 or None, counts : (Q,)
    """
    counts = np.diff(offsets)
    q = len(counts)
    k = int(counts.max()) if q else 0
    if q and (counts == k).all():
        return x.reshape(q, k, x.shape[1]), None, None, counts
    seg = np.repeat(np.arange(q), counts)
    pos = np.arange(len(x)) - offsets[:-1][seg]
    padded = np.zeros((q, k, x.shape[1]), dtype=x.dtype)
    padded[seg, pos] = x
    return padded, seg, pos, counts


def _pad_torch(torch, x, offsets: np.ndarray):
    """torch twin of :func:`_pad_np` (``x`` a CPU tensor)."""
    counts = np.diff(offsets)
    q = len(counts)
    k = int(counts.max()) if q else 0
    if q and (counts == k).all():
        return x.view(q, k, x.shape[1]), None, None, counts
    seg = torch.from_numpy(np.repeat(np.arange(q), counts)).to(x.device)
    pos = torch.arange(x.shape[0], device=x.device) - torch.from_numpy(offsets[:-1]).to(x.device)[seg]
    padded = x.new_zeros((q, k, x.shape[1]))
    padded[seg, pos] = x
    return padded, seg, pos, counts


def _inv_norms_torch(torch, x):
    n = torch.linalg.vector_norm(x, dim=-1)
    return torch.where(n > 0, 1.0 / n, torch.zeros_like(n))


# cosine_matrix ------------------------------------------------------------------------


def cosine_matrix_numpy(a, b):
    return _normalize_np(a) @ _normalize_np(b).T


def cosine_matrix_torch(torch, ta, tb):
    f = torch.nn.functional
    return f.normalize(ta, dim=1) @ f.normalize(tb, dim=1).T


# segmented_cosine ---------------------------------------------------------------------


def segmented_numpy_loop(queries, docs, offsets):
    qn, dn = _normalize_np(queries), _normalize_np(docs)
    out = np.empty(docs.shape[0], dtype=np.float32)
    off = offsets.tolist()
    for i in range(len(off) - 1):
        out[off[i]:off[i + 1]] = dn[off[i]:off[i + 1]] @ qn[i]
    return out


def segmented_numpy_segids(queries, docs, offsets):
    seg = np.repeat(np.arange(queries.shape[0]), np.diff(offsets))
    dots = np.einsum("ij,ij->i", docs, queries[seg])
    return dots * _inv_norms_np(docs) * _inv_norms_np(queries)[seg]


def segmented_numpy_padded(queries, docs, offsets):
    p, seg, pos, _ = _pad_np(docs, offsets)
    dots = np.matmul(p, queries[:, :, None])[..., 0]  # (Q, K)
    s = dots * _inv_norms_np(p) * _inv_norms_np(queries)[:, None]
    return s.reshape(-1) if seg is None else s[seg, pos]


def segmented_torch_bmm(torch, tq, td, offsets):
    p, seg, pos, _ = _pad_torch(torch, td, offsets)
    dots = torch.bmm(p, tq[:, :, None])[..., 0]
    s = dots * _inv_norms_torch(torch, p) * _inv_norms_torch(torch, tq)[:, None]
    return s.reshape(-1) if seg is None else s[seg, pos]


# claim_relevance ----------------------------------------------------------------------


def claim_numpy_loop(queries, docs, doc_off, claims, claim_off, sim=None, clip=True):
    qn, dn, cn = _normalize_np(queries), _normalize_np(docs), _normalize_np(claims)
    out = np.zeros(claims.shape[0], dtype=np.float32)
    do, co = doc_off.tolist(), claim_off.tolist()
    for i in range(len(do) - 1):
        dl, dh, cl, ch = do[i], do[i + 1], co[i], co[i + 1]
        if dh == dl or ch == cl:
            continue
        dd = dn[dl:dh]
        s = dd @ qn[i] if sim is None else sim[dl:dh]
        out[cl:ch] = ((cn[cl:ch] @ dd.T) * s).max(axis=1)
    if clip:
        np.maximum(out, 0, out=out)
    return out


def claim_numpy_padded(queries, docs, doc_off, claims, claim_off, sim=None, clip=True):
    dp, dseg, dpos, dcount = _pad_np(docs, doc_off)
    cp, cseg, cpos, _ = _pad_np(claims, claim_off)
    inv_d = _inv_norms_np(dp)  # (Q, Kd); 0 on padding
    if sim is None:
        s = np.matmul(dp, queries[:, :, None])[..., 0] * inv_d * _inv_norms_np(queries)[:, None]
    else:
        s = _pad_np(sim[:, None], doc_off)[0][..., 0]
    # max_d cos(c,d)*s_d = inv|c| * max_d (c.d)(s_d inv|d|): no normalised copies written.
    raw = np.matmul(cp, dp.transpose(0, 2, 1))  # (Q, Kc, Kd)
    raw *= (s * inv_d)[:, None, :]
    if dseg is not None:
        valid = np.arange(dp.shape[1])[None, :] < dcount[:, None]  # (Q, Kd)
        np.copyto(raw, -np.inf, where=~valid[:, None, :])
    r = raw.max(axis=2) if dp.shape[1] else np.zeros(cp.shape[:2], dtype=np.float32)
    with np.errstate(invalid="ignore"):  # -inf * 0 on padding rows, overwritten below
        r *= _inv_norms_np(cp)
    r[dcount == 0] = 0
    out = r.reshape(-1) if cseg is None else r[cseg, cpos]
    if clip:
        np.maximum(out, 0, out=out)
    return out


def claim_torch_bmm(torch, tq, td, doc_off, tc, claim_off, tsim=None, clip=True):
    dp, dseg, _, dcount = _pad_torch(torch, td, doc_off)
    cp, cseg, cpos, _ = _pad_torch(torch, tc, claim_off)
    inv_d = _inv_norms_torch(torch, dp)
    if tsim is None:
        s = torch.bmm(dp, tq[:, :, None])[..., 0] * inv_d * _inv_norms_torch(torch, tq)[:, None]
    else:
        s = _pad_torch(torch, tsim[:, None], doc_off)[0][..., 0]
    raw = torch.bmm(cp, dp.transpose(1, 2))
    raw *= (s * inv_d)[:, None, :]
    if dseg is not None:
        valid = (torch.arange(dp.shape[1], device=dp.device)[None, :]
                 < torch.from_numpy(dcount).to(dp.device)[:, None])
        raw.masked_fill_(~valid[:, None, :], float("-inf"))
    if dp.shape[1]:
        r = raw.amax(dim=2)
    else:
        r = cp.new_zeros(cp.shape[:2])
    r *= _inv_norms_torch(torch, cp)
    r[torch.from_numpy(dcount == 0).to(r.device)] = 0
    out = r.reshape(-1) if cseg is None else r[cseg, cpos]
    return out.clamp_(min=0) if clip else out


# topk_cosine --------------------------------------------------------------------------


def _chunk_rows(n: int, budget_elems: int = 16 << 20) -> int:
    """Query rows per block so that one (rows, n) float32 score block is ~64 MB."""
    return max(1, budget_elems // max(n, 1))


def topk_numpy_chunked(queries, corpus, k):
    qn, cn = _normalize_np(queries), _normalize_np(corpus)
    n = cn.shape[0]
    scores = np.empty((qn.shape[0], k), dtype=np.float32)
    index = np.empty((qn.shape[0], k), dtype=np.int64)
    step = _chunk_rows(n)
    for lo in range(0, qn.shape[0], step):
        s = qn[lo:lo + step] @ cn.T
        part = np.argpartition(s, n - k, axis=1)[:, n - k:] if k < n else np.tile(
            np.arange(n), (s.shape[0], 1))
        # Order by index, then stable sort by descending score: ties -> lower index first.
        part.sort(axis=1)
        ps = np.take_along_axis(s, part, axis=1)
        order = np.argsort(-ps, axis=1, kind="stable")
        scores[lo:lo + step] = np.take_along_axis(ps, order, axis=1)
        index[lo:lo + step] = np.take_along_axis(part, order, axis=1)
    return scores, index


def topk_torch_chunked(torch, tq, tc, k, chunk_elems: int = 16 << 20):
    f = torch.nn.functional
    qn, cn = f.normalize(tq, dim=1), f.normalize(tc, dim=1)
    step = _chunk_rows(cn.shape[0], chunk_elems)
    vals, idx = [], []
    for lo in range(0, qn.shape[0], step):
        v, i = torch.topk(qn[lo:lo + step] @ cn.T, k, dim=1, largest=True, sorted=True)
        vals.append(v)
        idx.append(i)
    return torch.cat(vals), torch.cat(idx)


def topk_faiss(faiss, index, queries, k):
    qn = queries.copy()
    faiss.normalize_L2(qn)
    return index.search(qn, k)


# --------------------------------------------------------------------------------------
# Libraries
# --------------------------------------------------------------------------------------


#: OpenBLAS core types that use the AVX-512 / AVX2 kernels.
_AVX512_CORES = {"SkylakeX", "Cooperlake", "SapphireRapids"}
_AVX2_CORES = _AVX512_CORES | {"Haswell", "Zen", "Excavator"}


def _cpu_flags() -> set[str]:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


_FAISS_CORENAME = """
import ctypes, glob, os, faiss
libs = glob.glob(os.path.join(os.path.dirname(faiss.__file__), "..", "faiss_cpu.libs", "libopenblas*"))
lib = ctypes.CDLL(libs[0])
lib.openblas_get_corename.restype = ctypes.c_char_p
print(lib.openblas_get_corename().decode())
"""


def _faiss_openblas_core(env: dict | None = None) -> str:
    """The kernel set faiss-cpu's bundled OpenBLAS picks here ("" when it cannot be asked).

    Asked in a child process, because OpenBLAS reads OPENBLAS_CORETYPE only when it loads.
    """
    import subprocess

    try:
        res = subprocess.run([sys.executable, "-c", _FAISS_CORENAME], capture_output=True,
                             text=True, timeout=60, env=env)
    except (OSError, subprocess.SubprocessError):
        return ""
    return res.stdout.strip() if res.returncode == 0 else ""


def import_faiss(coretype: str):
    """Import faiss, making its bundled OpenBLAS use this CPU's vector kernels.

    faiss-cpu 1.15.1 bundles OpenBLAS 0.3.15, which does not know recent Xeons (it picks its
    SSE3 "Prescott" kernels on an AVX-512 Emerald Rapids: 2.5x slower sgemm, 5x slower
    ``IndexFlatIP.search``). A baseline handicapped by that would flatter us, so with
    ``coretype="auto"`` a fallback core is replaced by SkylakeX (AVX-512) or Haswell (AVX2)
    through ``OPENBLAS_CORETYPE``, set only while faiss loads (numpy's OpenBLAS is already
    loaded and unaffected). ``"none"`` keeps OpenBLAS's own choice; any other value is passed
    as is. An ``OPENBLAS_CORETYPE`` already in the environment always wins.

    Returns
    -------
    faiss module or None, note : str
    """
    if importlib.util.find_spec("faiss") is None:
        return None, ""
    forced = ""
    if "OPENBLAS_CORETYPE" in os.environ:
        note = f"OPENBLAS_CORETYPE={os.environ['OPENBLAS_CORETYPE']} from the environment"
    elif coretype == "none":
        note = f"faiss OpenBLAS core {_faiss_openblas_core() or '?'} (own detection)"
    elif coretype != "auto":
        forced, note = coretype, f"faiss OpenBLAS core forced to {coretype}"
    else:
        detected = _faiss_openblas_core()
        flags = _cpu_flags()
        want = ("SkylakeX" if {"avx512f", "avx512bw", "avx512dq", "avx512vl"} <= flags
                else "Haswell" if {"avx2", "fma"} <= flags else "")
        good = _AVX512_CORES if want == "SkylakeX" else _AVX2_CORES
        if detected and want and detected not in good:
            forced = want
            note = (f"faiss's OpenBLAS detects this CPU as {detected}; forced to {want} "
                    f"(--faiss-coretype none for its own choice)")
        else:
            note = f"faiss OpenBLAS core {detected or '?'}"
    if forced:
        os.environ["OPENBLAS_CORETYPE"] = forced
    try:
        import faiss
    finally:
        if forced:
            del os.environ["OPENBLAS_CORETYPE"]
    return faiss, note


class Libs:
    """The optional libraries and the rrag ops module, each None when unavailable."""

    def __init__(self, faiss_coretype: str = "auto") -> None:
        self.torch = harness.import_optional("torch")
        self.faiss, self.faiss_note = import_faiss(faiss_coretype)
        self.rrag = harness.import_rrag()
        from rrag_kernels import reference

        self.reference = reference
        try:
            from rrag_kernels import ops
        except Exception as exc:  # not written / not built yet
            self.ops = None
            self.ops_error = harness._short_error(exc)
        else:
            self.ops, self.ops_error = ops, ""




# --------------------------------------------------------------------------------------
# Problems: inputs + work + correctness checks, shared with gpu_check.py
# --------------------------------------------------------------------------------------


@dataclass
class Problem:
    """One kernel's inputs at one shape, its minimal work and its output checks.

    ``args`` are the positional arguments of ``rrag_kernels.ops.<kernel>`` (numpy arrays,
    int64 offsets, ``k``); ``check`` compares an output with the float64 reference on a
    subset, ``compare`` a whole output with another provider's.
    """

    kernel: str
    shape: str
    args: tuple
    bytes: float
    flops: float
    check: Callable[[Any], None]
    compare: Callable[[Any, Any], None]


def _expect_float32(out: Any, what: str) -> np.ndarray:
    arr = harness.to_numpy(out)
    if arr.dtype != np.float32:
        raise AssertionError(f"{what}: dtype {arr.dtype}, expected float32")
    return arr


def _vector_checks(kernel: str, n: int, lo_hi: int, truth: np.ndarray):
    """check/compare for a (n,) float32 output whose first ``lo_hi`` entries have a truth."""

    def check(out):
        arr = _expect_float32(out, kernel)
        if arr.shape != (n,):
            raise AssertionError(f"{kernel}: shape {arr.shape}, expected ({n},)")
        assert_close(arr[:lo_hi], truth, atol=ATOL, rtol=0, what=kernel)

    def compare(out, anchor):
        assert_close(out, anchor, atol=ATOL, rtol=0, what=f"{kernel} (whole output)")

    return check, compare


def cosine_matrix_problem(reference, rng: np.random.Generator, n: int, m: int, d: int) -> Problem:
    a, b = _embeddings(rng, n, d), _embeddings(rng, m, d)
    rows = np.unique(np.linspace(0, n - 1, min(n, CHECK_QUERIES["cosine_matrix"])).astype(int))
    truth = reference.cosine_matrix_ref(a[rows], b)

    def check(out):
        arr = _expect_float32(out, "cosine_matrix")
        if arr.shape != (n, m):
            raise AssertionError(f"cosine_matrix: shape {arr.shape}, expected ({n}, {m})")
        assert_close(arr[rows], truth, atol=ATOL, rtol=0, what="cosine_matrix rows")

    # A big output is compared on every step-th row: the whole of an 8192 x 65536 matrix
    # would cost more host memory and time than the kernel.
    step = max(1, (n * m) // 20_000_000 + 1) if n * m > 20_000_000 else 1

    def compare(out, anchor):
        assert_close(harness.to_numpy(out[::step]), harness.to_numpy(anchor[::step]), atol=ATOL,
                     rtol=0, what="cosine_matrix (whole output)" if step == 1 else
                     f"cosine_matrix (every {step}th row)")

    return Problem("cosine_matrix", f"n={n} m={m} d={d}", (a, b),
                   bytes=4.0 * (n + m) * d + 4.0 * n * m,
                   flops=2.0 * n * m * d + 2.0 * (n + m) * d, check=check, compare=compare)


def segmented_cosine_problem(reference, rng: np.random.Generator, q: int, per: int, d: int,
                             ragged: bool = False) -> Problem:
    counts = _counts(rng, q, per, ragged)
    off = _offsets(counts)
    queries = _embeddings(rng, q, d)
    docs = _near(rng, queries[np.repeat(np.arange(q), counts)])
    nq = min(q, CHECK_QUERIES["segmented_cosine"])
    truth = reference.segmented_cosine_ref(queries[:nq], docs[:off[nq]], off[:nq + 1])
    check, compare = _vector_checks("segmented_cosine", docs.shape[0], int(off[nq]), truth)
    total = int(off[-1])
    return Problem("segmented_cosine", f"Q={q} docs/q={per}{'~' if ragged else ''} d={d}",
                   (queries, docs, off),
                   bytes=4.0 * (q + total) * d + 8.0 * (q + 1) + 4.0 * total,
                   flops=2.0 * total * d + 2.0 * (q + total) * d, check=check, compare=compare)


def claim_relevance_problem(reference, rng: np.random.Generator, q: int, per_doc: int,
                            per_claim: int, d: int, ragged: bool = False) -> Problem:
    dcounts = _counts(rng, q, per_doc, ragged)
    ccounts = _counts(rng, q, per_claim, ragged)
    doff, coff = _offsets(dcounts), _offsets(ccounts)
    queries = _embeddings(rng, q, d)
    docs = _near(rng, queries[np.repeat(np.arange(q), dcounts)])
    # Each claim is near one doc of its query (a random row when the query has none).
    cseg = np.repeat(np.arange(q), ccounts)
    has = dcounts[cseg] > 0
    pick = doff[cseg] + np.floor(rng.random(len(cseg)) * np.maximum(dcounts[cseg], 1)).astype(np.int64)
    claims = _embeddings(rng, len(cseg), d)
    claims[has] += docs[pick[has]]
    nq = min(q, CHECK_QUERIES["claim_relevance"])
    truth = reference.claim_relevance_ref(
        queries[:nq], docs[:doff[nq]], doff[:nq + 1], claims[:coff[nq]], coff[:nq + 1])
    check, compare = _vector_checks("claim_relevance", len(claims), int(coff[nq]), truth)
    nd, nc = int(doff[-1]), int(coff[-1])
    pairs = float(np.dot(dcounts, ccounts))
    tilde = "~" if ragged else ""
    return Problem("claim_relevance", f"Q={q} docs/q={per_doc}{tilde} claims/q={per_claim}{tilde} d={d}",
                   (queries, docs, doff, claims, coff),
                   bytes=4.0 * (q + nd + nc) * d + 16.0 * (q + 1) + 4.0 * nc,
                   flops=2.0 * d * (pairs + nd) + 2.0 * (q + nd + nc) * d,
                   check=check, compare=compare)


def topk_cosine_problem(reference, rng: np.random.Generator, q: int, n: int, k: int, d: int) -> Problem:
    corpus = _embeddings(rng, n, d)
    queries = _near(rng, corpus[rng.integers(0, n, q)])
    rows = np.arange(min(q, CHECK_QUERIES["topk_cosine"]))
    truth = reference.topk_cosine_ref(queries[rows], corpus, k)[0]

    def check(out):
        s, i = out
        _expect_float32(s, "topk_cosine scores")
        check_topk(s, i, queries, corpus, truth, rows=rows, atol=ATOL, what="topk_cosine")

    def compare(out, anchor):
        check_topk(out[0], out[1], queries, corpus, harness.to_numpy(anchor[0]),
                   atol=ATOL, what="topk_cosine (whole output)")

    return Problem("topk_cosine", f"Q={q} N={n} k={k} d={d}", (queries, corpus, k),
                   bytes=4.0 * (q + n) * d + 12.0 * q * k,
                   flops=2.0 * q * n * d + 2.0 * (q + n) * d, check=check, compare=compare)


def problems(kernel: str, reference, sizes: dict, rng: np.random.Generator,
             ragged: bool = False) -> Iterator[Problem]:
    """Every (d, size) problem of one kernel, built one at a time."""
    for d in sizes["dims"]:
        for size in sizes[kernel]:
            if kernel == "cosine_matrix":
                yield cosine_matrix_problem(reference, rng, *size, d)
            elif kernel == "segmented_cosine":
                yield segmented_cosine_problem(reference, rng, *size, d, ragged)
            elif kernel == "claim_relevance":
                yield claim_relevance_problem(reference, rng, *size, d, ragged)
            else:
                yield topk_cosine_problem(reference, rng, *size, d)


# --------------------------------------------------------------------------------------
# CPU providers
# --------------------------------------------------------------------------------------


def _cast32(fn: Callable[[], Any]) -> Callable[[], Any]:
    """Cast a reference function's float64 outputs to float32 (what backend="reference" does)."""
    def call():
        out = fn()
        if isinstance(out, tuple):
            return tuple(o.astype(np.float32) if o.dtype.kind == "f" else o for o in out)
        return out.astype(np.float32)
    return call


def baseline_providers(libs: Libs, p: Problem) -> list[Provider]:
    """What a user runs today on the CPU, strongest formulations included."""
    t = libs.torch
    tt = (lambda x: t.from_numpy(x)) if t is not None else None  # shares numpy's memory
    if p.kernel == "cosine_matrix":
        a, b = p.args
        out = [Provider("numpy", partial(cosine_matrix_numpy, a, b), note="normalise + matmul")]
        if t is not None:
            out.append(Provider("torch", partial(cosine_matrix_torch, t, tt(a), tt(b)),
                                note="F.normalize + mm"))
        return out
    if p.kernel == "segmented_cosine":
        queries, docs, off = p.args
        out = [
            Provider("numpy-loop", partial(segmented_numpy_loop, *p.args),
                     note="normalise, then one matvec per query in a Python loop"),
            Provider("numpy-segids", partial(segmented_numpy_segids, *p.args),
                     note="gather each doc's query by segment id + einsum row dots"),
            Provider("numpy-padded", partial(segmented_numpy_padded, *p.args),
                     note="(Q,K,d) padded (a view when counts are equal) + batched matmul"),
        ]
        if t is not None:
            out.append(Provider("torch-bmm", partial(segmented_torch_bmm, t, tt(queries), tt(docs), off),
                                note="padded + torch.bmm"))
        return out
    if p.kernel == "claim_relevance":
        queries, docs, doff, claims, coff = p.args
        out = [
            Provider("numpy-loop", partial(claim_numpy_loop, *p.args),
                     note="normalise, then per query: doc sims + (c x d) matmul + max"),
            Provider("numpy-padded", partial(claim_numpy_padded, *p.args),
                     note="padded (Q,K,d) views + batched np.matmul, norms folded into the max"),
        ]
        if t is not None:
            out.append(Provider("torch-bmm", partial(claim_torch_bmm, t, tt(queries), tt(docs), doff,
                                                     tt(claims), coff),
                                note="the padded formulation with torch.bmm"))
        return out
    queries, corpus, k = p.args
    out = [Provider("numpy-chunked", partial(topk_numpy_chunked, *p.args),
                    note="normalise, then per block of queries: matmul + argpartition + sort")]
    if t is not None:
        out.append(Provider("torch-chunked", partial(topk_torch_chunked, t, tt(queries), tt(corpus), k),
                            note="F.normalize, then per block: mm + torch.topk"))
    if libs.faiss is not None:
        index = libs.faiss.IndexFlatIP(corpus.shape[1])
        index.add(_normalize_np(corpus))
        out.append(Provider("faiss-flatip", partial(topk_faiss, libs.faiss, index, queries, k),
                            note="IndexFlatIP over the normalised corpus, built once outside the "
                                 f"timing; {libs.faiss_note}"))
    return out


def rrag_providers(libs: Libs, p: Problem, quick: bool) -> list[Provider]:
    """Ours: the C++ backend (and, in quick mode only, the float64 reference)."""
    out: list[Provider] = []
    if libs.ops is not None:
        op = getattr(libs.ops, p.kernel)
        out.append(Provider("rrag-cpp", partial(op, *p.args, backend="cpp"), RRAG))
        if not quick and p.kernel in MEMORY_BOUND:
            out.append(Provider("rrag-cpp-nocheck", partial(op, *p.args, check_finite=False, backend="cpp"),
                                RRAG, note="check_finite=False (what the NaN/inf check costs)"))
    else:
        def missing():
            raise RuntimeError(f"rrag_kernels.ops unavailable: {libs.ops_error}")
        out.append(Provider("rrag-cpp", missing, RRAG))
    if quick:
        if libs.ops is not None:
            out.append(Provider("reference", partial(op, *p.args, backend="reference"), REFERENCE,
                                note='backend="reference": the float64 NumPy truth'))
        else:
            ref = getattr(libs.reference, p.kernel + "_ref")
            out.append(Provider("reference", _cast32(partial(ref, *p.args)), REFERENCE,
                                note="float64 NumPy truth, cast to float32"))
    return out


def cases(kernel: str, libs: Libs, sizes: dict, rng: np.random.Generator, quick: bool,
          ragged: bool) -> Iterator[Case]:
    for p in problems(kernel, libs.reference, sizes, rng, ragged):
        notes = []
        if kernel == "topk_cosine":
            notes.append("indices may differ from the reference only where scores tie within "
                         "atol; the check recomputes each returned score")
        yield Case(p.kernel, p.shape, p.bytes, p.flops,
                   baseline_providers(libs, p) + rrag_providers(libs, p, quick),
                   check=p.check, compare=p.compare, notes=notes)


# --------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    harness.add_common_args(parser, KERNELS)
    parser.add_argument("--dims", type=int, nargs="+", default=None,
                        help="embedding widths (default 384 1024; 384 with --quick)")
    parser.add_argument("--ragged", action="store_true",
                        help="Poisson segment sizes with ~5%% empty queries instead of equal ones "
                             "(the padded baselines then pay for padding)")
    parser.add_argument("--faiss-coretype", default="auto", metavar="NAME",
                        help="OpenBLAS kernels for faiss's bundled OpenBLAS: auto (replace a "
                             "fallback such as Prescott by SkylakeX/Haswell), none, or a name")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    libs = Libs(args.faiss_coretype)
    harness.set_threads(args.threads, libs.rrag)
    sizes = dict(QUICK if args.quick else FULL)
    if args.dims:
        sizes["dims"] = tuple(args.dims)
    if libs.ops is None:
        print(f"note: rrag_kernels.ops unavailable ({libs.ops_error}); timing baselines only")
    for name, mod in (("torch", libs.torch), ("faiss", libs.faiss)):
        if mod is None:
            print(f"note: {name} not installed; its baselines are left out")

    rng = np.random.default_rng(args.seed)
    factories = [(k, partial(cases, k, libs, sizes, rng, args.quick, args.ragged)) for k in KERNELS]
    harness.run_cases("cosine", factories, args, libs.rrag)
    return 0


if __name__ == "__main__":
    sys.exit(main())
