"""rrag_kernels: compiled scoring kernels for retrieval-augmented generation under
misinformation.

The public kernels live in :mod:`rrag_kernels.ops` (re-exported here); their float64
definitions in :mod:`rrag_kernels.reference`.
"""

from ._config import __version__, get_memory_budget, get_num_threads, set_memory_budget, set_num_threads, show_config
from .ops import (
    claim_relevance,
    claim_token_ids,
    conformal_quantile,
    conformal_sweep,
    cosine_matrix,
    gate_stats,
    greedy_prune,
    nli_graph,
    r_scores,
    segmented_cosine,
    select_pairs,
    topk_cosine,
)

__all__ = [
    "__version__",
    "claim_relevance",
    "claim_token_ids",
    "conformal_quantile",
    "conformal_sweep",
    "cosine_matrix",
    "gate_stats",
    "greedy_prune",
    "nli_graph",
    "r_scores",
    "select_pairs",
    "get_memory_budget",
    "get_num_threads",
    "segmented_cosine",
    "set_memory_budget",
    "set_num_threads",
    "show_config",
    "topk_cosine",
]
