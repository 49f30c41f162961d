"""Scored responses through a calibrated filter, as records: what ``rrag conformal filter``
writes and ``POST /filter`` answers, written once (pipelines/_items.py: the shells add only
``line`` and ``id``)."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from .calibrator import ClaimConformal

__all__ = ["filter_responses"]


def filter_responses(cc: ClaimConformal, responses: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One record per scored response, in order.

    Parameters
    ----------
    cc : ClaimConformal, calibrated
    responses : sequence of mapping
        ``{"prompt": str, "group": any or None, "texts": list of str, "scores": list of
        float}`` (one score per claim text). With a grouped calibration the group is
        compared as ``str``.

    Returns
    -------
    list of dict
        ``{"prompt", "q_hat", "n_claims", "n_kept", "claims": [{"text", "score", "kept"}],
        "kept": [str]}``, or ``{"error"}`` for a response that cannot be filtered (a group
        the calibration does not have, a NaN score): the others are filtered.
    """
    grouped = isinstance(cc.q_hat, dict)
    groups = [None if r.get("group") is None else str(r["group"]) for r in responses] if grouped else None
    masks = cc.filter_lists([r["scores"] for r in responses], groups)
    records: list[dict[str, Any]] = []
    for k, (resp, mask) in enumerate(zip(responses, masks)):
        if isinstance(mask, Exception):
            records.append({"error": _error(cc, resp, mask)})
            continue
        claims = [{"text": t, "score": float(x), "kept": bool(m)}
                  for t, x, m in zip(resp["texts"], resp["scores"], mask)]
        records.append({"prompt": resp["prompt"], "q_hat": cc.q_hat_for(groups[k] if grouped else None),
                        "n_claims": len(claims), "n_kept": int(mask.sum()), "claims": claims,
                        "kept": [c["text"] for c in claims if c["kept"]]})
    return records


def _error(cc: ClaimConformal, resp: Mapping[str, Any], exc: Exception) -> str:
    """A record's error for ``filter_lists``' error ``exc`` (whose message starts with the
    argument, ``groups[k]:`` or ``score_lists[k]:``, indices a record does not know)."""
    where, _, why = str(exc).partition(": ")
    if where.startswith("groups["):
        return (f"'group' {resp.get('group')!r} is not a group of the calibration "
                f"({', '.join(map(str, cc.q_hat))})")
    return f"scores: {why}"
