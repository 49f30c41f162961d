"""Trade-off plot of a conformal sweep (matplotlib, imported only when called)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["plot_tradeoff"]

#: The curves drawn, by SweepResult metric: (label, colour).
CURVES = (("fully_supported", "fully supported (empirical factuality)", "#1f77b4"),
          ("retention", "claims retained", "#ff7f0e"),
          ("non_empty", "non-empty responses", "#7f7f7f"))


def plot_tradeoff(sweep: Any, path: str | Path | None = None, *, ax: Any = None, title: str | None = None,
                  mark_alpha: float | None = None, mark_label: str | None = None, **sweep_kwargs: Any) -> Any:
    """Fully-supported rate, claim retention and non-empty rate (mean and 95 % interval over
    splits) against the target 1 - alpha, with the diagonal the guarantee promises.

    Parameters
    ----------
    sweep : SweepResult from ``conformal_sweep``, or a calibrated ``ClaimConformal``
        A calibrator is swept on its own calibration data (:meth:`ClaimConformal.sweep`,
        which takes ``sweep_kwargs``: ``alphas``, ``n_splits``, ``calib_fraction``,
        ``seed``, ``data``) and its alpha is marked.
    path : where to save a PNG (or any format matplotlib infers from the suffix), optional
    ax : a matplotlib Axes to draw into, optional; without one a new
        :class:`matplotlib.figure.Figure` (Agg canvas; pyplot is not used)
    mark_alpha : float, optional
        Draw a vertical line at 1 - mark_alpha (a calibrator's own level) and print the mean
        fully-supported rate and retention there when it is one of the sweep's alphas;
        ``mark_label`` is added to its legend entry.

    Returns
    -------
    the matplotlib Figure (each curve is the Line2D labelled as in :data:`CURVES`; its data
    are the sweep's ``summary()`` means, by increasing target)
    """
    if hasattr(sweep, "plot_tradeoff") and hasattr(sweep, "q_hat"):  # a ClaimConformal
        return sweep.plot_tradeoff(path, ax=ax, title=title, **sweep_kwargs)
    if sweep_kwargs:
        raise TypeError(f"{sorted(sweep_kwargs)[0]}: only a ClaimConformal is swept here; a SweepResult is drawn as is")
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("plot_tradeoff needs matplotlib: pip install 'rrag_kernels[plot]'") from exc
    alphas = np.asarray(sweep.alphas, dtype=np.float64)
    target = 1.0 - alphas
    order = np.argsort(target, kind="stable")
    summ = sweep.summary()
    if ax is None:
        fig = Figure(figsize=(6.0, 4.4))
        FigureCanvasAgg(fig)
        ax = fig.add_subplot()
    else:
        fig = ax.figure
    for name, label, color in CURVES:
        s = summ[name]
        ax.plot(target[order], s["mean"][order], marker="o", ms=4, color=color, label=label)
        ax.fill_between(target[order], s["lo"][order], s["hi"][order], color=color, alpha=0.18, lw=0)
    lo, hi = (float(target.min()), float(target.max())) if target.size else (0.0, 1.0)
    pad = max(0.02, 0.05 * (hi - lo))
    ax.plot([lo - pad, hi + pad], [lo - pad, hi + pad], "k--", lw=1, label="guarantee: fully supported >= 1 - alpha")
    ax.set_xlim(lo - pad, hi + pad)
    if mark_alpha is not None:
        x = 1.0 - float(mark_alpha)
        text = f"this calibrator: alpha {mark_alpha:g}" + (f", {mark_label}" if mark_label else "")
        ax.axvline(x, color="#2ca02c", lw=1.2, ls=":", label=text)
        hit = np.flatnonzero(np.isclose(alphas, float(mark_alpha)))
        if hit.size:
            k = int(hit[0])
            fs, kept = float(summ["fully_supported"]["mean"][k]), float(summ["retention"]["mean"][k])
            ax.annotate(f"{fs:.1%} fully supported\n{kept:.1%} of claims kept", (x, fs), xytext=(8, -30),
                        textcoords="offset points", fontsize=8, color="#1b6e1b",
                        arrowprops=dict(arrowstyle="-", color="#2ca02c", lw=0.8))
    ax.set_xlabel("target 1 - alpha")
    ax.set_ylabel("rate over test responses")
    ax.set_ylim(0.0, 1.02)
    ax.grid(alpha=0.25)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2, fontsize=8, frameon=False)
    meta = getattr(sweep, "meta", {}) or {}
    ax.set_title(title or f"conformal factuality, a = {meta.get('a', 1.0)}, {meta.get('n_splits', '?')} splits "
                          f"of {meta.get('n', '?')} responses (mean, 95 % band)", fontsize=10)
    if path is not None:
        fig.savefig(path, dpi=120, bbox_inches="tight")
    return fig
