"""Trade-off plot of a conformal sweep (matplotlib, imported only when called)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["plot_tradeoff"]


def plot_tradeoff(sweep: Any, path: str | Path | None = None, *, ax: Any = None, title: str | None = None) -> Any:
    """Fully-supported rate, claim retention and non-empty rate (mean and 95 % interval over
    splits) against the target 1 - alpha, with the diagonal the guarantee promises.

    Parameters
    ----------
    sweep : SweepResult from ``conformal_sweep``
    path : where to save a PNG (or any format matplotlib infers from the suffix), optional
    ax : a matplotlib Axes to draw into, optional

    Returns
    -------
    the matplotlib Figure
    """
    try:
        import matplotlib

        if ax is None and path is not None:
            matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("plot_tradeoff needs matplotlib: pip install matplotlib") from exc
    target = 1.0 - np.asarray(sweep.alphas, dtype=np.float64)
    order = np.argsort(target)
    summ = sweep.summary()
    if ax is None:
        fig, ax = plt.subplots(figsize=(5.5, 4.0))
    else:
        fig = ax.figure
    for name, label in (("fully_supported", "fully supported"), ("retention", "claims retained"),
                        ("non_empty", "non-empty")):
        s = summ[name]
        ax.plot(target[order], s["mean"][order], marker="o", label=label)
        ax.fill_between(target[order], s["lo"][order], s["hi"][order], alpha=0.2)
    lo, hi = float(target.min(initial=0.0)), float(target.max(initial=1.0))
    ax.plot([lo, hi], [lo, hi], "k--", lw=1, label="target 1 - alpha")
    ax.set_xlabel("target 1 - alpha")
    ax.set_ylabel("rate over test responses")
    ax.set_ylim(0.0, 1.02)
    ax.legend(loc="lower left")
    ax.set_title(title or f"conformal factuality, a = {sweep.meta.get('a', 1.0)}, "
                          f"{sweep.meta.get('n_splits', '?')} splits")
    if path is not None:
        fig.savefig(path, dpi=120, bbox_inches="tight")
    return fig
