"""Reading the multi-hop question files shared by the ReliableRAG and D2F-ReAG evaluations
(the format of ``shared/data/multihop_dev.jsonl``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def load_multihop_rows(path: str | Path) -> list[dict[str, Any]]:
    """Read a JSONL file of multi-hop questions.

    Parameters
    ----------
    path : str or Path

    Returns
    -------
    list of dict

    Raises
    ------
    OSError, UnicodeDecodeError
        The file cannot be read.
    ValueError
        A line is not a JSON object with ``question`` (str) and ``passages`` (list), or the
        file holds no question.
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
