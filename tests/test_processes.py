"""Every op takes arrays that went through pickle or another process as ordinary input, and
runs in worker processes (fork and spawn), including forks of a parent whose thread pool is
running.

The C++ bindings once compared dtypes by object identity, so a pickled float64 array was
rejected with "expected dtype float64, got float64"; multiprocessing, joblib and Ray all hand
workers such arrays.
"""

from __future__ import annotations

import multiprocessing as mp
import pickle
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import shared_memory

import numpy as np
import pytest
from op_cases import OP_CASES, as_plain, assert_same, call, make_case, make_in_child, run_in_child, start_pool

import rrag_kernels as rk

OPS = sorted(OP_CASES)
CHILD_TIMEOUT_S = 120  # a deadlocked child fails the test instead of hanging the suite


def _map_arrays(inputs, fn):
    return [fn(x) if isinstance(x, np.ndarray) else x for x in inputs]


def _map_kwargs(kwargs, fn):
    return {k: fn(v) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()}


@pytest.mark.parametrize("name", OPS)
def test_pickled_inputs(name):
    inputs, kwargs = make_case(name)
    expected = call(name, inputs, kwargs)
    roundtrip = lambda x: pickle.loads(pickle.dumps(x))  # noqa: E731
    assert_same(call(name, _map_arrays(inputs, roundtrip), _map_kwargs(kwargs, roundtrip)), expected)
    # Protocol 5 with out-of-band buffers gives read-only arrays over foreign memory.
    def out_of_band(x):
        buffers = []
        data = pickle.dumps(x, protocol=5, buffer_callback=buffers.append)
        return pickle.loads(data, buffers=[memoryview(b.raw()).toreadonly() for b in buffers])

    readonly = _map_arrays(inputs, out_of_band)
    assert all(not x.flags.writeable for x in readonly if isinstance(x, np.ndarray))
    assert_same(call(name, readonly, _map_kwargs(kwargs, out_of_band)), expected)


@pytest.mark.parametrize("name", OPS)
def test_non_native_and_unaligned_inputs(name):
    """Big-endian and unaligned copies of every array argument give the same result."""
    inputs, kwargs = make_case(name)
    expected = call(name, inputs, kwargs)

    def big_endian(x):
        return x.astype(x.dtype.newbyteorder(">")) if x.dtype.itemsize > 1 else x

    assert_same(call(name, _map_arrays(inputs, big_endian), _map_kwargs(kwargs, big_endian)), expected)

    def unaligned(x):
        if x.dtype.itemsize == 1 or x.size == 0:
            return x
        raw = np.zeros(x.nbytes + 1, dtype=np.uint8)
        view = raw[1:].view(x.dtype).reshape(x.shape)
        view[...] = x
        assert not view.flags.aligned
        return view

    assert_same(call(name, _map_arrays(inputs, unaligned), _map_kwargs(kwargs, unaligned)), expected)


def test_core_accepts_pickled_dtype_directly(core):
    """The C++ re-check itself compares dtypes by value (kind, size, byte order)."""
    scores = pickle.loads(pickle.dumps(np.array([0.1, 0.9])))
    assert scores.dtype is not np.dtype(np.float64)
    out = core.r_scores(scores, np.array([True, False]), np.array([0, 2]), 1.0, -np.inf)
    assert out.tolist() == [0.9]
    with pytest.raises(TypeError, match="^scores: expected dtype float64"):
        core.r_scores(scores.astype(">f8"), np.array([True, False]), np.array([0, 2]), 1.0, -np.inf)
    unaligned = np.zeros(17, dtype=np.uint8)[1:].view(np.float64)
    with pytest.raises(ValueError, match="^scores: array must be aligned"):
        core.r_scores(unaligned, np.array([True, False]), np.array([0, 2]), 1.0, -np.inf)


@pytest.mark.parametrize("name", OPS)
def test_shared_memory_inputs_written_by_another_process(name):
    """Inputs living in shared memory that a child process filled in."""
    inputs, kwargs = make_case(name)
    expected = call(name, inputs, kwargs)
    blocks = []

    def into_shared(x):
        shm = shared_memory.SharedMemory(create=True, size=max(x.nbytes, 1))
        blocks.append(shm)
        view = np.ndarray(x.shape, dtype=x.dtype, buffer=shm.buf)
        with ProcessPoolExecutor(1, mp_context=mp.get_context("spawn")) as pool:
            pool.submit(_fill_shared, shm.name, x).result(timeout=CHILD_TIMEOUT_S)
        return view

    try:
        shared = _map_arrays(inputs, into_shared)
        assert_same(call(name, shared, kwargs), expected)
        del shared
    finally:
        for shm in blocks:
            shm.close()
            shm.unlink()


def _fill_shared(shm_name: str, values: np.ndarray) -> None:
    shm = shared_memory.SharedMemory(name=shm_name)
    try:
        np.ndarray(values.shape, dtype=values.dtype, buffer=shm.buf)[...] = values
    finally:
        shm.close()


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_every_op_in_a_process_pool(method, core, restore_threads_and_simd):
    """Each op runs in pool workers, on inputs built in the parent and on inputs built in a
    child, with the workers' own thread pools in use; results equal the parent's."""
    if method not in mp.get_all_start_methods():
        pytest.skip(f"start method {method!r} is not available here")
    # Start the parent's pool threads first: a forked child inherits none of them and must
    # build its own (a pool copied mid-state would deadlock it).
    assert start_pool() >= 1
    expected = {name: as_plain(call(name, *make_case(name))) for name in OPS}
    with ProcessPoolExecutor(2, mp_context=mp.get_context(method)) as pool:
        runs = {name: pool.submit(run_in_child, name, *make_case(name), True) for name in OPS}
        built = {name: pool.submit(make_in_child, name, 0) for name in OPS}
        assert pool.submit(start_pool).result(timeout=CHILD_TIMEOUT_S) >= 1, "the child started no pool thread"
        for name in OPS:
            assert_same(runs[name].result(timeout=CHILD_TIMEOUT_S), expected[name], f"{name} (in a child)")
            inputs, kwargs = built[name].result(timeout=CHILD_TIMEOUT_S)
            assert_same(call(name, inputs, kwargs), expected[name], f"{name} (inputs from a child)")
