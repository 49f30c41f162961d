"""Benchmarks of the conformal-factuality kernels against what a researcher writes today.

Cases (responses x 8 claims, 80 % supported, continuous scores; 5 alphas x 100 splits,
calib_fraction 0.5, a = 1):

``conformal_sweep`` at n = 10,000 and 1,000,000 responses:
  * ``python-loop``   per-response r-score in Python (Mohri et al.'s loop), then per split
                      and alpha ``np.quantile`` (at level (k - 0.5)/n, method="inverted_cdf",
                      which selects the k-th order statistic robustly); n = 10,000 only
  * ``numpy``         vectorised r-scores (lexsort + segmented cumsums), then per split one
                      ``np.partition`` of the calibration r-scores at all ranks, and metrics on
                      a padded (n, 8) score matrix
  * ``rrag-cpp``      ``conformal_sweep(..., backend="cpp")``
  Every provider draws the same splits (the SplitMix64 keys of
  ``rrag_kernels.reference.conformal_sweep``; the baselines compute them with NumPy), so their
  q_hat must agree exactly and their metrics to 1e-12.
``r_scores`` at n = 1,000,000: ``numpy`` (as above) against ``rrag-cpp``, with the memory
floor of reading scores + labels + offsets and writing r.

Usage::

    python benchmarks/bench_conformal.py --quick
    python benchmarks/bench_conformal.py --kernel conformal_sweep
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

KERNELS = ("conformal_sweep", "r_scores")
P = 8
ALPHAS = np.array([0.05, 0.1, 0.15, 0.2, 0.3])
N_SPLITS = 100
FULL = {"conformal_sweep": (10_000, 1_000_000), "r_scores": (1_000_000,)}
QUICK = {"conformal_sweep": (10_000,), "r_scores": (100_000,)}


def make_data(rng: np.random.Generator, n: int):
    off = np.arange(0, (n + 1) * P, P, dtype=np.int64)
    s = rng.random(n * P)
    ok = rng.random(n * P) < 0.8
    return s, ok, off


# ------------------------------------------------------------------------------ baselines


def r_scores_python(s, ok, off, a=1.0, sentinel=-np.inf):
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


def _split_masks(ref, seed, n, n_splits):
    for sp in range(n_splits):
        yield ref.calibration_mask_ref(seed, sp, n, 0.5)


def _metrics(S, U, p, test, q):
    """Per alpha metrics on the test rows of the padded (n, P) score matrix S (NaN padding)."""
    St, Ut, pt = S[test], U[test], p[test]
    n_test = St.shape[0]
    fs, ne, ret, fsne = [], [], [], []
    for qa in q:
        kept = (St >= qa).sum(axis=1)
        f = Ut < qa
        e = kept > 0
        fs.append(f.mean())
        ne.append(e.mean())
        fsne.append((f & e).sum() / e.sum() if e.any() else np.nan)
        ret.append((kept / pt).sum() / n_test)
    return fs, ret, ne, fsne


def sweep_baseline(ref, s, ok, off, seed, *, python: bool):
    n = off.shape[0] - 1
    p = np.diff(off)
    r = r_scores_python(s, ok, off) if python else r_scores_numpy(s, ok, off)
    S = s.reshape(n, P)
    U = np.where(ok, -np.inf, s).reshape(n, P).max(axis=1)
    out = {k: np.empty((N_SPLITS, ALPHAS.shape[0])) for k in
           ("q_hat", "fully_supported", "retention", "non_empty", "supported_given_non_empty")}
    for sp, cal in enumerate(_split_masks(ref, seed, n, N_SPLITS)):
        rc = r[cal]
        m = rc.shape[0]
        ks = [math.ceil((m + 1) * (1 - al)) for al in ALPHAS.tolist()]
        if python:
            q = [np.quantile(rc, (k - 0.5) / m, method="inverted_cdf") if k <= m else np.inf for k in ks]
        else:
            valid = sorted({k - 1 for k in ks if k <= m})
            part = np.partition(rc, valid) if valid else rc
            q = [part[k - 1] if k <= m else np.inf for k in ks]
        out["q_hat"][sp] = q
        fs, ret, ne, fsne = _metrics(S, U, p, ~cal, q)
        out["fully_supported"][sp], out["retention"][sp] = fs, ret
        out["non_empty"][sp], out["supported_given_non_empty"][sp] = ne, fsne
    return out


# ------------------------------------------------------------------------------ cases


def sweep_cases(rk, co, ref, rng, sizes, quick):
    cases = []
    for n in sizes:
        s, ok, off = make_data(rng, n)
        seed = 12345

        def check(out, n=n, s=s, ok=ok, off=off):
            q = out["q_hat"] if isinstance(out, dict) else out.q_hat[:, :, 0]
            sub = min(n, 2000)
            # spot check: split 0's q_hat from the reference on the full data
            r = ref.r_scores_ref(s[: sub * P], ok[: sub * P], off[: sub + 1]) if n <= 2000 else None
            assert q.shape == (N_SPLITS, ALPHAS.shape[0]), q.shape
            if r is not None:
                cal = ref.calibration_mask_ref(seed, 0, n, 0.5)
                np.testing.assert_array_equal(q[0], ref.conformal_quantile_ref(r[cal], ALPHAS))

        def compare(out, anchor):
            get = (lambda o, k: o[k]) if isinstance(out, dict) else (lambda o, k: getattr(o, k))
            qa = anchor["q_hat"]
            qo = get(out, "q_hat") if isinstance(out, dict) else out.q_hat[:, :, 0]
            if not np.array_equal(qo, qa):
                raise AssertionError("q_hat differs from the anchor baseline")
            for k in ("fully_supported", "retention", "non_empty", "supported_given_non_empty"):
                if not np.allclose(get(out, k), anchor[k], rtol=0, atol=1e-12, equal_nan=True):
                    raise AssertionError(f"{k} differs from the anchor baseline")

        providers = []
        if n <= 10_000:
            providers.append(Provider("python-loop", partial(sweep_baseline, ref, s, ok, off, seed, python=True),
                                      BASELINE, "Python r-score loop + np.quantile per split and alpha"))
        providers.append(Provider("numpy", partial(sweep_baseline, ref, s, ok, off, seed, python=False), BASELINE,
                                  "vectorised r-scores + np.partition per split"))
        if co is not None:
            providers.append(Provider("rrag-cpp", partial(co.conformal_sweep, s, ok, off, alphas=ALPHAS,
                                                          n_splits=N_SPLITS, seed=seed, backend="cpp"), RRAG))
        nbytes = s.nbytes + ok.nbytes + off.nbytes
        cases.append(Case("conformal_sweep", f"n={n} p={P} alphas={len(ALPHAS)} splits={N_SPLITS}",
                          float(nbytes), 0.0, providers, check, compare))
    return cases


def r_cases(rk, co, ref, rng, sizes, quick):
    cases = []
    for n in sizes:
        s, ok, off = make_data(rng, n)

        def check(out, s=s, ok=ok, off=off):
            sub = 1000
            np.testing.assert_array_equal(np.asarray(out)[:sub], ref.r_scores_ref(s[: sub * P], ok[: sub * P], off[: sub + 1]))

        def compare(out, anchor):
            if not np.array_equal(np.asarray(out), anchor):
                raise AssertionError("r differs from the numpy baseline")

        providers = [Provider("numpy", partial(r_scores_numpy, s, ok, off), BASELINE, "lexsort + segmented cumsums")]
        if co is not None:
            providers.append(Provider("rrag-cpp", partial(co.r_scores, s, ok, off, backend="cpp"), RRAG))
        nbytes = s.nbytes + ok.nbytes + off.nbytes + 8 * n
        cases.append(Case("r_scores", f"n={n} p={P}", float(nbytes), 0.0, providers, check, compare))
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
        from rrag_kernels import _conformal_ops as co

        co.r_scores(np.zeros(1), np.ones(1, dtype=bool), np.array([0, 1]), backend="cpp")
    except Exception as exc:
        print(f"note: C++ conformal kernels unavailable ({exc}); timing baselines only")
        co = None
    harness.set_threads(args.threads, rk)
    sizes = QUICK if args.quick else FULL
    rng = np.random.default_rng(args.seed)
    factories = [
        ("conformal_sweep", partial(sweep_cases, rk, co, ref, rng, sizes["conformal_sweep"], args.quick)),
        ("r_scores", partial(r_cases, rk, co, ref, rng, sizes["r_scores"], args.quick)),
    ]
    results = harness.run_cases("conformal", factories, args, rk)
    harness.print_ratios_vs_rrag(results, unit="ms", exclude=())
    return 0


if __name__ == "__main__":
    sys.exit(main())
