"""Benchmarks of the conformal-factuality kernels against what a researcher writes today.

Cases (responses x 8 claims, 80 % supported, continuous scores; 5 alphas x 100 splits,
calib_fraction 0.5, a = 1), as the issue defines its baselines:

``conformal_sweep`` at n = 10,000 and 1,000,000 responses:
  * ``python-loop``   Mohri et al.'s loops: per-response r-score in Python, per split and
                      alpha ``np.quantile`` (level (k - 0.5)/m, method="inverted_cdf": the k-th
                      order statistic, robustly) and the metrics in a Python loop over the test
                      responses; n = 10,000 only (it would take hours at 10^6)
  * ``numpy``         the best vectorised NumPy version we could write: r-scores once
                      (segmented ``maximum.reduceat``), per split the keys and
                      ``np.partition`` for the calibration set, one ``np.partition`` of the
                      calibration r-scores at all ranks, and the metrics from the test claims
                      (one comparison per claim and alpha, ``bincount`` per claim count) and
                      per-response maxima
  * ``rrag-cpp``      ``conformal_sweep(..., backend="cpp")``
  Every provider draws the same splits (the SplitMix64 keys of
  ``rrag_kernels.reference.conformal_sweep``; the baselines compute them with NumPy), so their
  q_hat must agree exactly and their metrics to 1e-12.
``r_scores`` at n = 1,000,000: ``numpy`` against ``rrag-cpp``, with the memory floor of
reading scores + labels + offsets and writing r; at a = 1 (``maximum.reduceat`` of the
unsupported scores) and a = 0.9 (lexsort + segmented cumulative sums).
``conformal_quantile`` at n = 10,000 and 10,000,000 r-scores (20 % at the -inf sentinel),
the 5 alphas in one call:
  * ``numpy-sort``       ``np.sort`` once, then the k-th smallest per alpha (k by
                         ``conformal_rank``)
  * ``numpy-partition``  one ``np.partition`` at all the ranks
  * ``numpy-quantile``   ``np.quantile(r, (k - 0.5) / n, method="inverted_cdf")``, the robust
                         ``np.quantile`` idiom for the k-th order statistic
  * ``rrag-cpp``         ``conformal_quantile(r, alphas, backend="cpp")``
  All must return the same order statistics exactly.

Usage::

    python benchmarks/bench_conformal.py --quick
    python benchmarks/bench_conformal.py --kernel conformal_sweep
    python benchmarks/bench_conformal.py --quick --kernel conformal_quantile
"""

from __future__ import annotations

import argparse
import math
import sys
from functools import partial
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402
from harness import BASELINE, RRAG, Case, Provider  # noqa: E402

KERNELS = ("conformal_sweep", "r_scores", "conformal_quantile")
P = 8
ALPHAS = np.array([0.05, 0.1, 0.15, 0.2, 0.3])
N_SPLITS = 100
FULL = {"conformal_sweep": (10_000, 1_000_000), "r_scores": (1_000_000,), "conformal_quantile": (10_000, 10_000_000)}
QUICK = {"conformal_sweep": (10_000,), "r_scores": (100_000,), "conformal_quantile": (10_000, 1_000_000)}


def make_data(rng: np.random.Generator, n: int):
    off = np.arange(0, (n + 1) * P, P, dtype=np.int64)
    s = rng.random(n * P)
    ok = rng.random(n * P) < 0.8
    return s, ok, off


# ------------------------------------------------------------------------------ baselines


def r_scores_python(s, ok, off, a=1.0, sentinel=-np.inf):
    """Mohri et al.'s per-response loop over the distinct thresholds."""
    out = np.empty(off.shape[0] - 1)
    sl, okl = s.tolist(), ok.tolist()
    for i in range(off.shape[0] - 1):
        b, e = int(off[i]), int(off[i + 1])
        ss, oo = sl[b:e], okl[b:e]
        val = sentinel
        for t in sorted(set(ss), reverse=True):
            kept = [o for x, o in zip(ss, oo) if x >= t]
            if sum(kept) / len(kept) < a:
                val = t
                break
        out[i] = val
    return out


