"""No input kills the process: thread caps, memory budgets, size arguments near 2**63,
allocation failures inside parallel work, Ctrl-C during long kernels, and concurrent callers.

Each of these once ended the process (GOMP "Thread creation failed" for 40,000 threads, an
uncaught std::bad_alloc from inside an OpenMP region, a signed overflow of max_pairs, a ~30 GB
allocation for n_claims=10**9 with no pairs) or ignored Ctrl-C until a 9 s call returned.
"""

from __future__ import annotations

import _thread
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest
from op_cases import OP_CASES, assert_same, call, make_case

import rrag_kernels as rk

OPS = sorted(OP_CASES)


@pytest.fixture
def small_budget():
    """A 64 MiB memory budget for the test (the default is half the machine's memory)."""
    before = rk.get_memory_budget()
    rk.set_memory_budget(64 << 20)
    yield 64 << 20
    rk.set_memory_budget(before)


# ------------------------------------------------------------------ threads


@pytest.mark.parametrize("bad", [0, -1, 1025, 40_000, 80_000, 2**31, 2**63, 10**30])
def test_set_num_threads_rejects_values_outside_the_cap(bad, restore_threads_and_simd):
    core = restore_threads_and_simd
    before = rk.get_num_threads()
    with pytest.raises(ValueError, match=r"^n: must satisfy 1 <= n <= MAX_THREADS = 1024, got"):
        rk.set_num_threads(bad)
    if -(2**63) <= bad < 2**63:  # the C++ re-check (pybind11 refuses larger ints itself)
        with pytest.raises(ValueError, match=r"^n: the thread count must be in \[1, 1024\]"):
            core.set_num_threads(bad)
    assert rk.get_num_threads() == before
    assert core.max_threads() == 1024 == rk.show_config()["max_threads"]


@pytest.mark.parametrize("bad", [2.0, "2", None, True, np.float64(2)])
def test_set_num_threads_rejects_non_integers(bad):
    with pytest.raises(TypeError, match="^n: expected an int"):
        rk.set_num_threads(bad)


def test_many_threads_on_few_cores_give_identical_results(restore_threads_and_simd):
    """16 threads on this machine's cores: the pool grows, and every op's result is bitwise
    the one-thread result (every kernel uses the pool here: see restore_threads_and_simd)."""
    core = restore_threads_and_simd
    rk.set_num_threads(1)
    expected = {name: call(name, *make_case(name)) for name in OPS}
    rk.set_num_threads(16)
    for name in OPS:
        assert_same(call(name, *make_case(name)), expected[name], name)
    assert core._pool_size() >= 2


def test_concurrent_callers_get_the_same_results(restore_threads_and_simd):
    """Four Python threads call every op at once (the pool serves one job at a time; the
    others run on their own thread): same results as one caller, no deadlock."""
    rk.set_num_threads(2)
    expected = {name: call(name, *make_case(name)) for name in OPS}
    errors: list[BaseException] = []

    def worker(offset):
        try:
            for round_ in range(5):
                for name in OPS[offset:] + OPS[:offset]:
                    assert_same(call(name, *make_case(name)), expected[name], f"{name} round {round_}")
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(k * 3,)) for k in range(4)]
    for t in threads:
        t.start()
    # set_num_threads while kernels run: the counter is atomic, results must not change.
    for n in (1, 3, 2, 4, 2):
        rk.set_num_threads(n)
        time.sleep(0.01)
    for t in threads:
        t.join(timeout=120)
        assert not t.is_alive(), "a caller did not finish: deadlock?"
    assert not errors, errors[0]


# ------------------------------------------------------------------ memory budget and sizes


def test_memory_budget_setting():
    before = rk.get_memory_budget()
    assert before > 0 and rk.show_config()["memory_budget"] == before
    try:
        rk.set_memory_budget(12345)
        assert rk.get_memory_budget() == 12345
        with pytest.raises(ValueError, match=r"^nbytes: must satisfy 0 <= nbytes <= 2\*\*63 - 1"):
            rk.set_memory_budget(-1)
        with pytest.raises(TypeError, match="^nbytes: expected an int"):
            rk.set_memory_budget(1.5)
    finally:
        rk.set_memory_budget(before)


def _fails_fast(fn, match):
    t0 = time.perf_counter()
    with pytest.raises(ValueError, match=match):
        fn()
    assert time.perf_counter() - t0 < 5.0, "the budget check came after expensive work"


def test_nli_graph_huge_n_claims_fails_before_allocating(small_budget):
    empty_i = np.zeros(0, dtype=np.int64)
    empty_p = np.zeros((0, 3))
    for n_claims in (10**9, 2**62, 2**63 - 1):
        _fails_fast(lambda: rk.nli_graph(empty_i, empty_i, empty_p, empty_p, n_claims),
                    r"^n_claims: .* would need .* more than the memory budget")
    g = rk.nli_graph(empty_i, empty_i, empty_p, empty_p, 1000)
    assert g.support_count.shape == (1000,)


