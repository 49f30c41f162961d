"""Shared test helpers: input generators, earned tolerances, verbose comparisons.

How tolerances are earned
-------------------------
Truth is the float64 reference in ``rrag_kernels.reference``. A kernel that works in
float32 cannot match it exactly, and how far it may drift depends on the data (d, the
spread of row norms, cancellation in the dot products). So no test hard-codes an
``atol``: each one measures the error of a *naive float32 NumPy implementation of the
same quantity* on the same inputs and allows the kernel

    max |kernel - ref64|  <=  ERR_FACTOR * max |naive32 - ref64|  +  ABS_FLOOR

with ``ERR_FACTOR = 2`` (flash-attention's rule: a fast kernel may be at most twice as
wrong as the obvious same-precision code) and ``ABS_FLOOR = 5e-7``, about 4 float32 ulps
at 1.0, which covers kernels that round in a different order than NumPy on inputs where
the naive error happens to be ~0 (d = 1, exact powers of two). Cosines and the products
of two cosines live in [-1, 1], so an absolute bound is the right one.

For scale: on random rows the naive float32 error is ~1e-7 to 2e-7 for d from 3 to 1024,
so the bound is ~1e-6, and the kernels measured here stay near the naive error. The whole
suite also passes with the floor at 2.5e-7; 5e-7 leaves a factor of two for other
hardware (a CUDA GPU) and seeds.

The naive implementations below are yardsticks, not truth: they cast the inputs to
float32, normalise each row in float32 (zero rows give 0) and use float32 matmul / sums.
The math of record stays in ``rrag_kernels.reference``.

Discrete outputs (top-k indices) are compared exactly wherever they are well defined:
where neighbouring reference scores are more than ``2 * tol`` apart, a kernel whose
scores are within ``tol`` cannot legitimately order them differently.
"""

from __future__ import annotations

import numpy as np

ERR_FACTOR = 2.0
ABS_FLOOR = 5e-7

_MAX_REPORTED = 10


# --------------------------------------------------------------------------- conversion


def to_numpy(x) -> np.ndarray:
    """``x`` as a NumPy array (from a NumPy array, or a torch tensor on any device)."""
    if isinstance(x, np.ndarray):
        return x
    if hasattr(x, "detach") and hasattr(x, "cpu"):
        return x.detach().cpu().numpy()
    return np.asarray(x)


# --------------------------------------------------------------------------- comparisons


def _fmt_index(flat: int, shape: tuple[int, ...]) -> str:
    return str(tuple(int(i) for i in np.unravel_index(flat, shape))) if shape else "()"


def assert_close(actual, expected, *, atol: float, rtol: float = 0.0, name: str = "output") -> None:
    """``np.allclose`` that explains a failure.

    Reports shape/NaN/inf mismatches separately (a NaN where the reference is finite is a
    bug of its own, not a large error), the maximum absolute and relative error with their
    positions, and the first few offending indices with both values.

    Parameters
    ----------
    actual, expected : array-like (NumPy or torch), same shape
    atol, rtol : float
        An element fails when ``|actual - expected| > atol + rtol * |expected|``.
    name : str
        What is compared, for the message.
    """
    if not (np.isfinite(atol) and np.isfinite(rtol)):
        raise ValueError(f"assert_close: atol={atol}, rtol={rtol} must be finite")
    act = np.asarray(to_numpy(actual), dtype=np.float64)
    exp = np.asarray(to_numpy(expected), dtype=np.float64)
    if act.shape != exp.shape:
        raise AssertionError(f"{name}: shape {act.shape} != expected {exp.shape}")
    problems: list[str] = []

    nan_a, nan_e = np.isnan(act), np.isnan(exp)
    inf_a, inf_e = np.isinf(act), np.isinf(exp)
    nan_bad = np.flatnonzero(nan_a != nan_e)
    # inf is only a match when both are the same inf.
    inf_bad = np.flatnonzero((inf_a | inf_e) & ~((act == exp) & inf_a))
    if nan_bad.size:
        shown = ", ".join(
            f"{_fmt_index(i, act.shape)}: got {float(act.flat[i])!r} expected {float(exp.flat[i])!r}"
            for i in nan_bad[:_MAX_REPORTED]
        )
        problems.append(f"{nan_bad.size} NaN mismatch(es), first: {shown}")
    if inf_bad.size:
        shown = ", ".join(
            f"{_fmt_index(i, act.shape)}: got {float(act.flat[i])!r} expected {float(exp.flat[i])!r}"
            for i in inf_bad[:_MAX_REPORTED]
        )
        problems.append(f"{inf_bad.size} inf mismatch(es), first: {shown}")

    finite = np.isfinite(act) & np.isfinite(exp)
    with np.errstate(invalid="ignore"):
        err = np.where(finite, np.abs(act - exp), 0.0)
    allowed = atol + rtol * np.abs(np.where(finite, exp, 0.0))
    bad = np.flatnonzero(err > allowed)
    if bad.size:
        worst = int(np.argmax(err))
        with np.errstate(divide="ignore", invalid="ignore"):
            rel = np.where(finite & (exp != 0), err / np.abs(exp), np.where(err > 0, np.inf, 0.0))
        worst_rel = int(np.argmax(rel))
        shown = ", ".join(
            f"{_fmt_index(i, act.shape)}: got {act.flat[i]:.9g} expected {exp.flat[i]:.9g} "
            f"(err {err.flat[i]:.3g})"
            for i in bad[:_MAX_REPORTED]
        )
        problems.append(
            f"{bad.size}/{act.size} element(s) outside atol={atol:.3g} rtol={rtol:.3g}; "
            f"max abs err {err.flat[worst]:.3g} at {_fmt_index(worst, act.shape)}, "
            f"max rel err {rel.flat[worst_rel]:.3g} at {_fmt_index(worst_rel, act.shape)}; "
            f"first bad: {shown}"
        )
    if problems:
        raise AssertionError(f"{name} (shape {act.shape}):\n  " + "\n  ".join(problems))