def r_scores_numpy(s, ok, off, a=1.0, sentinel=-np.inf):
    """General a: lexsort by (response, -score), segmented cumulative sums."""
    n = off.shape[0] - 1
    p = np.diff(off)
    resp = np.repeat(np.arange(n), p)
    order = np.lexsort((-s, resp))
    ss, oo, seg = s[order], ok[order].astype(np.int64), resp[order]
    start = off[:-1][seg]
    cum_ok = np.cumsum(oo)
    cum_ok -= np.r_[0, cum_ok][start]
    cnt = np.arange(s.shape[0]) - start + 1
    nxt_diff = np.r_[(seg[1:] != seg[:-1]) | (ss[1:] != ss[:-1]), True]
    fail = nxt_diff & (cum_ok / cnt < a)
    idx = np.where(fail, np.arange(s.shape[0]), s.shape[0])
    r = np.full(n, sentinel)
    nonempty = p > 0
    if nonempty.any():
        first = np.minimum.reduceat(idx, off[:-1][nonempty])
        has = first < s.shape[0]
        vals = np.full(first.shape[0], sentinel)
        vals[has] = ss[first[has]]
        r[nonempty] = vals
    return r


def unsupported_max_numpy(s, ok, off):
    """(umax, has_bad) per response: the largest unsupported score (-inf when none)."""
    n = off.shape[0] - 1
    nonempty = np.diff(off) > 0
    umax, has_bad = np.full(n, -np.inf), np.zeros(n, dtype=bool)
    if nonempty.any():
        umax[nonempty] = np.maximum.reduceat(np.where(ok, -np.inf, s), off[:-1][nonempty])
        has_bad[nonempty] = np.logical_or.reduceat(~ok, off[:-1][nonempty])
    return umax, has_bad


def r_scores_numpy_a1(s, ok, off, sentinel=-np.inf):
    """a = 1: the largest unsupported score, one segmented maximum."""
    umax, has_bad = unsupported_max_numpy(s, ok, off)
    return np.where(has_bad, umax, sentinel)


def _gamma_multiples(n: int) -> np.ndarray:
    """(j + 1) * G mod 2**64 for j < n: shared by every split's keys."""
    from rrag_kernels.reference import SPLIT_GAMMA

    with np.errstate(over="ignore"):
        return np.arange(1, n + 1, dtype=np.uint64) * np.uint64(SPLIT_GAMMA)


def _calibration(ref, seed, split, j1g, m):
    keys = ref.split_keys_ref(seed, split, j1g.shape[0], gamma_multiples=j1g)
    return keys <= np.partition(keys, m - 1)[m - 1]


def _finish(out, sp, ai, n_test, k_by_p, pvals, n0, fs, ne, fsne):
    acc = 0.0
    for kp, pv in zip(k_by_p, pvals):
        if pv > 0:
            acc += float(kp) / float(pv)
    out["retention"][sp, ai] = (acc + float(n0)) / float(n_test)
    out["fully_supported"][sp, ai] = float(fs) / float(n_test)
    out["non_empty"][sp, ai] = float(ne) / float(n_test)
    out["supported_given_non_empty"][sp, ai] = float(fsne) / float(ne) if ne else np.nan


def _empty_out():
    return {k: np.empty((N_SPLITS, ALPHAS.shape[0])) for k in
            ("q_hat", "fully_supported", "retention", "non_empty", "supported_given_non_empty")}


def sweep_python(ref, s, ok, off, seed):
    """The loops of Mohri et al.'s code: r-scores, then per split and alpha np.quantile and a
    pass over the test responses' claims."""
    n = off.shape[0] - 1
    m = math.floor(0.5 * n)
    r = r_scores_python(s, ok, off)
    claims = [(s[off[i]:off[i + 1]].tolist(), ok[off[i]:off[i + 1]].tolist()) for i in range(n)]
    pvals = sorted({len(c[0]) for c in claims})
    j1g = _gamma_multiples(n)
    out = _empty_out()
    for sp in range(N_SPLITS):
        cal = _calibration(ref, seed, sp, j1g, m)
        rc, test = r[cal], np.flatnonzero(~cal).tolist()
        for ai, alpha in enumerate(ALPHAS.tolist()):
            k = math.ceil((m + 1) * (1 - alpha))
            q = float(np.quantile(rc, (k - 0.5) / m, method="inverted_cdf")) if k <= m else np.inf
            out["q_hat"][sp, ai] = q
            kept_by_p, n0, fs, ne, fsne = dict.fromkeys(pvals, 0), 0, 0, 0, 0
            for i in test:
                sc, lab = claims[i]
                kept = [o for x, o in zip(sc, lab) if x >= q]
                full, nonempty = all(kept), len(kept) > 0
                kept_by_p[len(sc)] += len(kept)
                n0 += len(sc) == 0
                fs += full
                ne += nonempty
                fsne += full and nonempty
            _finish(out, sp, ai, len(test), [kept_by_p[p] for p in pvals], pvals, n0, fs, ne, fsne)
    return out


