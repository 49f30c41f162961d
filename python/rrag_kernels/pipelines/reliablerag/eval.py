"""Offline evaluation of the chain search on multi-hop questions with injected passages.

Data: JSONL in the format of ``shared/data/multihop_dev.jsonl`` (``question``, ``passages``
with supplied ``triples``, and the evaluation-only ``label``, ``style``, ``gold_chain``).

Settings: injected passages kept in {0, 1, 2} (0: both dropped; 1: the ``news``-style one
kept, the ``minimal_edit`` one dropped; 2: both kept) x alpha in :data:`ALPHAS` (alpha = 1 is
TRACE: similarity only), with ``"oracle"`` credibility, the supplied triples and the
``"reliability"`` selector. Measured per cell, averaged over questions:

* ``inj_topk``: share of injected triples among the first hop's top-K candidates;
* ``inj_tbs``: share of injected triples in the TBS context;
* ``gold_recall``: share of the ``gold_chain`` triples whose text is in the TBS context.

The pipeline sees only question, passages' triples and (for the oracle) ``label``; the
evaluation alone reads ``style`` and ``gold_chain``.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from ...models import Embedder
from .._progress import progress_iter
from .chains import ChainParams, build_chains, credibility, triples_from_passages

logger = logging.getLogger("rrag_kernels")

#: The alpha grid (1.0 = TRACE, similarity only).
ALPHAS = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
#: Injected passages kept: 0, 1 (the news-style one) or 2.
INJECTED = (0, 1, 2)
#: The style of the injected passage kept in the 1-injected setting.
KEPT_STYLE = "news"


def load_multihop(path: str | Path) -> list[dict[str, Any]]:
    """Read a JSONL file of multi-hop questions.

    Raises
    ------
    OSError, UnicodeDecodeError
        The file cannot be read.
    ValueError
        A line is not a JSON object with ``question`` (str) and ``passages`` (list).
    """
    rows = []
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"path: line {n} is not JSON ({exc})") from exc
            if not (isinstance(row, dict) and isinstance(row.get("question"), str)
                    and isinstance(row.get("passages"), list)):
                raise ValueError(f"path: line {n} lacks 'question' (str) or 'passages' (list)")
            rows.append(row)
    if not rows:
        raise ValueError("path: no questions in the file")
    return rows


def injection_setting(passages: Sequence[Mapping[str, Any]], n_injected: int) -> list[int]:
    """Indices of the passages kept when ``n_injected`` injected passages remain (0, 1: the
    :data:`KEPT_STYLE` one, 2: all). Reads ``label`` and ``style`` (evaluation only)."""
    keep = []
    for i, p in enumerate(passages):
        if p.get("label") != "injected" or n_injected >= 2 or (n_injected == 1 and p.get("style") == KEPT_STYLE):
            keep.append(i)
    return keep


def gold_texts(row: Mapping[str, Any]) -> set[str]:
    """The ``"head relation tail"`` texts of a question's ``gold_chain`` (entries ``{"pid",
    "triple"}``, ``triple`` the index in that passage's ``triples``); evaluation only.

    Raises
    ------
    ValueError
        An entry names a passage or a triple the question does not have.
    """
    by_pid = {p.get("pid"): p for p in row["passages"]}
    out = set()
    for g in row.get("gold_chain") or ():
        passage = by_pid.get(g.get("pid"))
        triples = triples_from_passages([passage]) if passage is not None else []
        j = g.get("triple")
        if not (isinstance(j, int) and 0 <= j < len(triples)):
            raise ValueError(f"gold_chain: no triple {j!r} in passage {g.get('pid')!r}")
        out.add(triples[j].text)
    return out


class _CachedEmbedder:
    """Memoises an embedder by text (chains of different settings share many queries)."""

    def __init__(self, embedder: Embedder):
        self.embedder, self.cache = embedder, {}

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        missing = list(dict.fromkeys(t for t in texts if t not in self.cache))
        if missing:
            self.cache.update(zip(missing, self.embedder.encode(missing)))
        return np.array([self.cache[t] for t in texts], dtype=np.float32)


def evaluate(data: str | Path | Sequence[Mapping[str, Any]], embedder: Embedder, *,
             alphas: Sequence[float] = ALPHAS, injected: Sequence[int] = INJECTED,
             params: ChainParams | None = None, progress: bool = False) -> dict[tuple[int, float], dict[str, float]]:
    """Run the grid; the cells' means over questions.

    Parameters
    ----------
    data : path or sequence of question dicts
    embedder : Embedder
    alphas : sequence of float in [0, 1]
    injected : sequence of int in {0, 1, 2}
    params : ChainParams, optional
        Its ``alpha`` is replaced by each grid value.
    progress : bool
        A progress bar over questions (tqdm, when installed).

    Returns
    -------
    dict
        ``(n_injected, alpha) -> {"inj_topk", "inj_tbs", "gold_recall", "n"}``.
    """
    rows = load_multihop(data) if isinstance(data, (str, Path)) else list(data)
    base = (params or ChainParams()).validate()
    cached = _CachedEmbedder(embedder)
    sums: dict[tuple[int, float], np.ndarray] = {(n, float(a)): np.zeros(3) for n in injected for a in alphas}
    for row in progress_iter(rows, enabled=progress, desc="reliablerag-eval", unit="question"):
        gold = gold_texts(row)
        for n_inj in injected:
            passages = [row["passages"][i] for i in injection_setting(row["passages"], n_inj)]
            triples = triples_from_passages(passages)
            injected_t = np.array([passages[t.passage].get("label") == "injected" for t in triples], dtype=bool)
            cred = credibility(row["question"], passages, triples, source="oracle")
            emb = cached.encode([t.text for t in triples])
            for a in alphas:
                p = ChainParams(**{**base.__dict__, "alpha": float(a)})
                res = build_chains(row["question"], triples, cred, cached, params=p, triple_emb=emb)
                inj_topk = float(injected_t[res.first_hop].mean()) if res.first_hop else 0.0
                inj_tbs = float(injected_t[res.context_triples].mean()) if res.context_triples else 0.0
                recall = len(gold & set(res.context)) / len(gold) if gold else 0.0
                sums[(n_inj, float(a))] += (inj_topk, inj_tbs, recall)
    return {key: {"inj_topk": s[0] / len(rows), "inj_tbs": s[1] / len(rows), "gold_recall": s[2] / len(rows),
                  "n": len(rows)} for key, s in sums.items()}


def format_report(report: Mapping[tuple[int, float], Mapping[str, float]]) -> str:
    """The grid as a text table, one row per (injected passages, alpha)."""
    lines = [f"{'injected':>8} {'alpha':>5}  {'inj top-K':>9}  {'inj TBS':>7}  {'gold recall':>11}"]
    for (n_inj, a), m in sorted(report.items()):
        tag = "  (TRACE: similarity only)" if a == 1.0 else ""
        lines.append(f"{n_inj:>8} {a:>5.1f}  {m['inj_topk']:>9.3f}  {m['inj_tbs']:>7.3f}  {m['gold_recall']:>11.3f}{tag}")
    return "\n".join(lines)
