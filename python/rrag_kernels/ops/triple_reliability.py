"""``triple_reliability``: ReliableRAG's most reliable unused triples of each reasoning chain, fused."""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import reference
from ._dispatch import Plan, core_module, finish, launcher, numpy_float32, plan, to_torch_index, torch_float32
from ._memory import check_memory_budget
from ._validation import (
    array_like,
    as_bool,
    as_float64,
    as_index,
    check_bool,
    check_csr,
    check_in_range,
    check_index_range,
    check_int,
    check_matrices,
    check_real,
    check_shape,
)

__all__ = ["triple_reliability", "triple_reliability_segmented"]

_K_MAX = 2**59


def triple_reliability(
    query_emb: Any, triple_emb: Any, credibility: Any, *, alpha: float = 0.4, used: Any = None, k: int = 20,
    check_finite: bool = True, backend: str | None = None,
) -> tuple[Any, Any]:
    """ReliableRAG: for each reasoning chain, the k unused triples of highest reliability

        R(t) = alpha * cos(q, t) + (1 - alpha) * c(t) / 10,

    ``cos`` of a zero vector is 0. The C++ backend holds only tiles of the (B, T) score matrix;
    the Triton backend writes it (padded) and sorts it.

    Tie-break and padding (the contract): rows are descending in R, equal float32 R by lower
    triple index first (in the reference backend: equal float64 R). A chain with fewer than k
    unused triples gets them all, then index -1 with score -inf. ReliableRAG's own code lets
    used triples come back to fill the k slots; here they never do. With
    ``check_finite=False`` a NaN/inf embedding makes the affected scores unspecified (indices
    stay valid).

    Parameters
    ----------
    query_emb : array, shape (B, d), float16/32/64
        One query embedding per chain.
    triple_emb : array, shape (T, d), float16/32/64
        The knowledge triples, shared by every chain.
    credibility : array, shape (T,), float or integer
        c(t), finite and in [0, 10] (checked whatever ``check_finite``).
    alpha : float in [0, 1]
        0 ranks by credibility alone, 1 by similarity alone.
    used : array, shape (B, T), bool, optional
        ``used[b, t]``: chain b has used triple t already (None: nothing used).
    k : int >= 1
        May exceed T (the rest is padding); the (B, k) outputs must fit the memory budget.
    check_finite : bool
    backend : {None, "auto", "reference", "cpp", "triton", "torch"}

    Returns
    -------
    scores : array, shape (B, k), float32, descending along each row, -inf padding
    indices : array, shape (B, k), int64, rows of ``triple_emb``, -1 padding
    """
    check_finite = check_bool(check_finite, "check_finite")
    arrays = {"query_emb": query_emb, "triple_emb": triple_emb}
    check_matrices(arrays)
    n_chains, n_triples = int(query_emb.shape[0]), int(triple_emb.shape[0])
    cred, alpha, k = _common_arguments(credibility, n_triples, alpha, k, n_chains)
    flat_used = None
    if used is not None:
        # One rule for the bool dtype and the length (as_bool); the 2-d shape first.
        shaped = array_like(used, "used")
        check_shape(shaped, "used", (n_chains, n_triples), " (len(query_emb), len(triple_emb))")
        flat_used = as_bool(shaped.reshape(-1), "used", n_chains * n_triples)
    p = plan({**arrays, "credibility": credibility, "used": used}, backend, "triple_reliability")
    return _run(p, arrays, cred, None, flat_used, alpha, k, check_finite)


def triple_reliability_segmented(
    query_emb: Any, triple_emb: Any, credibility: Any, triple_offsets: Any, chain_question: Any, *,
    alpha: float = 0.4, used: Any = None, k: int = 20, check_finite: bool = True, backend: str | None = None,
) -> tuple[Any, Any]:
    """:func:`triple_reliability` for chains of many questions: chain b scores only the
    triples of its question ``q = chain_question[b]``, rows
    ``triple_offsets[q]:triple_offsets[q + 1]`` of ``triple_emb``.

    Tie-break and padding as in :func:`triple_reliability` (equal R: lower triple index
    first; -1 / -inf past the chain's unused triples); returned indices are global rows of
    ``triple_emb``.

    Parameters
    ----------
    query_emb : array, shape (B, d), float16/32/64
    triple_emb : array, shape (T_total, d), float16/32/64
        The triples of every question, question by question.
    credibility : array, shape (T_total,), float or integer, finite and in [0, 10]
    triple_offsets : integer array, shape (Q + 1,)
        CSR offsets: ``triple_offsets[0] == 0``, non-decreasing, ``triple_offsets[-1] ==
        T_total``; question q owns ``n(q) = triple_offsets[q + 1] - triple_offsets[q]``
        triples (0 allowed).
    chain_question : integer array, shape (B,), values in [0, Q)
        The question of each chain; chains need not be grouped by question.
    alpha : float in [0, 1]
    used : bool array, shape (sum_b n(chain_question[b]),), optional
        Ragged, chain by chain in chain order: chain b's slice starts at
        ``sum_{b' < b} n(chain_question[b'])`` and has ``n(chain_question[b])`` entries, entry
        j saying whether chain b has used its question's j-th triple (global row
        ``triple_offsets[chain_question[b]] + j``). Two chains of one question have separate
        slices. None: nothing used.
    k : int >= 1
    check_finite : bool
    backend : {None, "auto", "reference", "cpp", "triton", "torch"}

    Returns
    -------
    scores : array, shape (B, k), float32, descending along each row, -inf padding
    indices : array, shape (B, k), int64, global rows of ``triple_emb``, -1 padding
    """
    check_finite = check_bool(check_finite, "check_finite")
    arrays = {"query_emb": query_emb, "triple_emb": triple_emb}
    check_matrices(arrays)
    n_chains, n_triples = int(query_emb.shape[0]), int(triple_emb.shape[0])
    cred, alpha, k = _common_arguments(credibility, n_triples, alpha, k, n_chains)
    offsets = as_index(triple_offsets, "triple_offsets")
    if offsets.shape[0] < 1:
        raise ValueError("triple_offsets: expected length Q + 1 >= 1, got 0")
    check_csr(offsets, "triple_offsets", n_triples)
    questions = as_index(chain_question, "chain_question", n_chains, " (len(query_emb))")
    # Checked here for every backend: the length of `used` (a shape) depends on it.
    check_index_range(questions, "chain_question", offsets.shape[0] - 1, "number of questions")
    sizes = np.diff(offsets)
    flat_used = None
    if used is not None:
        total = int(sizes[questions].sum())
        flat_used = as_bool(used, "used", total, " (sum of n(chain_question[b]) over the chains)")
    p = plan({**arrays, "credibility": credibility, "triple_offsets": triple_offsets,
              "chain_question": chain_question, "used": used}, backend, "triple_reliability_segmented")
    return _run(p, arrays, cred, (offsets, questions), flat_used, alpha, k, check_finite)