def sweep_numpy(ref, s, ok, off, seed):
    """The best vectorised NumPy version we could write (see the module docstring)."""
    n = off.shape[0] - 1
    m = math.floor(0.5 * n)
    p = np.diff(off)
    umax, has_bad = unsupported_max_numpy(s, ok, off)
    r = np.where(has_bad, umax, -np.inf)
    u = np.where(has_bad, umax, np.nan)  # NaN >= q is False: fully supported at every q
    nonempty = p > 0
    smax = np.full(n, np.nan)  # non-empty after filtering iff smax >= q
    if nonempty.any():
        smax[nonempty] = np.maximum.reduceat(s, off[:-1][nonempty])
    pvals, pidx = np.unique(p, return_inverse=True)
    pidx_claim = np.repeat(pidx, p)
    j1g = _gamma_multiples(n)
    ks = [math.ceil((m + 1) * (1 - a)) for a in ALPHAS.tolist()]
    valid = sorted({k - 1 for k in ks if k <= m})
    out = _empty_out()
    for sp in range(N_SPLITS):
        cal = _calibration(ref, seed, sp, j1g, m)
        part = np.partition(r[cal], valid) if valid else r[cal]
        test = ~cal
        claim_test = np.repeat(test, p)
        st, pt = s[claim_test], pidx_claim[claim_test]
        ut, smt = u[test], smax[test]
        n_by_p = np.bincount(pidx[test], minlength=pvals.shape[0])
        n0 = int(n_by_p[0]) if pvals[0] == 0 else 0
        for ai, k in enumerate(ks):
            q = part[k - 1] if k <= m else np.inf
            out["q_hat"][sp, ai] = q
            k_by_p = (np.bincount(pt[st >= q], minlength=pvals.shape[0]) if pvals.shape[0] > 1
                      else [np.count_nonzero(st >= q)])
            fs, ne = ~(ut >= q), smt >= q
            _finish(out, sp, ai, n - m, k_by_p, pvals.tolist(), n0, int(fs.sum()), int(ne.sum()), int((fs & ne).sum()))
    return out


# ------------------------------------------------------------------------------ cases


def quantile_numpy_sort(r, ranks):
    """Sort once, then the k-th smallest per alpha (+inf when k > n)."""
    srt = np.sort(r)
    return np.array([srt[k - 1] if k <= r.shape[0] else np.inf for k in ranks])


def quantile_numpy_partition(r, ranks):
    """One partition at every valid rank, then the k-th smallest per alpha."""
    valid = sorted({k - 1 for k in ranks if k <= r.shape[0]})
    part = np.partition(r, valid) if valid else r
    return np.array([part[k - 1] if k <= r.shape[0] else np.inf for k in ranks])


def quantile_numpy_quantile(r, ranks):
    """``np.quantile`` at levels (k - 0.5) / n with ``method="inverted_cdf"``: the k-th order
    statistic (a level strictly inside ((k - 1) / n, k / n] cannot round to a neighbour)."""
    n = r.shape[0]
    levels = [(k - 0.5) / n for k in ranks if k <= n]
    got = iter(np.quantile(r, levels, method="inverted_cdf")) if levels else iter(())
    return np.array([next(got) if k <= n else np.inf for k in ranks])


def quantile_cases(rk, ops, ref, rng, sizes, quick):
    cases = []
    for n in sizes:
        r = rng.random(n)
        r[rng.random(n) < 0.2] = -np.inf  # responses with no failing threshold: the sentinel
        ranks = [ref.conformal_rank(n, a) for a in ALPHAS.tolist()]
        want = ref.conformal_quantile_ref(r, ALPHAS)

        def check(out, want=want):
            np.testing.assert_array_equal(np.asarray(out), want)

        def compare(out, anchor):
            if not np.array_equal(np.asarray(out), np.asarray(anchor)):
                raise AssertionError("q_hat differs from the anchor baseline")

        providers = [
            Provider("numpy-sort", partial(quantile_numpy_sort, r, ranks), BASELINE, "np.sort, then index k - 1"),
            Provider("numpy-partition", partial(quantile_numpy_partition, r, ranks), BASELINE,
                     "one np.partition at all the ranks"),
            Provider("numpy-quantile", partial(quantile_numpy_quantile, r, ranks), BASELINE,
                     'np.quantile(r, (k - 0.5) / n, method="inverted_cdf")'),
        ]
        if ops is not None:
            providers.append(Provider("rrag-cpp", partial(ops.conformal_quantile, r, ALPHAS, backend="cpp"), RRAG))
        cases.append(Case("conformal_quantile", f"n={n} alphas={len(ALPHAS)}", float(r.nbytes + 16 * len(ALPHAS)),
                          0.0, providers, check, compare))
    return cases


