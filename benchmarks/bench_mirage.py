"""Benchmarks of the MIRAGE claim-graph kernels against what a researcher writes today.

Kernels: select_pairs, nli_graph, greedy_prune, gate_stats, and the whole graph stage of
one query (issue 3).

Cases
-----
``select_pairs`` at N = 120, 1,000 and 5,000 claims (tau = 0.62, P_max = 400); the input is
the claims' tokens (strings for the Python loop, integer ids for everyone else), so
tokenisation is not timed here.
  * ``python-loop``   sets of tokens in a double loop over i < j, then sort + cap
                      (at N = 5,000 only with ``--slow-baselines``: ~15 s per call here)
  * ``scipy-sparse``  binary claim x token CSR matrix X, intersections X @ X.T, upper
                      triangle, vectorised filter, lexsort + cap
  * ``rrag-cpp``      ``select_pairs(..., backend="cpp")``
``nli_graph`` at N = 120 / P = 400 (one query), N = 10,000 / P = 100,000 and N = 100,000 /
P = 1,000,000 (batches), from the pairs and both directions' probabilities:
  * ``python-loop``   per pair: weights, kind, counts, adjacency lists, each list sorted
                      (up to P = 100,000)
  * ``numpy``         elementwise weights and kinds, ``bincount`` counts, one ``lexsort``
                      of both ends of the kept edges for the CSR adjacency
  * ``rrag-cpp``      ``nli_graph(..., backend="cpp")``
``greedy_prune`` at N = 1,000 / E = 5,000 and N = 10,000 / E = 100,000 (plus N = 120 /
E = 400, where the naive recompute-F greedy is affordable):
  * ``python-recompute``  recompute F(S \\ {c}) for every candidate, every step (N = 120)
  * ``python-incremental`` adjacency lists, gains updated at the neighbours, best by a scan
  * ``python-heapq``      the same with a lazy heapq (a careful researcher's version)
  * ``numpy-vectorised``  CSR arrays, ``argmax`` over the gains each step, ``np.add.at``
  * ``rrag-cpp``          ``greedy_prune(..., backend="cpp")`` (exact fixed-point)
``gate_stats`` at N = 120 / E = 400, N = 10,000 / E = 100,000 and N = 100,000 /
E = 1,000,000, on a kept set of ~70 % of the claims:
  * ``python-loop``   a loop over the edges and a set of the kept domains (up to E = 100,000)
  * ``numpy``         ``keep[i] & keep[j]``, ``count_nonzero`` per kind, ``unique`` domains
  * ``rrag-cpp``      ``gate_stats(..., backend="cpp")``
``graph_stage``: one query, N = 120 claims from 20 passages, from claim texts to the gate
statistics: tokenise, pairs, NLI graph (the NLI probabilities are given: NLI itself is
excluded), scores s(c) = ln(1 + n(c)) + 0.5 trust + 0.3 r, greedy pruning, gate stats.
  * ``python``        regex + sets + double loop, dict-based graph, incremental heapq greedy
  * ``numpy-scipy``   regex + vocabulary dict, scipy.sparse pairs, NumPy graph and greedy
  * ``rrag-cpp``      claim_token_ids -> select_pairs -> nli_graph -> greedy_prune -> gate_stats

Every provider's output is checked first (against ``rrag_kernels.reference`` where that
is affordable, and exactly against the first baseline); a wrong one gets no speed row.

Usage::

    python benchmarks/bench_mirage.py --quick
    python benchmarks/bench_mirage.py --kernel graph_stage
    python benchmarks/bench_mirage.py --quick --kernel nli_graph --kernel gate_stats
    python benchmarks/bench_mirage.py --slow-baselines      # also the N=5,000 Python loop
    python benchmarks/bench_mirage.py --nli-ms-per-pair 2.5  # print NLI's share of a query
"""

from __future__ import annotations

import argparse
import heapq
import math
import re
import sys
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402
from harness import BASELINE, REFERENCE, RRAG, Case, Provider  # noqa: E402

KERNELS = ("select_pairs", "nli_graph", "greedy_prune", "gate_stats", "graph_stage")
TAU, P_MAX = 0.62, 400
ALPHA, BETA = 0.5, 0.3
TOKEN_RE = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")

FULL = {"select_pairs": (120, 1_000, 5_000), "greedy_prune": ((120, 400), (1_000, 5_000), (10_000, 100_000)),
        "nli_graph": ((120, 400), (10_000, 100_000), (100_000, 1_000_000)),
        "gate_stats": ((120, 400), (10_000, 100_000), (100_000, 1_000_000))}
QUICK = {"select_pairs": (120, 1_000), "greedy_prune": ((120, 400), (1_000, 5_000)),
         "nli_graph": ((120, 400), (10_000, 100_000)), "gate_stats": ((120, 400), (10_000, 100_000))}
#: Above this many pairs / edges the Python-loop baselines are left out (seconds per call).
PYTHON_LOOP_MAX = 100_000


