"""Typed stubs for the compiled module rrag_kernels._core (use rrag_kernels.ops instead: only
ops/_dispatch.py loads it)."""

import numpy as np
import numpy.typing as npt

__version__: str

def get_num_threads() -> int: ...
def set_num_threads(n: int) -> None: ...
def max_threads() -> int: ...
def memory_budget() -> int: ...
def set_memory_budget(nbytes: int) -> None: ...
def _pool_size() -> int: ...
def _set_quantile_bands(on: bool) -> None: ...
def _set_min_work_scale(scale: float) -> None: ...
def simd_level() -> str: ...
def available_simd_levels() -> list[str]: ...
def set_simd_level(name: str) -> None: ...
def compiler() -> str: ...
def native_build() -> bool: ...
def cosine_matrix(
    a: npt.NDArray[np.float32], b: npt.NDArray[np.float32], check_finite: bool = True
) -> npt.NDArray[np.float32]: ...
def segmented_cosine(
    queries: npt.NDArray[np.float32],
    docs: npt.NDArray[np.float32],
    doc_offsets: npt.NDArray[np.int64],
    check_finite: bool = True,
) -> npt.NDArray[np.float32]: ...
def claim_relevance(
    query_emb: npt.NDArray[np.float32],
    doc_emb: npt.NDArray[np.float32],
    doc_offsets: npt.NDArray[np.int64],
    claim_emb: npt.NDArray[np.float32],
    claim_offsets: npt.NDArray[np.int64],
    query_doc_sim: npt.NDArray[np.float32] | None = None,
    clip: bool = True,
    check_finite: bool = True,
) -> npt.NDArray[np.float32]: ...
def topk_cosine(
    queries: npt.NDArray[np.float32],
    corpus: npt.NDArray[np.float32],
    k: int,
    check_finite: bool = True,
) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]]: ...

# ReliableRAG triple reliability; public ops rrag_kernels.ops.triple_reliability(_segmented).
def triple_reliability(
    query_emb: npt.NDArray[np.float32],
    triple_emb: npt.NDArray[np.float32],
    credibility: npt.NDArray[np.float64],
    used: npt.NDArray[np.bool_] | None = None,
    alpha: float = 0.4,
    k: int = 20,
    check_finite: bool = True,
) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]]: ...
def triple_reliability_segmented(
    query_emb: npt.NDArray[np.float32], triple_emb: npt.NDArray[np.float32], credibility: npt.NDArray[np.float64],
    triple_offsets: npt.NDArray[np.int64], chain_question: npt.NDArray[np.int64],
    used: npt.NDArray[np.bool_] | None = None, alpha: float = 0.4, k: int = 20, check_finite: bool = True,
) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]]: ...

# MIRAGE claim-graph kernels (issue 3) and LexicalNLI's alignment; public ops in rrag_kernels.ops.
def claim_token_ids(texts: list[str]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]: ...
def select_pairs(
    token_ids: npt.NDArray[np.int64],
    token_offsets: npt.NDArray[np.int64],
    source_ids: npt.NDArray[np.int64],
    tau: float,
    max_pairs: int,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.float64]]: ...
def nli_graph(
    i: npt.NDArray[np.int64],
    j: npt.NDArray[np.int64],
    probs_fwd: npt.NDArray[np.float64],
    probs_bwd: npt.NDArray[np.float64],
    n_claims: int,
    entail_col: int,
    contr_col: int,
    mean: bool,
) -> tuple[
    npt.NDArray[np.float64],
    npt.NDArray[np.float64],
    npt.NDArray[np.int8],
    npt.NDArray[np.int64],
    npt.NDArray[np.int64],
    npt.NDArray[np.int64],
    npt.NDArray[np.int64],
    npt.NDArray[np.int64],
]: ...
def greedy_prune(
    node_scores: npt.NDArray[np.float64],
    edge_i: npt.NDArray[np.int64],
    edge_j: npt.NDArray[np.int64],
    edge_weight: npt.NDArray[np.float64],
    self_penalty: npt.NDArray[np.float64] | None = None,
) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.int64], float]: ...
def gate_stats(
    keep: npt.NDArray[np.bool_],
    edge_i: npt.NDArray[np.int64],
    edge_j: npt.NDArray[np.int64],
    kind: npt.NDArray[np.int8],
    domain_ids: npt.NDArray[np.int64],
    eps: float,
    count_unknown: bool,
) -> dict[str, int | float]: ...
def lexical_opcodes(
    tokens_a: npt.NDArray[np.int64],
    offsets_a: npt.NDArray[np.int64],
    tokens_b: npt.NDArray[np.int64],
    offsets_b: npt.NDArray[np.int64],
    trim_affixes: bool = True,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int32]]: ...

# Conformal factuality (issue 4); public ops in rrag_kernels.ops.
def r_scores(
    scores: npt.NDArray[np.float64],
    labels_ok: npt.NDArray[np.bool_],
    offsets: npt.NDArray[np.int64],
    a: float,
    sentinel: float,
) -> npt.NDArray[np.float64]: ...
def conformal_quantile(
    r: npt.NDArray[np.float64], alphas: npt.NDArray[np.float64], raise_if_too_few: bool
) -> npt.NDArray[np.float64]: ...
def conformal_sweep(
    scores: npt.NDArray[np.float64],
    labels_ok: npt.NDArray[np.bool_],
    offsets: npt.NDArray[np.int64],
    alphas: npt.NDArray[np.float64],
    n_splits: int,
    calib_fraction: float,
    seed: int,
    a: float,
    sentinel: float,
    groups: npt.NDArray[np.int64] | None = None,
    n_groups: int = 1,
) -> dict[str, npt.NDArray[np.float64] | npt.NDArray[np.int64]]: ...
def _split_key_bits(
    base: int, perm: npt.NDArray[np.int64] | None, count: int, lo: int, span: int
) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.uint64]]: ...
def _set_sweep_tuning(window_sigmas: float, band_sigmas: float, stable_classes: bool) -> None: ...

# ReliableRAG beam search over reasoning chains; public op rrag_kernels.ops.beam_step.
def beam_step(
    parent_scores: npt.NDArray[np.float64], finished: npt.NDArray[np.bool_], choice_probs: npt.NDArray[np.float64],
    n_candidates: npt.NDArray[np.int64], chain_offsets: npt.NDArray[np.int64], beams: int, min_prob: float,
    max_chains: int,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.float64], npt.NDArray[np.bool_],
           npt.NDArray[np.int64]]: ...  # (parent, choice, score, finished, offsets)