def assert_bitwise_equal(actual, expected, *, name: str = "output") -> None:
    """Exact equality (same dtype, shape and bits; NaN equals NaN), with the first differences."""
    act, exp = to_numpy(actual), to_numpy(expected)
    if act.shape != exp.shape or act.dtype != exp.dtype:
        raise AssertionError(
            f"{name}: shape/dtype {act.shape}/{act.dtype} != {exp.shape}/{exp.dtype}"
        )
    if act.size == 0:
        return
    a_bits = np.ascontiguousarray(act).reshape(-1).view(np.uint8).reshape(act.size, -1)
    e_bits = np.ascontiguousarray(exp).reshape(-1).view(np.uint8).reshape(exp.size, -1)
    diff = np.flatnonzero((a_bits != e_bits).any(axis=1))
    if diff.size:
        shown = ", ".join(
            f"{_fmt_index(i, act.shape)}: {act.flat[i].item()!r} vs {exp.flat[i].item()!r}"
            for i in diff[:_MAX_REPORTED]
        )
        raise AssertionError(
            f"{name}: {diff.size}/{act.size} element(s) differ bitwise, first: {shown}"
        )


# --------------------------------------------------------------------------- error bounds


def max_abs_err(approx, ref) -> float:
    """max |approx - ref|; 0 for empty arrays.

    Raises on non-finite values: a NaN bound would make every later ``err > bound``
    comparison False, so nothing could fail.
    """
    a = np.asarray(to_numpy(approx), dtype=np.float64)
    r = np.asarray(to_numpy(ref), dtype=np.float64)
    if a.shape != r.shape:
        raise ValueError(f"max_abs_err: shapes {a.shape} and {r.shape} differ")
    if a.size == 0:
        return 0.0
    if not (np.isfinite(a).all() and np.isfinite(r).all()):
        raise ValueError("max_abs_err: non-finite values; compare only the finite part")
    return float(np.max(np.abs(a - r)))


def error_bound(naive, ref, *, factor: float = ERR_FACTOR, floor: float = ABS_FLOOR) -> float:
    """The absolute error a float32 kernel is allowed against the float64 reference.

    ``factor * max|naive - ref| + floor``; see the module docstring for why.

    Parameters
    ----------
    naive : ndarray, any shape, float32
        The naive float32 implementation's result on the same inputs.
    ref : ndarray, same shape, float64
        The reference result.
    """
    return factor * max_abs_err(naive, ref) + floor


# --------------------------------------------------------------------------- naive float32


def _normalise_f32(x: np.ndarray) -> np.ndarray:
    x32 = np.asarray(x, dtype=np.float32)
    norms = np.sqrt(np.sum(x32 * x32, axis=1, dtype=np.float32)).astype(np.float32)
    inv = np.zeros_like(norms)
    np.divide(np.float32(1.0), norms, out=inv, where=norms > 0)
    return x32 * inv[:, None]