# --------------------------------------------------------------------------------------
# Synthetic claims: pseudo-words with English-like frequencies, near-duplicate claims
# across passages (the same fact restated), so that tau = 0.62 selects real pairs.
# --------------------------------------------------------------------------------------


class Corpus:
    """A 20,000-word vocabulary with Zipf-Mandelbrot frequencies p(r) ~ 1 / (r + 2.7)."""

    def __init__(self, rng: np.random.Generator, size: int = 20_000):
        letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
        self.words = ["".join(rng.choice(letters, size=int(rng.integers(2, 10)))) for _ in range(size)]
        p = 1.0 / (np.arange(size) + 2.7)
        self.p = p / p.sum()

    def claims(self, rng: np.random.Generator, n: int, per_source: int = 6) -> tuple[list[str], np.ndarray]:
        """``n`` claim texts (``per_source`` per passage) and their source ids; ~30% restate
        an earlier passage's claim with 1-3 words changed."""
        toks: list[list[int]] = []
        for c in range(n):
            if c >= per_source and rng.random() < 0.3:
                base = list(toks[int(rng.integers(0, c - c % per_source))])
                for _ in range(int(rng.integers(1, 4))):
                    base[int(rng.integers(len(base)))] = int(rng.choice(len(self.words), p=self.p))
                toks.append(base)
            else:
                toks.append(rng.choice(len(self.words), size=int(rng.integers(8, 26)), p=self.p).tolist())
        texts = [" ".join(self.words[t] for t in tk).capitalize() + "." for tk in toks]
        return texts, (np.arange(n) // per_source).astype(np.int64)


def regex_tokens(texts: list[str]) -> list[list[str]]:
    return [TOKEN_RE.findall(t.lower()) for t in texts]


# --------------------------------------------------------------------------------------
# Baselines: pairs
# --------------------------------------------------------------------------------------


def python_pairs(token_lists: list[list[str]], src: list[int], tau: float, cap: int | None):
    sets = [set(t) for t in token_lists]
    found = []
    n = len(sets)
    for a in range(n):
        sa = sets[a]
        if not sa:
            continue
        for b in range(a + 1, n):
            sb = sets[b]
            if src[a] == src[b] or not sb:
                continue
            ov = len(sa & sb) / min(len(sa), len(sb))
            if ov >= tau:
                found.append((-ov, a, b))
    found.sort()
    if cap is not None:
        found = found[:cap]
    return (np.array([f[1] for f in found], dtype=np.int64), np.array([f[2] for f in found], dtype=np.int64),
            np.array([-f[0] for f in found], dtype=np.float64))


def scipy_pairs(sp, ids: np.ndarray, off: np.ndarray, src: np.ndarray, tau: float, cap: int | None):
    n = len(off) - 1
    rows = np.repeat(np.arange(n), np.diff(off))
    x = sp.csr_matrix((np.ones(len(ids), dtype=np.int32), (rows, ids)), shape=(n, int(ids.max()) + 1 if len(ids) else 1))
    x.data[:] = 1  # duplicates were summed: a set
    size = np.diff(x.indptr)
    inter = sp.triu(x @ x.T, k=1, format="coo")
    r, c, v = inter.row.astype(np.int64), inter.col.astype(np.int64), inter.data
    cross = src[r] != src[c]
    r, c, v = r[cross], c[cross], v[cross]
    ov = v / np.minimum(size[r], size[c])
    keep = ov >= tau
    r, c, ov = r[keep], c[keep], ov[keep]
    order = np.lexsort((c, r, -ov))
    if cap is not None:
        order = order[:cap]
    return r[order], c[order], ov[order].astype(np.float64)


# --------------------------------------------------------------------------------------
# Baselines: greedy pruning (float64, as a researcher writes them)
# --------------------------------------------------------------------------------------


def python_greedy_recompute(s: list[float], ei: list[int], ej: list[int], w: list[float]):
    n = len(s)
    alive = [True] * n
    edges = list(zip(ei, ej, w))

    def f() -> float:
        return sum(s[c] for c in range(n) if alive[c]) + sum(x for a, b, x in edges if alive[a] and alive[b])

    order = []
    current = f()
    while True:
        best, best_gain = -1, 0.0
        for c in range(n):
            if alive[c]:
                alive[c] = False
                gain = f() - current
                alive[c] = True
                if best < 0 or gain > best_gain:
                    best, best_gain = c, gain
        if best < 0 or best_gain <= 0:
            break
        alive[best] = False
        order.append(best)
        current = f()
    return np.array(alive, dtype=bool), np.array(order, dtype=np.int64)


def _python_adjacency(s: list[float], ei: list[int], ej: list[int], w: list[float]):
    """Adjacency lists and initial removal gains, as both incremental baselines build them."""
    adj: list[list[tuple[int, float]]] = [[] for _ in range(len(s))]
    gain = [-x for x in s]
    for a, b, x in zip(ei, ej, w):
        adj[a].append((b, x))
        adj[b].append((a, x))
        gain[a] -= x
        gain[b] -= x
    return adj, gain


def python_greedy_scan(s: list[float], ei: list[int], ej: list[int], w: list[float]):
    """Incremental gains, but the best claim found by a scan over the remaining ones."""
    n = len(s)
    adj, gain = _python_adjacency(s, ei, ej, w)
    alive = [True] * n
    order = []
    while True:
        best = max((c for c in range(n) if alive[c]), key=lambda c: (gain[c], -c), default=-1)
        if best < 0 or gain[best] <= 0:
            break
        alive[best] = False
        order.append(best)
        for d, x in adj[best]:
            if alive[d]:
                gain[d] += x
    return np.array(alive, dtype=bool), np.array(order, dtype=np.int64)


def python_greedy_incremental(s: list[float], ei: list[int], ej: list[int], w: list[float]):
    n = len(s)
    adj, gain = _python_adjacency(s, ei, ej, w)
    heap = [(-g, c) for c, g in enumerate(gain)]
    heapq.heapify(heap)
    alive = [True] * n
    order = []
    while heap:
        neg, c = heapq.heappop(heap)
        if not alive[c] or -neg != gain[c]:
            continue  # stale entry
        if gain[c] <= 0:
            break
        alive[c] = False
        order.append(c)
        for d, x in adj[c]:
            if alive[d]:
                gain[d] += x
                heapq.heappush(heap, (-gain[d], d))
    return np.array(alive, dtype=bool), np.array(order, dtype=np.int64)


def numpy_greedy(s: np.ndarray, ei: np.ndarray, ej: np.ndarray, w: np.ndarray):
    n = len(s)
    gain = -s - np.bincount(ei, w, n) - np.bincount(ej, w, n)
    ends = np.concatenate([ei, ej])
    perm = np.argsort(ends, kind="stable")
    nbr = np.concatenate([ej, ei])[perm]
    wt = np.concatenate([w, w])[perm]
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(ends, minlength=n), out=indptr[1:])
    order = []
    while n:
        c = int(np.argmax(gain))  # first max: ties -> lowest index
        if not gain[c] > 0:
            break
        gain[c] = -np.inf  # removed claims stay at -inf
        order.append(c)
        lo, hi = indptr[c], indptr[c + 1]
        np.add.at(gain, nbr[lo:hi], wt[lo:hi])
    return gain != -np.inf, np.array(order, dtype=np.int64)