def test_topk_k_beyond_the_budget(small_budget):
    rng = np.random.default_rng(0)
    queries, corpus = rng.standard_normal((2000, 4), dtype=np.float32), rng.standard_normal((5000, 4), dtype=np.float32)
    _fails_fast(lambda: rk.topk_cosine(queries, corpus, 5000), r"^k: .* would need")
    with pytest.raises(ValueError, match=r"^k: must satisfy 1 <= k <= len\(corpus\)"):
        rk.topk_cosine(queries, corpus, 2**62)
    assert rk.topk_cosine(queries, corpus, 3)[0].shape == (2000, 3)


def test_cosine_matrix_output_beyond_the_budget(small_budget):
    a = np.ones((100_000, 1), dtype=np.float32)
    _fails_fast(lambda: rk.cosine_matrix(a, a), r"^b: the \(len\(a\), len\(b\)\) float32 output would need")


def test_conformal_sweep_n_splits_beyond_the_budget(small_budget):
    inputs, _ = make_case("conformal_sweep")
    for n_splits in (10**9, 2**62, 2**63 - 1):
        _fails_fast(lambda: rk.conformal_sweep(*inputs, alphas=[0.1, 0.2], n_splits=n_splits, seed=0),
                    r"^n_splits: the per-split outputs would need")


def test_select_pairs_max_pairs_near_int64_max():
    """max_pairs is capped at the number of pairs that exist before any arithmetic on it."""
    inputs, _ = make_case("select_pairs")
    expected = rk.select_pairs(*inputs, tau=0.2, max_pairs=None)
    for cap in (2**62, 2**63 - 1):
        assert_same(rk.select_pairs(*inputs, tau=0.2, max_pairs=cap), expected)


def test_select_pairs_more_pairs_than_the_budget(small_budget):
    """tau = 0 and no cap on 4,000 claims is ~8M pairs, ~400 MB: a ValueError naming
    max_pairs, not an abort from inside a worker."""
    rng = np.random.default_rng(1)
    n = 4000
    ids = rng.integers(0, 50, size=n * 3).astype(np.int64)
    off = np.arange(0, 3 * n + 1, 3, dtype=np.int64)
    src = np.arange(n, dtype=np.int64)
    _fails_fast(lambda: rk.select_pairs(ids, off, src, tau=0.0, max_pairs=None), r"^max_pairs: .* would need")
    assert len(rk.select_pairs(ids, off, src, tau=0.0, max_pairs=1000).i) == 1000


_MEMORY_ERROR_CHILD = textwrap.dedent(
    """
    import resource, sys
    import numpy as np
    import rrag_kernels as rk
    from rrag_kernels import _core

    _core._set_min_work_scale(0.0)
    rk.set_num_threads(2)
    rk.set_memory_budget(1 << 40)  # let the allocator, not the budget, say no
    rng = np.random.default_rng(0)
    n = 6000
    ids = rng.integers(0, 50, size=n * 3).astype(np.int64)
    off = np.arange(0, 3 * n + 1, 3, dtype=np.int64)
    src = np.arange(n, dtype=np.int64)
    rk.select_pairs(ids[:300], off[:101], src[:100], tau=0.0, max_pairs=None)  # pool threads up
    with open("/proc/self/status") as f:
        vm = next(int(line.split()[1]) for line in f if line.startswith("VmSize:")) * 1024
    resource.setrlimit(resource.RLIMIT_AS, (vm + (256 << 20), resource.RLIM_INFINITY))
    try:
        rk.select_pairs(ids, off, src, tau=0.0, max_pairs=None)  # ~18M pairs, ~430 MB per copy
    except MemoryError:
        print("MemoryError")
    # The process is intact: the next call works.
    print(len(rk.select_pairs(ids[:300], off[:101], src[:100], tau=0.0, max_pairs=None).i))
    """
)


