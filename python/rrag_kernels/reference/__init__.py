"""Float64 NumPy truth for every kernel.

These functions are the definition of each kernel's result: tests and benchmarks import
them, and nobody keeps a private copy of the math. They favour clarity over speed.
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