# --------------------------------------------------------------------------------------
# Cases
# --------------------------------------------------------------------------------------


@dataclass
class Libs:
    rk: Any
    ops: Any  # rrag_kernels.ops, or None when the C++ kernels are unavailable
    ref: Any
    sp: Any


def _pairs_equal(a, b) -> None:
    for x, y, name in zip(a, b, ("i", "j", "overlap")):
        x, y = harness.to_numpy(x), harness.to_numpy(y)
        if x.shape != y.shape or not np.array_equal(x, y):
            raise AssertionError(f"{name} differs: {x.shape} vs {y.shape}; first {x[:5]} vs {y[:5]}")


def _pairs_invariants(out, sets, src, tau) -> None:
    i, j, ov = (harness.to_numpy(x) for x in out)
    if len(i) > P_MAX:
        raise AssertionError(f"{len(i)} pairs > P_max")
    keys = list(zip((-ov).tolist(), i.tolist(), j.tolist()))
    if keys != sorted(keys):
        raise AssertionError("pairs not sorted by (overlap desc, i, j)")
    for a, b, o in zip(i.tolist(), j.tolist(), ov.tolist()):
        if not (a < b and src[a] != src[b] and o >= tau and o == len(sets[a] & sets[b]) / min(len(sets[a]), len(sets[b]))):
            raise AssertionError(f"pair ({a}, {b}, {o}) is not a valid pair")


def pair_cases(libs: Libs, corpus: Corpus, rng, sizes, quick: bool, slow: bool):
    for n in sizes:
        texts, src = corpus.claims(rng, n)
        tokens = regex_tokens(texts)
        ids, off = libs.ops.claim_token_ids(texts) if libs.ops else (None, None)
        src_list = src.tolist()
        sets = [set(t) for t in tokens]
        providers = []
        notes = []
        if n <= 1_000 or slow:
            providers.append(Provider("python-loop", partial(python_pairs, tokens, src_list, TAU, P_MAX), BASELINE,
                                      "sets in a double loop, sort, cap"))
        else:
            notes.append("python-loop left out at this size (~15 s per call here); --slow-baselines times it")
        if libs.sp is not None and ids is not None:
            providers.append(Provider("scipy-sparse", partial(scipy_pairs, libs.sp, ids, off, src, TAU, P_MAX), BASELINE,
                                      "X @ X.T on the binary claim x token matrix (built inside the timing)"))
        if libs.ops is not None:
            providers.append(Provider("rrag-cpp", partial(libs.ops.select_pairs, ids, off, src, tau=TAU, max_pairs=P_MAX,
                                                          backend="cpp"), RRAG))
        if quick and n <= 120 and libs.ref is not None:
            providers.append(Provider("reference", partial(libs.ref.select_pairs_ref, ids, off, src, TAU, P_MAX), REFERENCE))
        if n <= 1_000 and libs.ref is not None:
            want = libs.ref.select_pairs_ref(ids, off, src, TAU, P_MAX)
            check = lambda out, want=want: _pairs_equal(out, want)  # noqa: E731
        else:
            check = partial(_pairs_invariants, sets=sets, src=src_list, tau=TAU)
        n_pairs = len(python_pairs(tokens, src_list, TAU, None)[0]) if n <= 1_000 else None
        nbytes = 8.0 * (len(ids) + 2 * n) + 24 * P_MAX if ids is not None else 1.0
        notes.append(f"{sum(map(len, tokens))} tokens, {n // 6} sources"
                     + (f", {n_pairs} pairs pass tau before the cap" if n_pairs is not None else ""))
        yield Case("select_pairs", f"N={n} tau={TAU} P_max={P_MAX}", nbytes, 0.0, providers, check=check,
                   compare=_pairs_equal, notes=notes)