def naive_cosine_matrix_f32(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Yardstick: float32 normalise + float32 matmul. (n, d), (m, d) -> (n, m) float32."""
    return _normalise_f32(a) @ _normalise_f32(b).T


def naive_segmented_cosine_f32(queries: np.ndarray, docs: np.ndarray, doc_offsets: np.ndarray) -> np.ndarray:
    """Yardstick for ``segmented_cosine``: (Q, d), (D, d), (Q + 1,) -> (D,) float32."""
    qn, dn = _normalise_f32(queries), _normalise_f32(docs)
    owner = np.repeat(np.arange(len(doc_offsets) - 1), np.diff(doc_offsets))
    if dn.shape[0] == 0:
        return np.zeros(0, dtype=np.float32)
    return np.einsum("ij,ij->i", dn, qn[owner]).astype(np.float32)


def naive_claim_relevance_f32(
    query_emb, doc_emb, doc_offsets, claim_emb, claim_offsets, *, query_doc_sim=None, clip=True
) -> np.ndarray:
    """Yardstick for ``claim_relevance``: a float32 loop over queries. Returns (C,) float32."""
    doc_offsets = np.asarray(doc_offsets, dtype=np.int64)
    claim_offsets = np.asarray(claim_offsets, dtype=np.int64)
    if query_doc_sim is None:
        sim = naive_segmented_cosine_f32(query_emb, doc_emb, doc_offsets)
    else:
        sim = np.asarray(query_doc_sim, dtype=np.float32)
    dn, cn = _normalise_f32(doc_emb), _normalise_f32(claim_emb)
    out = np.zeros(cn.shape[0], dtype=np.float32)
    for q in range(len(doc_offsets) - 1):
        dlo, dhi = doc_offsets[q], doc_offsets[q + 1]
        clo, chi = claim_offsets[q], claim_offsets[q + 1]
        if dhi > dlo and chi > clo:
            out[clo:chi] = ((cn[clo:chi] @ dn[dlo:dhi].T) * sim[dlo:dhi][None, :]).max(axis=1)
    if clip:
        np.maximum(out, np.float32(0.0), out=out)
    return out


# --------------------------------------------------------------------------- input generators


def random_rows(rng: np.random.Generator, n: int, d: int, *, zero_rows: int = 0, dtype=np.float32) -> np.ndarray:
    """(n, d) Gaussian rows with norms spread over 1e-2..1e2 (kernels must not assume unit
    rows) and ``zero_rows`` exact zero rows at random positions."""
    x = rng.standard_normal((n, d))
    x *= 10.0 ** rng.uniform(-2.0, 2.0, size=(n, 1))
    if zero_rows:
        x[rng.choice(n, size=min(zero_rows, n), replace=False)] = 0.0
    return x.astype(dtype)


def offsets_from_counts(counts) -> np.ndarray:
    """CSR offsets (len(counts) + 1,) int64 from per-segment counts."""
    counts = np.asarray(counts, dtype=np.int64)
    out = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=out[1:])
    return out


def random_counts(rng: np.random.Generator, q: int, *, max_count: int, empty_frac: float = 0.3) -> np.ndarray:
    """(q,) int64 segment sizes in [1, max_count], with about ``empty_frac`` of them 0."""
    counts = rng.integers(1, max_count + 1, size=q)
    counts[rng.random(q) < empty_frac] = 0
    return counts.astype(np.int64)


# --------------------------------------------------------------------------- top-k


def topk_tolerance(queries, corpus) -> float:
    """The earned score tolerance for ``topk_cosine(queries, corpus, k)``: the bound of
    the naive float32 cosine matrix against the float64 one."""
    from rrag_kernels.reference import cosine_matrix_ref

    return error_bound(naive_cosine_matrix_f32(queries, corpus), cosine_matrix_ref(queries, corpus))


def check_topk(scores, indices, queries, corpus, k: int, *, exact_ties: bool = True) -> float:
    """Check a top-k result against the float64 reference; returns the tolerance used.

    Parameters
    ----------
    scores : (Q, k) float32, indices : (Q, k) int64
        The kernel's output for ``topk_cosine(queries, corpus, k)``.
    queries : (Q, d), corpus : (N, d)
        The inputs (as the kernel saw them after conversion to float32).
    k : int
    exact_ties : bool
        Require that equal returned scores come out in ascending index order. The
        ``reference`` backend ranks by float64 value before casting to float32, so two
        distinct float64 scores may become an equal float32 pair in float64 order; pass
        False for it.

    What is checked, row by row (``tol`` from ``topk_tolerance``):

    - dtypes, shapes, indices in [0, N) and distinct;
    - scores non-increasing, and equal (within ``tol``) both to the reference score at the
      returned index and to the reference's k largest values;
    - when ``k == N``, or the reference gap at the k-boundary exceeds ``2 * tol``, the set
      of returned indices equals the reference set;
    - at every position whose reference score is more than ``2 * tol`` from both
      neighbours in the reference order (``topk_cosine_ref`` with k = N, which also fixes
      the tie-break), the index equals the reference index.
    """
    from rrag_kernels.reference import cosine_matrix_ref, topk_cosine_ref

    s, i = to_numpy(scores), to_numpy(indices)
    qn, n = np.asarray(queries).shape[0], np.asarray(corpus).shape[0]
    assert s.dtype == np.float32, f"scores dtype {s.dtype}, expected float32"
    assert i.dtype == np.int64, f"indices dtype {i.dtype}, expected int64"
    assert s.shape == (qn, k) and i.shape == (qn, k), f"shapes {s.shape}, {i.shape}, expected {(qn, k)}"
    tol = topk_tolerance(queries, corpus)
    if qn == 0:
        return tol
    assert np.all((i >= 0) & (i < n)), f"indices out of [0, {n}): {i[(i < 0) | (i >= n)][:10]}"
    for q in range(qn):
        assert len(np.unique(i[q])) == k, f"row {q}: repeated indices {i[q]}"
    assert not np.isnan(s).any(), "NaN in top-k scores"

    steps = np.diff(s, axis=1)
    bad = np.argwhere(steps > 0)
    assert bad.size == 0, f"scores not descending at (row, pos) {bad[:10].tolist()}: {s[bad[0][0]] if bad.size else ''}"
    if exact_ties:
        bad = np.argwhere((steps == 0) & (np.diff(i, axis=1) < 0))
        assert bad.size == 0, (
            f"equal scores not in ascending index order at (row, pos) {bad[:10].tolist()}; "
            f"row {bad[0][0] if bad.size else ''} indices {i[bad[0][0]] if bad.size else ''}"
        )

    ref_sims = cosine_matrix_ref(queries, corpus)
    ref_sorted, order = topk_cosine_ref(queries, corpus, n)
    assert_close(s, np.take_along_axis(ref_sims, i, axis=1), atol=tol,
                 name="top-k scores vs reference at the returned indices")
    assert_close(s, ref_sorted[:, :k], atol=tol, name="top-k scores vs the reference's k largest")

    gap_next = np.full((qn, n), np.inf)
    gap_next[:, :-1] = ref_sorted[:, :-1] - ref_sorted[:, 1:]
    gap_prev = np.full((qn, n), np.inf)
    gap_prev[:, 1:] = gap_next[:, :-1]
    for q in range(qn):
        if k == n or gap_next[q, k - 1] > 2 * tol:
            got, want = np.sort(i[q]), np.sort(order[q, :k])
            assert np.array_equal(got, want), (
                f"row {q}: top-{k} set differs from the reference although the boundary gap "
                f"{gap_next[q, k - 1]:.3g} > 2*tol = {2 * tol:.3g}; "
                f"missing {np.setdiff1d(want, got)[:10]}, extra {np.setdiff1d(got, want)[:10]}"
            )
        sure = (gap_prev[q, :k] > 2 * tol) & (gap_next[q, :k] > 2 * tol)
        wrong = np.flatnonzero(sure & (i[q] != order[q, :k]))
        assert wrong.size == 0, (
            f"row {q}: indices differ from the reference at well-separated positions "
            f"{wrong[:10]}: got {i[q, wrong[:10]]}, expected {order[q, wrong[:10]]}"
        )
    return tol


class HashEmbedder:
    """Deterministic bag-of-words embedder for pipeline tests (no model): each word maps to
    a fixed pseudo-random 64-d vector (seeded by its CRC32), a text to their normalised sum."""

    def encode(self, texts):
        import zlib

        out = np.zeros((len(texts), 64), dtype=np.float32)
        for n, t in enumerate(texts):
            for w in t.lower().split():
                out[n] += np.random.default_rng(zlib.crc32(w.encode())).standard_normal(64)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms > 0, norms, 1)
