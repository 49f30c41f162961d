"""rrag_kernels: compiled scoring kernels for retrieval-augmented generation under
misinformation.

Layers, each with one face that the layers above import:

* :mod:`rrag_kernels.ops` -- the public kernels (re-exported here);
  :mod:`rrag_kernels.reference` -- their float64 definitions;
* :mod:`rrag_kernels.models` -- model-facing protocols and implementations (NLI scorers,
  embedders, retrievers, text helpers);
* :mod:`rrag_kernels.pipelines` -- one folder per method (``pipelines.mirage``,
  ``pipelines.conformal``).
"""

from ._config import __version__, get_num_threads, set_num_threads, show_config
from .ops import (
    beam_step,
    claim_relevance,
    claim_token_ids,
    conformal_quantile,
    conformal_sweep,
    cosine_matrix,
    gate_stats,
    get_memory_budget,
    greedy_prune,
    lexical_opcodes,
    nli_graph,
    r_scores,
    segmented_cosine,
    select_pairs,
    set_memory_budget,
    topk_cosine,
    triple_reliability,
    triple_reliability_segmented,
)

__all__ = [
    "__version__",
    "beam_step",
    "claim_relevance",
    "claim_token_ids",
    "conformal_quantile",
    "conformal_sweep",
    "cosine_matrix",
    "gate_stats",
    "greedy_prune",
    "lexical_opcodes",
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
    "triple_reliability",
    "triple_reliability_segmented",
]
