"""The public kernels: the one face of the ops layer.

Every op lives in ``ops/<kernel>.py`` (the same ``<kernel>`` as ``csrc/kernels/<kernel>.cpp``,
``triton_ops/<kernel>.py``, ``reference/<kernel>.py`` and ``tests/test_<kernel>.py``) and has
one shape: validate the arguments (``ops/_validation.py``, each rule once), plan the backend
(``ops/_dispatch.py``), call the reference, C++ or Triton backend, and return the caller's
output type. Layers above (``models``, ``pipelines``) import this face only.

Kernels
-------
Embeddings: :func:`cosine_matrix`, :func:`segmented_cosine`, :func:`claim_relevance`,
:func:`topk_cosine`.

MIRAGE claim graph, in pipeline order::

    token_ids, token_offsets = claim_token_ids(texts)
    i, j, overlap = select_pairs(token_ids, token_offsets, source_ids)      # pairs for NLI
    g = nli_graph(i, j, probs_fwd, probs_bwd, n_claims)                     # edges
    keep, order, F = greedy_prune(scores, i[m], j[m], (g.w_supp - g.w_contr)[m])  # m = g.kind != 0
    stats = gate_stats(keep, i, j, g.kind, domain_ids)

LexicalNLI's alignment: :func:`lexical_opcodes`.

ReliableRAG: the most reliable unused triples of each reasoning chain,
:func:`triple_reliability` (shared triples) and :func:`triple_reliability_segmented` (each
chain its question's triples); the beam search over reasoning chains, one hop: :func:`beam_step`.

Conformal factuality (Mohri & Hashimoto 2024; Feng et al. 2025)::

    r = r_scores(scores, labels_ok, offsets, a=1.0)          # one r-score per response
    q_hat = conformal_quantile(r, alpha=0.1)                  # keep a claim iff s >= q_hat
    sweep = conformal_sweep(scores, labels_ok, offsets, alphas=[0.05, 0.1], n_splits=100, seed=0)

Conventions shared by every op
------------------------------
* Embeddings are float16/32/64 numpy arrays or torch tensors, converted to contiguous
  float32. Integer arguments (ids, indices, offsets) are any integer numpy array, list or
  torch tensor, converted to contiguous int64; other float arguments (scores, weights,
  probabilities) are converted to float64 (integers are accepted for scores and weights).
  ``keep`` and ``labels_ok`` are bool.
* Output type follows input: numpy in, numpy out; a torch CPU tensor in, a torch CPU tensor
  out; a CUDA tensor in, a CUDA tensor out (gradients are not tracked). The conformal ops
  always return numpy.
* ``backend``: None/"auto" (CPU data -> "cpp"; CUDA tensors -> per op the faster of
  "triton" and "torch" as measured on the device, ``_dispatch.CUDA_AUTO``, or C++ with a
  copy for the ops with neither), "reference" (the float64 NumPy / Python truth in
  :mod:`rrag_kernels.reference`), "cpp", "triton" or "torch" (``cosine_matrix``,
  ``segmented_cosine``, ``claim_relevance``, ``topk_cosine``, ``triple_reliability``,
  ``triple_reliability_segmented``, ``nli_graph``; Triton on CUDA, or on the CPU under
  ``TRITON_INTERPRET=1``; torch on any device: :mod:`rrag_kernels.torch_ops`). A fallback
  (no compiled module, no Triton) warns once.
* Cosine of a zero vector is 0, never NaN. A row whose float32 squared norm underflows to
  0 counts as a zero vector.
* Offsets are CSR-style: ``offsets[0] == 0``, non-decreasing, ``offsets[-1] == len(rows)``;
  segment ``q`` is ``rows[offsets[q]:offsets[q + 1]]``.
* ``check_finite=True`` (default) raises ValueError naming the argument when an embedding
  holds NaN or inf. The C++ backend gets this check for free from the squared norms it
  computes anyway, and also rejects a row whose squared norm overflows float32 (|x| ≳ 1e19);
  with ``check_finite=False`` such inputs give unspecified (NaN) results.
* The graph, alignment, conformal and beam-search kernels return exactly the same discrete
  outputs (pairs, kinds, counts, adjacency, kept sets, removal orders, opcodes, thresholds,
  kept chains) and
  bitwise the same floats in every backend: each float is one prescribed float64 expression,
  an order statistic, or (``greedy_prune``) exact fixed-point integer arithmetic.
* Bad arguments raise TypeError (wrong kind or dtype) or ValueError (shape or value) whose
  message starts with the argument's name. Shapes and dtypes are checked in Python for
  every backend; value checks (NaN/inf, ranges, offsets, self-loops) in Python for the
  reference and Triton backends and inside the C++ kernels' own pass for ``cpp``, with
  messages of the same form.

Shared argument rules
---------------------
The layers above validate their own arguments with the same rules (so every message has the
same form): :func:`check_int`, :func:`check_real`, :func:`check_no_nan`,
:func:`label_order_columns` (what an NLI model's columns are), and for claim data
:func:`as_claims`, :func:`check_level_a`, :func:`check_sentinel`.
"""

from __future__ import annotations

from ._memory import check_memory_budget, get_memory_budget, set_memory_budget
from ._validation import (
    LABELS,
    as_claims,
    check_bool,
    check_choice,
    check_int,
    check_level_a,
    check_no_nan,
    check_real,
    check_sentinel,
    label_order_columns,
)
from .beam_step import BeamStep, beam_step
from .claim_relevance import claim_relevance
from .conformal_quantile import conformal_quantile
from .conformal_sweep import SweepResult, conformal_sweep
from .cosine_matrix import cosine_matrix
from .gate_stats import gate_stats
from .greedy_prune import PruneResult, greedy_prune
from .lexical_align import OPCODE_TAGS, Opcodes, lexical_opcodes
from .nli_graph import NliGraph, label_columns, nli_graph
from .r_scores import r_scores
from .segmented_cosine import segmented_cosine
from .select_pairs import TOKEN_PATTERN, Pairs, claim_token_ids, select_pairs
from .topk_cosine import topk_cosine
from .triple_reliability import triple_reliability, triple_reliability_segmented

__all__ = [
    # kernels
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
    "segmented_cosine",
    "select_pairs",
    "topk_cosine",
    "triple_reliability",
    "triple_reliability_segmented",
    # settings
    "get_memory_budget",
    "set_memory_budget",
    # result types and constants
    "BeamStep",
    "LABELS",
    "NliGraph",
    "OPCODE_TAGS",
    "Opcodes",
    "Pairs",
    "PruneResult",
    "SweepResult",
    "TOKEN_PATTERN",
    "label_columns",
    # shared argument rules
    "as_claims",
    "check_bool",
    "check_choice",
    "check_int",
    "check_level_a",
    "check_memory_budget",
    "check_no_nan",
    "check_real",
    "check_sentinel",
    "label_order_columns",
]
