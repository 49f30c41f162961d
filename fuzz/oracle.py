"""What a decoded case may do: the fuzzing oracle (``fuzz/fuzz_ops.py``, ``tests/test_fuzz_corpus.py``).

:func:`check` runs a :class:`decode.Case` and raises :class:`Finding` when the contract is
broken; a crash, abort or hang of the process is a finding too (the fuzzer, or the test
process, dies). The contract:

1. ``_core.<entry point>`` on any arguments returns or raises ValueError / TypeError (it
   re-checks everything itself; MemoryError, OverflowError, SystemError, ... are findings).
2. The public op (``backend="cpp"``) returns or raises ValueError / TypeError whose message
   starts with ``"<argument>:"``, an argument of the op.
3. Thread count, forcing every kernel onto the pool, and the testing hooks
   (``_set_quantile_bands``, ``_set_sweep_tuning``) do not change a single bit of a result.
4. On inputs small enough (and, for the float kernels, tame values) the reference backend
   agrees: it rejects what the C++ backend rejects, and its results are bitwise equal for
   the discrete kernels, within float32 rounding for the cosine kernels, ``topk``: the same
   scores within rounding and the same padding.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import warnings
from typing import Any

import numpy as np

from decode import Case

ALLOWED = (ValueError, TypeError)
# Per op, how many input elements the reference backend may take (it is Python / NumPy).
REFERENCE_CAP = {"greedy_prune": 400, "lexical_opcodes": 3000, "select_pairs": 3000, "beam_step": 3000,
                 "conformal_sweep": 4000, "claim_token_ids": 400, "r_scores": 20000}
DEFAULT_REFERENCE_CAP = 60000
# Documented differences of the C++ backend's checks (see rrag_kernels.ops): it rejects a row
# whose squared norm overflows float32, which the float64 reference computes.
CPP_ONLY_REJECTIONS = ("overflows float32",)


class Finding(AssertionError):
    """The contract was broken; the message says how, and on which case."""


@dataclasses.dataclass
class Outcome:
    core: str  # "ok" or the exception type name
    op: str
    reference: str  # "ok", an exception name, or "" when not run


def _settings_defaults(core) -> None:
    core._set_quantile_bands(True)
    core._set_sweep_tuning(8.0, 8.0, True)


def _configure(core, threads: int, work_scale: float, level: str | None) -> None:
    core.set_num_threads(max(1, min(threads, core.max_threads())))
    core._set_min_work_scale(work_scale)
    if level is not None:
        core.set_simd_level(level)


def _names(op) -> set[str]:
    try:
        return set(inspect.signature(op).parameters)
    except (TypeError, ValueError):
        return set()


def _call(fn, args: tuple, kwargs: dict) -> tuple[Any, BaseException | None]:
    try:
        return fn(*args, **kwargs), None
    except ALLOWED as exc:
        return None, exc


def _plain(x: Any) -> Any:
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return {f.name: _plain(getattr(x, f.name)) for f in dataclasses.fields(x)}
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, (tuple, list)):
        return tuple(_plain(v) for v in x)
    return x


def same(a: Any, b: Any, where: str = "result") -> str | None:
    """None when ``a`` and ``b`` are bitwise equal (NaN == NaN, dtypes included), else where not."""
    a, b = _plain(a), _plain(b)
    if isinstance(b, dict):
        if not isinstance(a, dict) or a.keys() != b.keys():
            return f"{where}: keys differ"
        for k in b:
            d = same(a[k], b[k], f"{where}[{k!r}]")
            if d:
                return d
        return None
    if isinstance(b, tuple):
        if not isinstance(a, tuple) or len(a) != len(b):
            return f"{where}: lengths differ"
        for k, (x, y) in enumerate(zip(a, b)):
            d = same(x, y, f"{where}[{k}]")
            if d:
                return d
        return None
    if isinstance(b, np.ndarray) or isinstance(a, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        if a.dtype != b.dtype or a.shape != b.shape:
            return f"{where}: {a.dtype}{a.shape} != {b.dtype}{b.shape}"
        if a.dtype.kind == "f":
            eq = (a.view(np.uint8) == b.view(np.uint8)).all() or np.array_equal(a, b, equal_nan=True)
        else:
            eq = np.array_equal(a, b)
        if not eq:
            bad = np.flatnonzero(~((a == b) | ((a != a) & (b != b)))) if a.dtype.kind in "fc" else \
                np.flatnonzero(a.reshape(-1) != b.reshape(-1))
            k = int(bad[0]) if bad.size else 0
            return f"{where}: values differ at flat index {k}: {a.reshape(-1)[k]!r} != {b.reshape(-1)[k]!r}"
        return None
    if isinstance(b, float) and isinstance(a, float):
        return None if (a == b or (math.isnan(a) and math.isnan(b))) else f"{where}: {a!r} != {b!r}"
    return None if (type(a) is type(b) and a == b) else f"{where}: {a!r} != {b!r}"


def _close(cpp: Any, ref: Any, case: Case) -> str | None:
    """Float kernels: the same shape and dtype, values within float32 rounding of the reference."""
    cpp, ref = np.asarray(cpp), np.asarray(ref)
    if cpp.shape != ref.shape or cpp.dtype != ref.dtype:
        return f"cpp {cpp.dtype}{cpp.shape} != reference {ref.dtype}{ref.shape}"
    d = max((a.shape[-1] for a in case.core_args if isinstance(a, np.ndarray) and a.ndim == 2), default=1)
    tol = 8 * (d + 8) * 2.0**-24
    bad = ~(np.isclose(cpp, ref, rtol=0, atol=tol) | (np.isnan(cpp) & np.isnan(ref)))
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        return f"value {k}: cpp {cpp.reshape(-1)[k]!r} vs reference {ref.reshape(-1)[k]!r} (tol {tol:.2g})"
    return None


def _topk_close(cpp: Any, ref: Any, case: Case) -> str | None:
    """(scores, indices): the same -1 / -inf padding, scores within rounding, distinct indices."""
    (s, i), (rs, ri) = (np.asarray(x) for x in cpp), (np.asarray(x) for x in ref)
    if s.shape != rs.shape or s.dtype != rs.dtype or i.shape != ri.shape or i.dtype != ri.dtype:
        return f"shapes / dtypes: cpp {s.dtype}{s.shape} {i.dtype}{i.shape}, reference {rs.dtype}{rs.shape} " \
               f"{ri.dtype}{ri.shape}"
    pad = i < 0
    if not np.array_equal(pad, ri < 0):
        return "the -1 padding differs"
    if not np.all(s[pad] == -np.inf):
        return "padding scores are not -inf"
    d = _close(np.where(pad, 0, s), np.where(pad, 0, rs), case)
    if d:
        return "scores: " + d
    for row in i:
        real = row[row >= 0]
        if len(np.unique(real)) != len(real):
            return f"a repeated index in row {row.tolist()}"
    return None


def check(case: Case, core, ops) -> Outcome:
    """Run ``case``; raise :class:`Finding` on a broken contract (the case is in the message).

    Every setting it changes (threads, SIMD level, work scale, testing hooks, memory budget)
    is put back before it returns."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # e.g. numpy's casts of the odd dtypes the decoder makes
        return _check(case, core, ops)