def sweep_cases(rk, ops, ref, rng, sizes, quick):
    cases = []
    for n in sizes:
        s, ok, off = make_data(rng, n)
        seed = 12345

        r_full = r_scores_numpy_a1(s, ok, off)
        cal0 = ref.calibration_mask_ref(seed, 0, n, 0.5)
        q0 = ref.conformal_quantile_ref(r_full[cal0], ALPHAS)

        def check(out, q0=q0):
            # split 0's q_hat from the reference's split mask and quantile rule
            q = out["q_hat"] if isinstance(out, dict) else out.q_hat[:, :, 0]
            assert q.shape == (N_SPLITS, ALPHAS.shape[0]), q.shape
            np.testing.assert_array_equal(q[0], q0)

        def compare(out, anchor):
            get = (lambda o, k: o[k]) if isinstance(out, dict) else (lambda o, k: getattr(o, k))
            qa = anchor["q_hat"]
            qo = get(out, "q_hat") if isinstance(out, dict) else out.q_hat[:, :, 0]
            if not np.array_equal(qo, qa):
                raise AssertionError("q_hat differs from the anchor baseline")
            for k in ("fully_supported", "retention", "non_empty", "supported_given_non_empty"):
                if not np.allclose(get(out, k), anchor[k], rtol=0, atol=1e-12, equal_nan=True):
                    raise AssertionError(f"{k} differs from the anchor baseline")

        providers = [Provider("numpy", partial(sweep_numpy, ref, s, ok, off, seed), BASELINE,
                              "vectorised r-scores + np.partition per split, claim-level metrics")]
        if n <= 10_000:
            providers.append(Provider("python-loop", partial(sweep_python, ref, s, ok, off, seed), BASELINE,
                                      "Python r-score loop, np.quantile and a metrics loop per split and alpha"))
        if ops is not None:
            providers.append(Provider("rrag-cpp", partial(ops.conformal_sweep, s, ok, off, alphas=ALPHAS,
                                                          n_splits=N_SPLITS, seed=seed, backend="cpp"), RRAG))
        nbytes = s.nbytes + ok.nbytes + off.nbytes
        cases.append(Case("conformal_sweep", f"n={n} p={P} alphas={len(ALPHAS)} splits={N_SPLITS}",
                          float(nbytes), 0.0, providers, check, compare))
    return cases


def r_cases(rk, ops, ref, rng, sizes, quick):
    cases = []
    for n in sizes:
        s, ok, off = make_data(rng, n)
        for a in (1.0, 0.9):

            def check(out, s=s, ok=ok, off=off, a=a):
                sub = 1000
                want = ref.r_scores_ref(s[: sub * P], ok[: sub * P], off[: sub + 1], a)
                np.testing.assert_array_equal(np.asarray(out)[:sub], want)

            def compare(out, anchor):
                if not np.array_equal(np.asarray(out), anchor):
                    raise AssertionError("r differs from the numpy baseline")

            if a == 1.0:
                base = Provider("numpy", partial(r_scores_numpy_a1, s, ok, off), BASELINE,
                                "maximum.reduceat of the unsupported scores")
            else:
                base = Provider("numpy", partial(r_scores_numpy, s, ok, off, a), BASELINE, "lexsort + segmented cumsums")
            providers = [base]
            if ops is not None:
                providers.append(Provider("rrag-cpp", partial(ops.r_scores, s, ok, off, a=a, backend="cpp"), RRAG))
            nbytes = s.nbytes + ok.nbytes + off.nbytes + 8 * n
            cases.append(Case("r_scores", f"n={n} p={P} a={a}", float(nbytes), 0.0, providers, check, compare))
    return cases


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    harness.add_common_args(parser, KERNELS)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    rk = harness.import_rrag()
    from rrag_kernels import reference as ref

    try:
        from rrag_kernels import ops

        ops.r_scores(np.zeros(1), np.ones(1, dtype=bool), np.array([0, 1]), backend="cpp")
    except Exception as exc:
        print(f"note: C++ conformal kernels unavailable ({exc}); timing baselines only")
        ops = None
    harness.set_threads(args.threads, rk)
    sizes = QUICK if args.quick else FULL
    rng = np.random.default_rng(args.seed)
    factories = [
        ("conformal_sweep", partial(sweep_cases, rk, ops, ref, rng, sizes["conformal_sweep"], args.quick)),
        ("r_scores", partial(r_cases, rk, ops, ref, rng, sizes["r_scores"], args.quick)),
        ("conformal_quantile", partial(quantile_cases, rk, ops, ref, rng, sizes["conformal_quantile"], args.quick)),
    ]
    results = harness.run_cases("conformal", factories, args, rk)
    harness.print_ratios_vs_rrag(results, unit="ms", exclude=())
    return 0


if __name__ == "__main__":
    sys.exit(main())