def test_allocation_failure_inside_workers_is_a_memory_error():
    result = subprocess.run([sys.executable, "-c", _MEMORY_ERROR_CHILD], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"the child died (exit {result.returncode}):\n{result.stderr[-2000:]}"
    assert result.stdout.split() == ["MemoryError", str(100 * 99 // 2)], result.stdout + result.stderr[-2000:]


# ------------------------------------------------------------------ Ctrl-C


def _long_topk():
    """~6 s at the scalar SIMD level on 2 cores."""
    rng = np.random.default_rng(0)
    queries = rng.standard_normal((1536, 384), dtype=np.float32)
    corpus = rng.standard_normal((120_000, 384), dtype=np.float32)
    return lambda: rk.topk_cosine(queries, corpus, 10)


def _long_select_pairs():
    """~5 s: tau = 0 makes every one of the 450M cross-source pairs a candidate."""
    rng = np.random.default_rng(0)
    n = 30_000
    ids = rng.integers(0, 40, size=n * 4).astype(np.int64)
    off = np.arange(0, 4 * n + 1, 4, dtype=np.int64)
    return lambda: rk.select_pairs(ids, off, np.arange(n, dtype=np.int64), tau=0.0, max_pairs=1000)


def _long_greedy_prune():
    """~5 s of the serial heap loop: every claim has a negative score, so all are removed."""
    rng = np.random.default_rng(0)
    n, e = 3_000_000, 6_000_000
    scores = rng.uniform(-1.0, 0.0, size=n)
    i = rng.integers(0, n, size=e).astype(np.int64)
    j = ((i + rng.integers(1, n, size=e)) % n).astype(np.int64)
    w = rng.uniform(-0.1, 0.1, size=e)
    return lambda: rk.greedy_prune(scores, i, j, w)


@pytest.mark.parametrize("make_call", [_long_topk, _long_select_pairs, _long_greedy_prune],
                         ids=["topk_cosine", "select_pairs", "greedy_prune"])
def test_ctrl_c_interrupts_a_long_kernel_within_a_second(make_call, restore_threads_and_simd):
    """Ctrl-C (simulated with _thread.interrupt_main) stops one kernel call that would run
    for several seconds within about a second, as KeyboardInterrupt; the next call works.
    Before the signal can only be seen when the call returns, i.e. seconds later."""
    core = restore_threads_and_simd
    core.set_simd_level("scalar")  # slow enough that the call is still running
    core._set_min_work_scale(1.0)  # the default thresholds: this is how users run it
    rk.set_num_threads(2)
    fn = make_call()
    # interrupt_main does nothing unless Python handles SIGINT: make sure it does (something
    # imported earlier in the process may have installed another handler).
    handler = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(0.5, _thread.interrupt_main)
    t0 = time.perf_counter()
    timer.start()
    try:
        fn()
    except KeyboardInterrupt:
        elapsed = time.perf_counter() - t0
    else:
        elapsed = time.perf_counter() - t0
        timer.cancel()
        time.sleep(1.0)  # a pending interrupt lands here, inside the test, not in the next one
        pytest.fail(f"the kernel returned after {elapsed:.2f} s without the simulated Ctrl-C (SIGINT handler "
                    f"before the test: {handler!r})")
    finally:
        timer.join()
        if handler is not None:  # None: installed outside Python, cannot be put back from here
            signal.signal(signal.SIGINT, handler)
    # About a second on a quiet machine; on a loaded one (CI beside other jobs) the timer
    # thread and the kernel's check points both run later, so the bound scales with the load
    # per core (capped at 4 s: still well before the several seconds the call would take, which
    # grow with the load too).
    load = os.getloadavg()[0] / (os.cpu_count() or 1) if hasattr(os, "getloadavg") else 1.0
    bound = min(4.0, max(1.0, load))
    assert elapsed < 0.5 + bound, (f"KeyboardInterrupt came {elapsed - 0.5:.2f} s after Ctrl-C "
                                   f"(bound {bound:.2f} s at load {load:.2f} per core)")
    small = make_case("topk_cosine")
    assert_same(call("topk_cosine", *small), call("topk_cosine", *small))


@pytest.mark.parametrize("backend", ["reference", "cpp"])
def test_budget_is_checked_in_python_for_every_backend(backend, small_budget, core):
    """The ops check the budget before any backend allocates (the reference one would try a
    NumPy array of that size); the C++ re-check gives the same message."""
    empty_i, empty_p = np.zeros(0, dtype=np.int64), np.zeros((0, 3))
    with pytest.raises(ValueError, match=r"^n_claims: the per-claim counts .* would need 22\.4 GiB"):
        rk.nli_graph(empty_i, empty_i, empty_p, empty_p, 10**9, backend=backend)
    a = np.ones((100_000, 1), dtype=np.float32)
    with pytest.raises(ValueError, match=r"^b: the \(len\(a\), len\(b\)\) float32 output would need 37\.3 GiB"):
        rk.cosine_matrix(a, a, backend=backend)
    with pytest.raises(ValueError, match=r"^k: the \(len\(queries\), k\) outputs would need 11\.2 GiB"):
        rk.topk_cosine(a, a, 10_000, backend=backend)
    inputs, _ = make_case("conformal_sweep")
    with pytest.raises(ValueError, match=r"^n_splits: the per-split outputs would need"):
        rk.conformal_sweep(*inputs, alphas=[0.1], n_splits=10**9, seed=0, backend=backend)


def test_core_rechecks_the_budget(small_budget, core):
    """A direct _core call (no Python validation) is refused the same way."""
    with pytest.raises(ValueError, match=r"^n_claims: the per-claim counts .* would need 22\.4 GiB, more than "
                                         r"the memory budget of 64\.0 MiB"):
        core.nli_graph(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros((0, 3)),
                       np.zeros((0, 3)), 10**9, 0, 2, False)
    a = np.ones((100_000, 1), dtype=np.float32)
    with pytest.raises(ValueError, match=r"^b: the \(len\(a\), len\(b\)\) float32 output would need 37\.3 GiB"):
        core.cosine_matrix(a, a, True)
