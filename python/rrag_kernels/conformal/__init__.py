"""Claim-level conformal factuality: a calibrator, data adapters and a trade-off plot.

    from rrag_kernels.conformal import ClaimConformal, load_claims
    d = load_claims("nq_subclaims_with_scores.jsonl", score="frequency+gpt")
    cc = ClaimConformal(alpha=0.1).calibrate(d.scores, d.labels_ok, d.offsets)
    keep = cc.filter(new_scores, new_offsets)
"""

from .calibrator import FORMAT_VERSION, ClaimConformal
from .data import DEFAULT_SUPPORTED, ClaimData, from_responses, hash_noise, load_claims
from .plot import plot_tradeoff  # matplotlib is imported only when it is called

__all__ = [
    "DEFAULT_SUPPORTED",
    "FORMAT_VERSION",
    "ClaimConformal",
    "ClaimData",
    "from_responses",
    "hash_noise",
    "load_claims",
    "plot_tradeoff",
]