def _check(case: Case, core, ops) -> Outcome:
    levels = list(core.available_simd_levels())
    level = levels[case.simd % len(levels)] if case.simd else None
    default_level = core.simd_level()
    default_threads = core.get_num_threads()
    budget = core.memory_budget()
    op = getattr(ops, case.target, None)
    try:
        for hook, args in case.settings:
            getattr(core, hook)(*args)
        _configure(core, case.threads, case.work_scale, level)

        # 1. the compiled entry point, directly
        try:
            _, core_err = _call(getattr(core, case.core_name), case.core_args, {})
        except Exception as exc:  # noqa: BLE001 - anything else is the finding
            raise Finding(f"_core.{case.core_name} raised {type(exc).__name__}: {exc}\n  {case.describe()}") from exc
        outcome = Outcome("ok" if core_err is None else type(core_err).__name__, "", "")
        if op is None:
            return outcome

        # 2. the public op
        names = _names(op) | set(case.names)
        try:
            result, op_err = _call(op, case.op_args, dict(case.op_kwargs, backend="cpp"))
        except Exception as exc:  # noqa: BLE001
            raise Finding(f"ops.{case.target} raised {type(exc).__name__}: {exc}\n  {case.describe()}") from exc
        outcome.op = "ok" if op_err is None else type(op_err).__name__
        if op_err is not None:
            head = str(op_err).split(":", 1)[0].strip()
            if head not in names:
                raise Finding(f"ops.{case.target}: {type(op_err).__name__} does not start with an argument name: "
                              f"{op_err}\n  {case.describe()}")

        # 3. the same result at the baseline configuration
        if op_err is None and (case.settings or case.work_scale != 1.0 or min(case.threads, core.max_threads()) > 1):
            _settings_defaults(core)
            _configure(core, 1, 1.0, level)
            try:
                again, err = _call(op, case.op_args, dict(case.op_kwargs, backend="cpp"))
            except Exception as exc:  # noqa: BLE001
                raise Finding(f"ops.{case.target} at 1 thread raised {type(exc).__name__}: {exc}\n  "
                              f"{case.describe()}") from exc
            diff = f"raised {err!r}" if err is not None else same(result, again)
            if diff:
                raise Finding(f"ops.{case.target}: result changed with threads / work scale / testing hooks: "
                              f"{diff}\n  {case.describe()}")

        # 4. the reference backend
        cap = REFERENCE_CAP.get(case.target, DEFAULT_REFERENCE_CAP)
        if not case.compare or case.size > cap:
            return outcome
        if op_err is not None and any(s in str(op_err) for s in CPP_ONLY_REJECTIONS):
            return outcome
        if op_err is None and case.compare in ("close", "topk") and not case.tame:
            return outcome
        try:
            ref, ref_err = _call(op, case.op_args, dict(case.op_kwargs, backend="reference"))
        except Exception as exc:  # noqa: BLE001
            raise Finding(f"ops.{case.target}(backend='reference') raised {type(exc).__name__}: {exc}\n  "
                          f"{case.describe()}") from exc
        outcome.reference = "ok" if ref_err is None else type(ref_err).__name__
        if (op_err is None) != (ref_err is None):
            raise Finding(f"ops.{case.target}: cpp {'accepted' if op_err is None else 'rejected'} what the reference "
                          f"{'rejected' if ref_err is not None else 'accepted'} (cpp: {op_err!r}; reference: "
                          f"{ref_err!r})\n  {case.describe()}")
        if op_err is None:
            if case.compare == "exact":
                diff = same(result, ref)
            elif case.compare == "close":
                diff = _close(result, ref, case)
            else:
                diff = _topk_close(result, ref, case)
            if diff:
                raise Finding(f"ops.{case.target}: cpp and reference differ: {diff}\n  {case.describe()}")
        return outcome
    finally:
        _settings_defaults(core)
        _configure(core, default_threads, 1.0, default_level)
        core.set_memory_budget(budget)