def random_graph(rng, n: int, e: int):
    """A claim graph shaped like MIRAGE's: ~35% contradiction edges (w = -(0.25..1)), the rest
    support (w = 0.2..1); scores ln(1 + support degree) + 0.5 trust + 0.3 r."""
    ei = rng.integers(0, n, size=e)
    ej = (ei + rng.integers(1, n, size=e)) % n
    contra = rng.random(e) < 0.35
    w = np.where(contra, -rng.uniform(0.25, 1.0, e), rng.uniform(0.2, 1.0, e))
    support = np.bincount(ei[~contra], minlength=n) + np.bincount(ej[~contra], minlength=n)
    trust = rng.choice([0.2, 0.4, 0.5, 0.65, 0.7, 0.8, 0.9], size=n)
    s = np.log1p(support) + ALPHA * trust + BETA * rng.uniform(0.3, 1.0, n)
    return s, ei.astype(np.int64), ej.astype(np.int64), w


def _prune_equal(out, anchor) -> None:
    for x, y, name in zip(out[:2], anchor[:2], ("keep", "removal_order")):
        x, y = harness.to_numpy(x), harness.to_numpy(y)
        if x.shape != y.shape or not np.array_equal(x, y):
            raise AssertionError(f"{name} differs ({x.shape} vs {y.shape})")


def _prune_local_optimum(out, s, ei, ej, w) -> None:
    keep = harness.to_numpy(out[0]).astype(bool)
    gain = -s - np.bincount(ei, w * (keep[ei] & keep[ej]), len(s)) - np.bincount(ej, w * (keep[ei] & keep[ej]), len(s))
    if (gain[keep] > 1e-9).any():
        raise AssertionError("a kept claim's removal would still raise F")
    if sorted(harness.to_numpy(out[1]).tolist()) != np.flatnonzero(~keep).tolist():
        raise AssertionError("removal order does not match the dropped claims")


def prune_cases(libs: Libs, rng, sizes, quick: bool):
    for n, e in sizes:
        s, ei, ej, w = random_graph(rng, n, e)
        sl, il, jl, wl = s.tolist(), ei.tolist(), ej.tolist(), w.tolist()
        providers = []
        if n <= 120:
            providers.append(Provider("python-recompute", partial(python_greedy_recompute, sl, il, jl, wl), BASELINE,
                                      "F(S \\ {c}) recomputed for every candidate at every step"))
        providers.append(Provider("python-incremental", partial(python_greedy_scan, sl, il, jl, wl), BASELINE,
                                  "adjacency lists, gains updated at the neighbours, best found by a scan"))
        providers.append(Provider("python-heapq", partial(python_greedy_incremental, sl, il, jl, wl), BASELINE,
                                  "as python-incremental with a lazy heapq instead of the scan"))
        providers.append(Provider("numpy-vectorised", partial(numpy_greedy, s, ei, ej, w), BASELINE,
                                  "argmax over the gains per step + np.add.at at the neighbours"))
        if libs.ops is not None:
            providers.append(Provider("rrag-cpp", partial(libs.ops.greedy_prune, s, ei, ej, w, backend="cpp"), RRAG))
        if n <= 120 and libs.ref is not None:
            want = libs.ref.greedy_prune_ref(s, ei, ej, w)
            check = lambda out, want=want: _prune_equal(out, want)  # noqa: E731
            if quick:
                providers.append(Provider("reference", partial(libs.ref.greedy_prune_ref, s, ei, ej, w), REFERENCE))
        else:
            check = partial(_prune_local_optimum, s=s, ei=ei, ej=ej, w=w)
        removed = len(numpy_greedy(s.copy(), ei, ej, w)[1])
        yield Case("greedy_prune", f"N={n} E={e}", 8.0 * (n + 3 * e) + n, 0.0, providers, check=check,
                   compare=_prune_equal, notes=[f"{removed} claims removed"])


# --------------------------------------------------------------------------------------
# NLI graph: weights, kinds, per-claim counts and the CSR adjacency of the kept edges
# --------------------------------------------------------------------------------------

E_COL, C_COL = 0, 2  # columns of p_entail and p_contr (the default label order)