def _common_arguments(credibility: Any, n_triples: int, alpha: Any, k: Any,
                      n_chains: int) -> tuple[np.ndarray, float, int]:
    """The arguments both forms share, checked: credibility (T,) float64 (values not yet), alpha, k."""
    cred = as_float64(credibility, "credibility", (n_triples,), " (len(triple_emb))", allow_int=True)
    alpha = check_real(alpha, "alpha")
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha: must be in [0, 1], got {alpha}")
    k = check_int(k, "k", minimum=1)
    check_memory_budget(12 * n_chains * k, "k", "the (len(query_emb), k) outputs")
    if k > _K_MAX:  # only with no chains: even (0, k) outputs need k * 8 bytes < 2**63 (numpy, int64 C++)
        raise ValueError(f"k: must be <= 2**59 (the (len(query_emb), k) outputs are arrays), got {k}")
    return cred, alpha, k


def _run(p: Plan, arrays: dict[str, Any], cred: np.ndarray, segments: tuple[np.ndarray, np.ndarray] | None,
         used: np.ndarray | None, alpha: float, k: int, check_finite: bool) -> tuple[Any, Any]:
    """Both forms on the planned backend; ``segments`` = (triple_offsets, chain_question) or None."""
    n_chains, n_triples = int(arrays["query_emb"].shape[0]), int(arrays["triple_emb"].shape[0])
    if p.backend != "cpp":
        # The C++ kernel checks the values itself.
        check_in_range(cred, "credibility", 0.0, 10.0)
    if p.backend in ("triton", "torch"):
        import torch

        launch = launcher(p, "triple_reliability_segmented")
        if p.backend == "triton":
            # The kernel writes a (B, largest question) score matrix padded with -inf, then sorts it.
            width = n_triples if segments is None else int(np.diff(segments[0])[segments[1]].max(initial=0))
            check_memory_budget(16 * n_chains * width, "triple_emb" if segments is None else "triple_offsets",
                                "the Triton backend's (len(query_emb), largest question) score matrix and its sort")
        t, device = torch_float32(p, arrays, check_finite)
        t_cred = torch.from_numpy(cred).to(device)
        # ``used`` is flat either way: (B, T) row-major is the one question's chain-by-chain slices.
        t_used = None if used is None else torch.from_numpy(used).to(device)
        offsets, questions = segments if segments is not None else (
            np.array([0, n_triples], np.int64), np.zeros(n_chains, np.int64))  # the single form: one question
        out = launch(t["query_emb"], t["triple_emb"], t_cred, to_torch_index(offsets, device),
                     to_torch_index(questions, device), t_used, alpha, k)
        return finish(out[0], p), finish(out[1], p)
    x = numpy_float32(p, arrays, check_finite)
    if p.backend == "cpp":
        core = core_module()
        if segments is None:
            scores, indices = core.triple_reliability(
                x["query_emb"], x["triple_emb"], cred, None if used is None else used.reshape(n_chains, n_triples),
                alpha, k, check_finite)
        else:
            scores, indices = core.triple_reliability_segmented(
                x["query_emb"], x["triple_emb"], cred, segments[0], segments[1], used, alpha, k, check_finite)
    else:
        if segments is None:
            scores, indices = reference.triple_reliability_ref(
                x["query_emb"], x["triple_emb"], cred, alpha=alpha,
                used=None if used is None else used.reshape(n_chains, n_triples), k=k)
        else:
            scores, indices = reference.triple_reliability_segmented_ref(
                x["query_emb"], x["triple_emb"], cred, segments[0], segments[1], alpha=alpha, used=used, k=k)
        scores = scores.astype(np.float32)
    return finish(scores, p), finish(indices, p)
