"""Float64 NumPy truth for every kernel.

These functions are the definition of each kernel's result: tests and benchmarks import
them, and nobody keeps a private copy of the math. They favour clarity over speed, and
import nothing from the layers they check (``ops``, ``models``, ``pipelines``).
"""

from .claim_relevance import claim_relevance_ref
from .cosine_matrix import cosine_matrix_ref, inverse_norms_ref
from .segmented_cosine import segmented_cosine_ref
from .topk_cosine import topk_cosine_ref

__all__ = [
    "claim_relevance_ref",
    "cosine_matrix_ref",
    "inverse_norms_ref",
    "segmented_cosine_ref",
    "topk_cosine_ref",
]

# MIRAGE claim-graph kernels (issue 3).
from .gate_stats import gate_stats_ref
from .greedy_prune import MAX_ABS_VALUE, greedy_prune_ref, quantise_ref
from .nli_graph import nli_graph_ref
from .select_pairs import TOKEN_PATTERN, claim_token_ids_ref, normalise_text, select_pairs_ref

__all__ += [
    "MAX_ABS_VALUE",
    "TOKEN_PATTERN",
    "claim_token_ids_ref",
    "gate_stats_ref",
    "greedy_prune_ref",
    "nli_graph_ref",
    "normalise_text",
    "quantise_ref",
    "select_pairs_ref",
]

# LexicalNLI alignment (model-free NLI hot path).
from .lexical_align import TAGS as LEXICAL_TAGS
from .lexical_align import lexical_opcodes_ref, matching_blocks_ref, pair_opcodes_ref

__all__ += ["LEXICAL_TAGS", "lexical_opcodes_ref", "matching_blocks_ref", "pair_opcodes_ref"]

# Conformal factuality (issue 4).
from .conformal_quantile import conformal_quantile_ref, conformal_rank
from .conformal_sweep import (
    SPLIT_GAMMA,
    calibration_mask_ref,
    calibration_size,
    conformal_sweep_ref,
    split_base_ref,
    split_keys_ref,
)
from .r_scores import r_scores_ref

__all__ += [
    "SPLIT_GAMMA",
    "calibration_mask_ref",
    "calibration_size",
    "conformal_quantile_ref",
    "conformal_rank",
    "conformal_sweep_ref",
    "r_scores_ref",
    "split_base_ref",
    "split_keys_ref",
]

# ReliableRAG triple reliability.
from .triple_reliability import triple_reliability_ref, triple_reliability_segmented_ref

__all__ += ["triple_reliability_ref", "triple_reliability_segmented_ref"]

# ReliableRAG beam search over reasoning chains.
from .beam_step import beam_step_ref

__all__ += ["beam_step_ref"]