def random_pairs_probs(rng, n: int, p: int):
    """``p`` cross pairs i < j among ``n`` claims and their NLI probabilities both ways
    (half the pairs lean towards entailment, a third towards contradiction)."""
    i = rng.integers(0, n - 1, size=p)
    j = i + 1 + (rng.integers(0, n - 1, size=p) % (n - 1 - i))
    lean = rng.choice([[3.0, 1.0, 1.0], [1.0, 3.0, 1.0], [1.0, 1.0, 3.0]], size=p, p=[0.5, 0.2, 0.3])

    def probs():
        x = rng.gamma(lean)
        return x / x.sum(axis=1, keepdims=True)

    return i.astype(np.int64), j.astype(np.int64), probs(), probs()


def python_nli_graph(i: list[int], j: list[int], fwd: list[list[float]], bwd: list[list[float]], n: int):
    """The loop a researcher writes: per pair the two directions' weights, the kind, the
    counts and the adjacency lists; then each claim's list sorted."""
    n_pairs = len(i)
    w_supp, w_contr, kind = [0.0] * n_pairs, [0.0] * n_pairs, [0] * n_pairs
    support, contradiction = [0] * n, [0] * n
    rows: list[list[tuple[int, int]]] = [[] for _ in range(n)]
    for e in range(n_pairs):
        pf, pb = fwd[e], bwd[e]
        ws = max(max(0.0, 2.0 * pf[E_COL] - 1.0), max(0.0, 2.0 * pb[E_COL] - 1.0))
        wc = max(pf[C_COL], pb[C_COL])
        k = 1 if ws > wc else (-1 if wc > ws else 0)
        w_supp[e], w_contr[e], kind[e] = ws, wc, k
        if k:
            a, b = i[e], j[e]
            count = support if k > 0 else contradiction
            count[a] += 1
            count[b] += 1
            rows[a].append((b, e))
            rows[b].append((a, e))
    indptr, neighbors, edge_ids = [0], [], []
    for c in range(n):
        for other, e in sorted(rows[c]):
            neighbors.append(other)
            edge_ids.append(e)
        indptr.append(len(neighbors))
    return (np.array(w_supp), np.array(w_contr), np.array(kind, dtype=np.int8), np.array(support),
            np.array(contradiction), np.array(indptr), np.array(neighbors, dtype=np.int64),
            np.array(edge_ids, dtype=np.int64))


def numpy_nli_graph(i: np.ndarray, j: np.ndarray, fwd: np.ndarray, bwd: np.ndarray, n: int):
    """Vectorised: weights and kinds elementwise, counts by bincount, the adjacency by one
    lexsort of both ends of every kept edge."""
    w_supp = np.maximum(np.maximum(0.0, 2.0 * fwd[:, E_COL] - 1.0), np.maximum(0.0, 2.0 * bwd[:, E_COL] - 1.0))
    w_contr = np.maximum(fwd[:, C_COL], bwd[:, C_COL])
    kind = np.where(w_supp > w_contr, 1, np.where(w_contr > w_supp, -1, 0)).astype(np.int8)
    sup, con = kind > 0, kind < 0
    support = np.bincount(i[sup], minlength=n) + np.bincount(j[sup], minlength=n)
    contradiction = np.bincount(i[con], minlength=n) + np.bincount(j[con], minlength=n)
    e = np.flatnonzero(kind != 0)
    row = np.concatenate([i[e], j[e]])
    other = np.concatenate([j[e], i[e]])
    eid = np.concatenate([e, e])
    order = np.lexsort((eid, other, row))
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(row, minlength=n), out=indptr[1:])
    return w_supp, w_contr, kind, support, contradiction, indptr, other[order], eid[order]


GRAPH_FIELDS = ("w_supp", "w_contr", "kind", "support_count", "contradiction_count", "indptr", "neighbors",
                "edge_ids")


def _graph_equal(out, anchor) -> None:
    for x, y, name in zip(out, anchor, GRAPH_FIELDS):
        x, y = harness.to_numpy(x), harness.to_numpy(y)
        if x.shape != y.shape or not np.array_equal(x, y):
            raise AssertionError(f"{name} differs ({x.shape} vs {y.shape})")


