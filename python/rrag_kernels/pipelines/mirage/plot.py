"""The claim graph of one MIRAGE result as a picture (matplotlib, imported only when called).

    from rrag_kernels.pipelines.mirage import MirageDefense, plot_claim_graph
    fig = plot_claim_graph(MirageDefense(nli="lexical").defend(q, passages), "graph.png")

Layout (drawn with matplotlib alone, no graph library): the claims sit on a circle, grouped
into one arc per passage (labelled ``P<source> domain``), clockwise from the top, passages of
one domain side by side (then by passage index); every edge is a curve through the inside of
the circle, so no edge crosses a node. A kept claim is a filled disc, a dropped one a hollow
dashed ring; support edges are green and solid, contradiction edges red and dashed. Nodes carry ``Claim.index`` (0-based, as in
``MirageResult.claims`` and ``Claim.contradicted_by``); the list at the right gives each
claim's text and, when dropped, its reason. The title holds the question and the gate
decision.
"""

from __future__ import annotations

import math
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["ClaimGraphSummary", "plot_claim_graph"]

KEPT_FILL = "#3b6ea8"
DROPPED_EDGE = "#8a8a8a"
SUPPORT = "#2a9d3c"
CONTRADICTION = "#d62728"
_LINE_IN = 0.165  # height of one line of the claim list, inches (8 pt text)
_GRAPH_IN = 6.4  # height of the graph panel, inches
_GRAPH_W_IN = 8.0  # its width: room for the passage labels left and right of the circle
_LIST_IN = 5.8  # width of the claim list, inches


@dataclass
class ClaimGraphSummary:
    """What :func:`plot_claim_graph` drew (``fig.claim_graph``): the claims shown (by
    ``Claim.index``), how many of them are kept / dropped, the support and contradiction edges
    drawn, and the passages (``Claim.source``) that have an arc."""

    shown: list[int] = field(default_factory=list)
    kept: int = 0
    dropped: int = 0
    support: int = 0
    contradiction: int = 0
    sources: list[int] = field(default_factory=list)
    hidden: int = 0  # claims left out by max_claims


def _matplotlib() -> Any:
    try:
        import matplotlib  # noqa: F401
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("plot_claim_graph needs matplotlib: pip install 'rrag_kernels[plot]'") from exc
    import matplotlib.patches as patches
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.path import Path as MplPath

    return Figure, FigureCanvasAgg, patches, Line2D, MplPath


def _shorten(text: str, width: int, lines: int) -> list[str]:
    out = textwrap.wrap(" ".join(text.split()), width=width) or [""]
    if len(out) > lines:
        out = out[:lines]
        out[-1] = out[-1][: max(width - 1, 1)].rstrip() + "\u2026"
    return out


def _domain_label(domain: str, width: int = 16) -> str:
    """A long domain on two lines, split at the dot nearest its middle."""
    if len(domain) <= width or "." not in domain:
        return domain if len(domain) <= 2 * width else domain[: 2 * width - 1] + "\u2026"
    dots = [k for k, ch in enumerate(domain) if ch == "."]
    cut = min(dots, key=lambda k: abs(k - len(domain) / 2)) + 1
    head, tail = domain[:cut], domain[cut:]
    return "\n".join(x if len(x) <= width + 4 else x[: width + 3] + "\u2026" for x in (head, tail))


def _shown_claims(result: Any, max_claims: int) -> list[Any]:
    """The claims to draw: all of them, or the max_claims with the most edges (ties: kept
    first, then by index), in index order."""
    claims = list(result.claims)
    if len(claims) <= max_claims:
        return claims
    degree = {c.index: 0 for c in claims}
    for a, b, _ in result.edges:
        degree[a] = degree.get(a, 0) + 1
        degree[b] = degree.get(b, 0) + 1
    best = sorted(claims, key=lambda c: (-degree[c.index], not c.kept, c.index))[:max_claims]
    return sorted(best, key=lambda c: c.index)


