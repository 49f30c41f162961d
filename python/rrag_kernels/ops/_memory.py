"""The memory budget: the most bytes one op call may allocate, checked before allocating.

Its own module because it reads the compiled module (``_dispatch``, which holds the value
when the extension is built) while ``_dispatch`` reads the input checks of ``_validation``:
kept apart, the three import in one direction (``_validation`` <- ``_dispatch`` <- ``_memory``).
"""

from __future__ import annotations

import os
from typing import Any

from ._dispatch import core_cached
from ._validation import check_int

__all__ = ["check_memory_budget", "get_memory_budget", "set_memory_budget"]

#: The budget when the compiled module is missing (it keeps its own otherwise).
_fallback_budget: list[int] = []


def _default_budget() -> int:
    env = os.environ.get("RRAG_MEMORY_BUDGET", "")
    if env.strip().isdigit():
        return int(env)
    try:
        return os.sysconf("SC_PHYS_PAGES") // 2 * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 8 << 30


def get_memory_budget() -> int:
    """The most bytes one op call may allocate for outputs and scratch (see
    ``rrag_kernels.set_memory_budget``); the C++ kernels hold the value and re-check it."""
    core = core_cached()
    if core is not None:
        return int(core.memory_budget())
    if not _fallback_budget:
        _fallback_budget.append(_default_budget())
    return _fallback_budget[0]


def set_memory_budget(nbytes: Any) -> None:
    """Set the most bytes one op call may allocate for its outputs and scratch.

    An op whose sizes would need more (``topk_cosine``'s ``k``, ``cosine_matrix``'s output,
    ``nli_graph``'s ``n_claims``, ``select_pairs``' pairs, ``conformal_sweep``'s
    ``n_splits``) raises ValueError naming that argument before allocating. The default is
    half the physical memory, or ``RRAG_MEMORY_BUDGET`` (bytes) when set before import.
    The compiled module holds the value (and re-checks it); without it, the reference
    backend uses it.

    Parameters
    ----------
    nbytes : int, 0 <= nbytes < 2**63
    """
    nbytes = check_int(nbytes, "nbytes", minimum=0, maximum=2**63 - 1, maximum_is="2**63 - 1")
    core = core_cached()
    if core is not None:
        core.set_memory_budget(nbytes)
    else:
        _fallback_budget[:] = [nbytes]


def _format_bytes(n: int) -> str:
    if n >= 1 << 30:
        return f"{n / (1 << 30):.1f} GiB"
    if n >= 1 << 20:
        return f"{n / (1 << 20):.1f} MiB"
    return f"{n} bytes"


def check_memory_budget(nbytes: int, name: str, what: str) -> None:
    """ValueError naming the argument that sets the size when ``what`` would need more than
    the memory budget (the same message as the C++ re-check), before anything is allocated.

    Parameters
    ----------
    nbytes : int
        Exact (Python int) size of the outputs / scratch.
    name : str
        The argument that makes it that large (``"k"``, ``"n_claims"``, ``"n_splits"``).
    what : str
        What would be allocated, e.g. ``"the (len(queries), k) outputs"``.
    """
    budget = get_memory_budget()
    if nbytes > budget:
        raise ValueError(f"{name}: {what} would need {_format_bytes(nbytes)}, more than the memory budget "
                         f"of {_format_bytes(budget)} (rrag_kernels.set_memory_budget)")