def graph_cases(libs: Libs, rng, sizes, quick: bool):
    for n, p in sizes:
        i, j, fwd, bwd = random_pairs_probs(rng, n, p)
        providers = []
        notes = []
        if p <= PYTHON_LOOP_MAX:
            lists = (i.tolist(), j.tolist(), fwd.tolist(), bwd.tolist())
            providers.append(Provider("python-loop", partial(python_nli_graph, *lists, n), BASELINE,
                                      "per pair in Python: weights, kind, counts, adjacency lists, then sorted"))
        else:
            notes.append(f"python-loop left out above {PYTHON_LOOP_MAX:,} pairs (seconds per call)")
        providers.append(Provider("numpy", partial(numpy_nli_graph, i, j, fwd, bwd, n), BASELINE,
                                  "elementwise weights, bincount counts, lexsort adjacency"))
        if libs.ops is not None:
            providers.append(Provider("rrag-cpp", partial(libs.ops.nli_graph, i, j, fwd, bwd, n, backend="cpp"), RRAG))
        if libs.ref is not None and p <= PYTHON_LOOP_MAX:
            want = libs.ref.nli_graph_ref(i, j, fwd, bwd, n, E_COL, C_COL)
            check = lambda out, want=want: _graph_equal(out, want)  # noqa: E731
            if quick and p <= 400:
                providers.append(Provider("reference", partial(libs.ref.nli_graph_ref, i, j, fwd, bwd, n, E_COL, C_COL),
                                          REFERENCE))
        else:
            want = numpy_nli_graph(i, j, fwd, bwd, n)
            check = lambda out, want=want: _graph_equal(out, want)  # noqa: E731
        kinds = np.bincount(want[2] + 1, minlength=3)
        notes.append(f"{kinds[2]} support, {kinds[0]} contradiction, {kinds[1]} ignored edges")
        # read i, j and both (P, 3) probability blocks; write 2 weights + kind per pair, the
        # counts and indptr per claim and both ends of every kept edge
        kept = int(kinds[0] + kinds[2])
        nbytes = 8.0 * (2 * p + 6 * p) + 17.0 * p + 8.0 * (3 * n + 1) + 16.0 * 2 * kept
        yield Case("nli_graph", f"N={n} P={p}", nbytes, 0.0, providers, check=check, compare=_graph_equal,
                   notes=notes)


# --------------------------------------------------------------------------------------
# Gate statistics of a defended set
# --------------------------------------------------------------------------------------