def plot_claim_graph(result: Any, path: str | Path | None = None, *, ax: Any = None, max_claims: int = 40,
                     wrap: int = 70, max_lines: int = 2, claim_list: bool = True, title: str | None = None,
                     dpi: int = 110) -> Any:
    """Draw the support / contradiction graph of one :class:`MirageResult`.

    Parameters
    ----------
    result : MirageResult
        From :meth:`MirageDefense.defend` (its ``claims`` and ``edges``).
    path : str or Path, optional
        Where to save the picture (PNG, or any format matplotlib infers from the suffix).
    ax : matplotlib Axes, optional
        Draw the graph into this Axes (the claim list goes to its right, outside it). Without
        one a new :class:`matplotlib.figure.Figure` (Agg canvas, no pyplot) is sized to fit
        the graph and the list.
    max_claims : int
        At most this many claims are drawn: those with the most edges (ties: kept first,
        then by index); the title says how many were left out.
    wrap, max_lines : int
        Each claim's text in the list is wrapped at ``wrap`` characters and cut to
        ``max_lines`` lines.
    claim_list : bool
        Draw the list of claim texts beside the graph.
    title : str, optional
        Replaces the first title line (the question).
    dpi : int
        Resolution of the saved picture.

    Returns
    -------
    matplotlib.figure.Figure
        With ``fig.claim_graph``, a :class:`ClaimGraphSummary` of what was drawn.

    Raises
    ------
    ImportError
        matplotlib is not installed (``pip install 'rrag_kernels[plot]'``).
    """
    if not hasattr(result, "claims") or not hasattr(result, "edges"):
        raise TypeError(f"result: expected a MirageResult, got {type(result).__name__}")
    if isinstance(max_claims, bool) or not isinstance(max_claims, int) or max_claims < 1:
        raise ValueError(f"max_claims: expected an int >= 1, got {max_claims!r}")
    Figure, FigureCanvasAgg, patches, Line2D, MplPath = _matplotlib()

    claims = _shown_claims(result, max_claims)
    entries = [(c, _shorten(c.text, wrap, max_lines)) for c in claims]
    n_lines = sum(len(lines) + (1 if not c.kept else 0) for c, lines in entries) + 1
    if ax is None:
        list_w = _LIST_IN if claim_list and claims else 0.0
        height = max(_GRAPH_IN + 1.4, n_lines * _LINE_IN + 1.6) if claim_list else _GRAPH_IN + 1.4
        fig = Figure(figsize=(_GRAPH_W_IN + list_w + 0.4, height))
        FigureCanvasAgg(fig)
        w, h = fig.get_size_inches()
        # The graph panel at the top left; the title above it, the legend below it.
        ax = fig.add_axes((0.2 / w, (h - 1.0 - _GRAPH_IN) / h, _GRAPH_W_IN / w, _GRAPH_IN / h))
    else:
        fig = ax.figure

    summary = ClaimGraphSummary(shown=[c.index for c in claims], hidden=len(result.claims) - len(claims))
    # --- positions: one arc per passage, a one-slot gap between arcs, clockwise from the top.
    # Passages of one domain side by side (the gate counts domains), then by passage index.
    domain = {c.source: c.domain for c in claims}
    sources = sorted(domain, key=lambda s: (domain[s], s))
    summary.sources = sources
    slots = len(claims) + len(sources)
    step = 2 * math.pi / max(slots, 1)
    pos: dict[int, tuple[float, float]] = {}
    arcs: list[tuple[int, float, float]] = []
    k = 0.5
    for s in sources:
        members = [c for c in claims if c.source == s]
        start = k
        for c in members:
            theta = math.pi / 2 - k * step
            pos[c.index] = (math.cos(theta), math.sin(theta))
            k += 1
        arcs.append((s, math.pi / 2 - start * step, math.pi / 2 - (k - 1) * step))
        k += 1
    radius = min(0.085, 0.36 * step)
    font = max(5.5, min(9.5, radius * 105))

    # --- passage arcs and their labels.
    for s, t0, t1 in arcs:
        pad = 0.45 * step
        ts = [t0 + pad - (t0 - t1 + 2 * pad) * u / 24 for u in range(25)]
        ax.plot([1.13 * math.cos(t) for t in ts], [1.13 * math.sin(t) for t in ts], color="#b9b9b9", lw=3,
                solid_capstyle="round", zorder=1)
        mid = (t0 + t1) / 2
        x, y = 1.22 * math.cos(mid), 1.22 * math.sin(mid)
        ha = "center" if abs(math.cos(mid)) < 0.25 else ("left" if math.cos(mid) > 0 else "right")
        va = "center" if abs(math.sin(mid)) < 0.5 else ("bottom" if math.sin(mid) > 0 else "top")
        ax.text(x, y, f"P{s}\n{_domain_label(domain[s])}", ha=ha, va=va, fontsize=8, color="#333333", linespacing=1.1,
                gid=f"source-{s}")

    # --- edges: quadratic curves through the inside of the circle.
    shown = set(pos)
    for a, b, kind in result.edges:
        if a not in shown or b not in shown:
            continue
        (xa, ya), (xb, yb) = pos[a], pos[b]
        # The control point: the chord's midpoint pulled toward the centre, so a short chord
        # bows inward and a long one stays nearly straight (and long ones do not all meet).
        cx, cy = (xa + xb) / 2 * 0.4, (ya + yb) / 2 * 0.4
        curve = MplPath([(xa, ya), (cx, cy), (xb, yb)], [MplPath.MOVETO, MplPath.CURVE3, MplPath.CURVE3])
        if kind > 0:
            style = dict(edgecolor=SUPPORT, linestyle="-", lw=1.6, alpha=0.75)
            summary.support += 1
            gid = f"edge-support-{a}-{b}"
        else:
            style = dict(edgecolor=CONTRADICTION, linestyle=(0, (4, 2.5)), lw=1.6, alpha=0.9)
            summary.contradiction += 1
            gid = f"edge-contradiction-{a}-{b}"
        ax.add_patch(patches.PathPatch(curve, facecolor="none", zorder=2, gid=gid, **style))

    # --- nodes.
    for c in claims:
        x, y = pos[c.index]
        if c.kept:
            node = patches.Circle((x, y), radius, facecolor=KEPT_FILL, edgecolor="#1f3f66", lw=1.2, zorder=3,
                                  gid=f"claim-kept-{c.index}")
            color = "white"
            summary.kept += 1
        else:
            node = patches.Circle((x, y), radius, facecolor="white", edgecolor=DROPPED_EDGE, lw=1.4,
                                  linestyle=(0, (2, 1.5)), zorder=3, gid=f"claim-dropped-{c.index}")
            color = "#555555"
            summary.dropped += 1
        ax.add_patch(node)
        ax.text(x, y, str(c.index), ha="center", va="center", fontsize=font, color=color, zorder=4,
                fontweight="bold" if c.kept else "normal")

    if not claims:
        why = f"no claims ({result.error})" if getattr(result, "error", None) else "no claims"
        ax.text(0, 0, why, ha="center", va="center", fontsize=10, color="#555555")
    # A wide panel widens the x range (room for the passage labels), not the circle.
    box = ax.get_position()
    fig_w, fig_h = fig.get_size_inches()
    ratio = max(1.0, (box.width * fig_w) / max(box.height * fig_h, 1e-9))
    ax.set_xlim(-1.32 * ratio, 1.32 * ratio)
    ax.set_ylim(-1.32, 1.32)
    ax.set_aspect("equal")
    ax.set_axis_off()

    handles = [
        Line2D([], [], marker="o", ls="", markersize=10, markerfacecolor=KEPT_FILL, markeredgecolor="#1f3f66",
               label=f"kept ({summary.kept})"),
        Line2D([], [], marker="o", ls="", markersize=10, markerfacecolor="white", markeredgecolor=DROPPED_EDGE,
               label=f"dropped ({summary.dropped})"),
        Line2D([], [], color=SUPPORT, lw=1.8, label=f"support ({summary.support})"),
        Line2D([], [], color=CONTRADICTION, lw=1.8, ls=(0, (4, 2.5)),
               label=f"contradiction ({summary.contradiction})"),
    ]
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.01), ncol=4, frameon=False,
              fontsize=8.5, handlelength=2.4, columnspacing=1.4)

    # --- title: the question and the gate decision.
    stats = getattr(result, "stats", {}) or {}
    passed = bool(getattr(result, "gate_passed", False))
    gate = "PASS" if passed else "BLOCK"
    detail = stats.get("gate_reason", "")
    counts = (f"{stats['n_kept']}/{stats['n_claims']} claims kept, r_contr {stats['r_contr']:.2f}, "
              f"{stats['n_domains']} domains" if "n_kept" in stats else "")
    fallback = getattr(result, "fallback", None)
    head = title if title is not None else "\n".join(_shorten(f"Q: {result.question}", 90, 2))
    line2 = f"gate {gate} ({detail})" + (f", fallback {fallback}" if fallback else "") + (f"; {counts}" if counts else "")
    if summary.hidden:
        line2 += f"; showing {len(claims)} of {len(result.claims)} claims"
    # Offsets in points above the panel, so that the two lines never overlap whatever its size.
    ax.annotate(line2, (0.0, 1.0), xycoords="axes fraction", xytext=(0, 6), textcoords="offset points", ha="left",
                va="bottom", fontsize=9, color="#1b7a2e" if passed else CONTRADICTION)
    ax.annotate(head, (0.0, 1.0), xycoords="axes fraction", xytext=(0, 21), textcoords="offset points", ha="left",
                va="bottom", fontsize=10.5, fontweight="bold")

    # --- the claim list, right of the graph, top-aligned with it.
    if claim_list and claims:
        fig_w, fig_h = fig.get_size_inches()
        box = ax.get_position()
        top_in = box.y1 * fig_h
        lst = fig.add_axes((box.x1 + 0.25 / fig_w, 0.05 / fig_h, max(0.1, 1 - box.x1 - 0.3 / fig_w),
                            max(0.1, (top_in - 0.05) / fig_h)))
        lst.set_axis_off()
        rows = max(n_lines, (top_in - 0.05) / _LINE_IN)
        lst.set_xlim(0, 1)
        lst.set_ylim(rows, 0)
        lst.text(0, 0, "claims (index, passage)", fontsize=8.5, fontweight="bold", va="top", ha="left")
        y = 1.0
        for c, lines in entries:
            ink = "#111111" if c.kept else "#777777"
            lst.text(0, y, f"{c.index:>3}", fontsize=8, va="top", ha="left", family="monospace", color=ink,
                     fontweight="bold" if c.kept else "normal")
            lst.text(0.07, y, f"P{c.source}", fontsize=7.5, va="top", ha="left", color="#555555")
            lst.text(0.13, y, "\n".join(lines), fontsize=8, va="top", ha="left", color=ink, linespacing=1.25)
            y += len(lines)
            if not c.kept:
                lst.text(0.13, y, f"dropped: {c.reason}", fontsize=7.5, va="top", ha="left", color=CONTRADICTION,
                         style="italic")
                y += 1
    fig.claim_graph = summary
    if path is not None:
        fig.savefig(path, dpi=dpi)
    return fig
