"""Progress bars for long batch work: tqdm when installed and wanted, else the plain iterable."""

from __future__ import annotations

from typing import Iterable, TypeVar

T = TypeVar("T")


def progress_iter(items: list[T], *, enabled: bool, desc: str, unit: str) -> Iterable[T]:
    """Wrap ``items`` in a tqdm bar when ``enabled`` and tqdm is importable."""
    if not enabled:
        return items
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return items
    return tqdm(items, desc=desc, unit=unit)