def random_gate_input(rng, n: int, e: int):
    """A kept set (~70 % of the claims), edges of kind +1 / -1 / 0 and domain ids (~5 %
    unknown, as claims without a URL)."""
    keep = rng.random(n) < 0.7
    ei = rng.integers(0, n, size=e).astype(np.int64)
    ej = ((ei + rng.integers(1, n, size=e)) % n).astype(np.int64)
    kind = rng.choice(np.array([1, -1, 0], dtype=np.int8), size=e, p=[0.55, 0.3, 0.15])
    domain_ids = np.where(rng.random(n) < 0.05, -1, rng.integers(0, max(n // 6, 1), size=n)).astype(np.int64)
    return keep, ei, ej, kind, domain_ids


def python_gate_stats(keep: list[bool], ei: list[int], ej: list[int], kind: list[int], dom: list[int],
                      eps: float = 1e-9) -> dict:
    sup = con = 0
    for a, b, k in zip(ei, ej, kind):
        if keep[a] and keep[b]:
            if k > 0:
                sup += 1
            elif k < 0:
                con += 1
    domains = {d if d >= 0 else -1 for d, k in zip(dom, keep) if k}
    denom = sup + con + eps
    return {"n_kept": sum(keep), "n_support": sup, "n_contradiction": con,
            "r_contr": con / denom if denom > 0 else 0.0, "n_domains": len(domains)}


def numpy_gate_stats(keep: np.ndarray, ei: np.ndarray, ej: np.ndarray, kind: np.ndarray, dom: np.ndarray,
                     eps: float = 1e-9) -> dict:
    both = keep[ei] & keep[ej]
    sup = int(np.count_nonzero(both & (kind > 0)))
    con = int(np.count_nonzero(both & (kind < 0)))
    d = dom[keep]
    n_domains = len(np.unique(d[d >= 0])) + int((d < 0).any())
    denom = sup + con + eps
    return {"n_kept": int(keep.sum()), "n_support": sup, "n_contradiction": con,
            "r_contr": con / denom if denom > 0 else 0.0, "n_domains": n_domains}


def _stats_equal(out, anchor) -> None:
    if dict(out) != dict(anchor):
        raise AssertionError(f"gate stats differ: {out} vs {anchor}")


def gate_cases(libs: Libs, rng, sizes, quick: bool):
    for n, e in sizes:
        keep, ei, ej, kind, dom = random_gate_input(rng, n, e)
        providers = []
        notes = []
        if e <= PYTHON_LOOP_MAX:
            lists = (keep.tolist(), ei.tolist(), ej.tolist(), kind.tolist(), dom.tolist())
            providers.append(Provider("python-loop", partial(python_gate_stats, *lists), BASELINE,
                                      "a loop over the edges, a set of the kept domains"))
        else:
            notes.append(f"python-loop left out above {PYTHON_LOOP_MAX:,} edges (seconds per call)")
        providers.append(Provider("numpy", partial(numpy_gate_stats, keep, ei, ej, kind, dom), BASELINE,
                                  "fancy-indexed keep of both ends, count_nonzero, unique domains"))
        if libs.ops is not None:
            providers.append(Provider("rrag-cpp", partial(libs.ops.gate_stats, keep, ei, ej, kind, dom, backend="cpp"),
                                      RRAG))
        if libs.ref is not None and e <= PYTHON_LOOP_MAX:
            want = libs.ref.gate_stats_ref(keep, ei, ej, kind, dom)
            if quick and e <= 400:
                providers.append(Provider("reference", partial(libs.ref.gate_stats_ref, keep, ei, ej, kind, dom),
                                          REFERENCE))
        else:
            want = numpy_gate_stats(keep, ei, ej, kind, dom)
        notes.append(f"stats {want}")
        nbytes = float(keep.nbytes + ei.nbytes + ej.nbytes + kind.nbytes + dom.nbytes)
        yield Case("gate_stats", f"N={n} E={e}", nbytes, 0.0, providers,
                   check=lambda out, want=want: _stats_equal(out, want), compare=_stats_equal, notes=notes)


# --------------------------------------------------------------------------------------
# The whole graph stage of one query
# --------------------------------------------------------------------------------------


@dataclass
class Query:
    texts: list[str]
    src: np.ndarray
    trust: np.ndarray
    r: np.ndarray
    domain_ids: np.ndarray
    probs_fwd: np.ndarray  # (P_MAX, 3): NLI output for the k-th selected pair
    probs_bwd: np.ndarray


def make_query(corpus: Corpus, rng, n: int = 120, passages: int = 20) -> Query:
    texts, src = corpus.claims(rng, n, per_source=n // passages)
    trust = rng.choice([0.2, 0.4, 0.5, 0.65, 0.7, 0.8, 0.9], size=passages)[src]
    r = rng.uniform(0.3, 1.0, passages)[src]
    domain_ids = rng.integers(-1, 12, size=passages)[src]  # -1: no URL ("unknown")

    def probs():
        p = rng.dirichlet([1.0, 1.0, 1.0], size=P_MAX)
        p[: P_MAX // 2, 0] += 1.0  # half the pairs lean towards entailment
        return p / p.sum(axis=1, keepdims=True)

    return Query(texts, src, trust, r, domain_ids.astype(np.int64), probs(), probs())


def stage_python(q: Query):
    src = q.src.tolist()
    i, j, _ = python_pairs(regex_tokens(q.texts), src, TAU, P_MAX)
    i, j = i.tolist(), j.tolist()
    edges = {}
    n_support = [0] * len(src)
    for e, (a, b) in enumerate(zip(i, j)):
        pf, pb = q.probs_fwd[e], q.probs_bwd[e]
        ws = max(max(0.0, 2.0 * pf[0] - 1.0), max(0.0, 2.0 * pb[0] - 1.0))
        wc = max(pf[2], pb[2])
        kind = 1 if ws > wc else (-1 if wc > ws else 0)
        edges[(a, b, e)] = (ws, wc, kind)
        if kind == 1:
            n_support[a] += 1
            n_support[b] += 1
    s = [math.log1p(n_support[c]) + ALPHA * q.trust[c] + BETA * q.r[c] for c in range(len(src))]
    live = [(a, b, ws - wc) for (a, b, _), (ws, wc, k) in edges.items() if k != 0]
    keep, order = python_greedy_incremental(s, [x[0] for x in live], [x[1] for x in live], [x[2] for x in live])
    sup = sum(1 for (a, b, _), v in edges.items() if v[2] == 1 and keep[a] and keep[b])
    con = sum(1 for (a, b, _), v in edges.items() if v[2] == -1 and keep[a] and keep[b])
    doms = {int(d) if d >= 0 else -1 for d, k in zip(q.domain_ids, keep) if k}
    stats = {"n_kept": int(keep.sum()), "n_support": sup, "n_contradiction": con,
             "r_contr": con / (sup + con + 1e-9), "n_domains": len(doms)}
    return keep, order, stats


def stage_numpy(sp, q: Query):
    vocab: dict[str, int] = {}
    ids, off = [], [0]
    for toks in regex_tokens(q.texts):
        ids.extend(vocab.setdefault(t, len(vocab)) for t in toks)
        off.append(len(ids))
    ids, off = np.asarray(ids, dtype=np.int64), np.asarray(off, dtype=np.int64)
    i, j, _ = scipy_pairs(sp, ids, off, q.src, TAU, P_MAX)
    pf, pb = q.probs_fwd[: len(i)], q.probs_bwd[: len(i)]
    ws = np.maximum(np.maximum(0.0, 2.0 * pf[:, 0] - 1.0), np.maximum(0.0, 2.0 * pb[:, 0] - 1.0))
    wc = np.maximum(pf[:, 2], pb[:, 2])
    kind = np.where(ws > wc, 1, np.where(wc > ws, -1, 0))
    n = len(q.src)
    sup_e = kind == 1
    n_support = np.bincount(i[sup_e], minlength=n) + np.bincount(j[sup_e], minlength=n)
    s = np.log1p(n_support) + ALPHA * q.trust + BETA * q.r
    m = kind != 0
    keep, order = numpy_greedy(s, i[m], j[m], (ws - wc)[m])
    both = keep[i] & keep[j]
    sup, con = int((both & (kind == 1)).sum()), int((both & (kind == -1)).sum())
    d = q.domain_ids[keep]
    n_dom = len(np.unique(d[d >= 0])) + int((d < 0).any())
    return keep, order, {"n_kept": int(keep.sum()), "n_support": sup, "n_contradiction": con,
                         "r_contr": con / (sup + con + 1e-9), "n_domains": n_dom}


def stage_rrag(ops, q: Query):
    ids, off = ops.claim_token_ids(q.texts)
    i, j, _ = ops.select_pairs(ids, off, q.src, tau=TAU, max_pairs=P_MAX)
    p = len(i)
    graph = ops.nli_graph(i, j, q.probs_fwd[:p], q.probs_bwd[:p], len(q.src))
    s = np.log1p(graph.support_count) + ALPHA * q.trust + BETA * q.r
    m = graph.kind != 0
    keep, order, _ = ops.greedy_prune(s, i[m], j[m], (graph.w_supp - graph.w_contr)[m])
    return keep, order, ops.gate_stats(keep, i, j, graph.kind, q.domain_ids)


def _stage_equal(out, anchor) -> None:
    _prune_equal(out, anchor)
    if out[2] != anchor[2]:
        raise AssertionError(f"gate stats differ: {out[2]} vs {anchor[2]}")


def stage_cases(libs: Libs, corpus: Corpus, rng, nli_ms_per_pair: float | None):
    q = make_query(corpus, rng)
    providers = [Provider("python", partial(stage_python, q), BASELINE,
                          "regex, sets, double loop, dict graph, heapq greedy, Python gate")]
    if libs.sp is not None:
        providers.append(Provider("numpy-scipy", partial(stage_numpy, libs.sp, q), BASELINE,
                                  "regex + vocabulary dict, scipy.sparse pairs, NumPy graph/greedy/gate"))
    if libs.ops is not None:
        providers.append(Provider("rrag-cpp", partial(stage_rrag, libs.ops, q), RRAG,
                                  "target: <= 100 us per query"))
    anchor = stage_python(q)
    n_pairs = len(python_pairs(regex_tokens(q.texts), q.src.tolist(), TAU, P_MAX)[0])
    notes = [f"{n_pairs} pairs -> {2 * n_pairs} NLI calls per query (not timed); {int((~anchor[0]).sum())} claims "
             f"pruned; gate stats {anchor[2]}"]
    if nli_ms_per_pair:
        notes.append(f"NLI at {nli_ms_per_pair} ms per direction-pair: {2 * n_pairs * nli_ms_per_pair:.1f} ms per query "
                     "(its share of the query is printed after the table)")
    yield Case("graph_stage", "N=120 claims, 20 passages, one query", 1.0, 0.0, providers,
               check=lambda out: _stage_equal(out, anchor), compare=_stage_equal, notes=notes)


# --------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    harness.add_common_args(parser, KERNELS)
    parser.add_argument("--slow-baselines", action="store_true",
                        help="also time the Python pair loop at N=5,000 (~15 s per call)")
    parser.add_argument("--nli-ms-per-pair", type=float, default=None, metavar="MS",
                        help="cost of one NLI call, to print NLI's share of a query's time")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    rk = harness.import_rrag()
    try:
        from rrag_kernels import ops
        from rrag_kernels import reference as ref
        ops.claim_token_ids(["probe"], backend="cpp")
    except Exception as exc:  # unbuilt package: baselines only
        print(f"note: rrag_kernels C++ graph kernels unavailable ({exc}); timing baselines only")
        ops, ref = None, None
    sp = harness.import_optional("scipy")
    if sp is not None:
        import scipy.sparse as sp
    else:
        print("note: scipy not installed; the scipy.sparse baselines are left out")
    harness.set_threads(args.threads, rk)
    libs = Libs(rk, ops, ref, sp)
    sizes = QUICK if args.quick else FULL
    rng = np.random.default_rng(args.seed)
    corpus = Corpus(np.random.default_rng(12345))
    factories = [
        ("select_pairs", partial(pair_cases, libs, corpus, rng, sizes["select_pairs"], args.quick, args.slow_baselines)),
        ("nli_graph", partial(graph_cases, libs, rng, sizes["nli_graph"], args.quick)),
        ("greedy_prune", partial(prune_cases, libs, rng, sizes["greedy_prune"], args.quick)),
        ("gate_stats", partial(gate_cases, libs, rng, sizes["gate_stats"], args.quick)),
        ("graph_stage", partial(stage_cases, libs, corpus, rng, args.nli_ms_per_pair)),
    ]
    results = harness.run_cases("mirage", factories, args, rk)
    harness.print_ratios_vs_rrag(results, unit="us", exclude=("reference",))
    for res in results:
        if res.case.kernel == "graph_stage" and args.nli_ms_per_pair:
            rows = {row["provider"]: float(row["median_ms"]) for row in res.rows}
            n_pairs = int(res.case.notes[0].split()[0])
            nli = 2 * n_pairs * args.nli_ms_per_pair
            for name, ms in rows.items():
                print(f"graph_stage: with {name}, NLI is {100 * nli / (nli + ms):.2f}% of a query "
                      f"({nli:.1f} ms NLI + {ms:.3f} ms graph stage)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
