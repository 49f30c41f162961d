// ReliableRAG's beam search over reasoning chains: one hop, many questions at once.
#pragma once

#include <cstdint>
#include <vector>

namespace rrag {

struct BeamStepResult {
  std::vector<int64_t> parent;    // (N,) global chain index of each kept child
  std::vector<int64_t> choice;    // (N,) 0 = 'A' (stop), c >= 1 = candidate c - 1, -1 = carried over
  std::vector<double> score;      // (N,)
  std::vector<uint8_t> finished;  // (N,)
  std::vector<int64_t> offsets;   // (Q + 1,) CSR of the kept children per question
};

// Question q owns chains chain_offsets[q] .. chain_offsets[q + 1] of B; choice_probs is (B, C)
// row-major, column 0 = 'A', NaN = absent. For each chain b of q, in order:
//   finished[b]                -> carried over (b, -1, parent_scores[b], finished);
//   row b holds no non-NaN      -> carried over (b, -1, parent_scores[b], unfinished);
//   else take the top min(beams, #non-NaN) columns by (p desc, column asc) FIRST, then for
//   each in that rank order skip p < min_prob and c - 1 >= n_candidates[b] (c >= 1; a letter
//   past the candidates uses up its slot), else emit (b, c, parent_scores[b] * p, c == 0).
// q keeps the first max_chains of its children in emission order stably sorted by score
// descending, i.e. the max_chains best by (score desc, emission index asc). Every score is one
// float64 multiply, so the result is bitwise the reference's.
// How: a chain's top columns come from branch-free argmax passes over its compacted row (two
// rows interleaved; a partial sort for beams > 16); its children are then already in
// descending score order (multiplying by parent_scores[b] >= 0 is monotone), so the stable
// sort is a stable merge of the chains' runs, stopped after max_chains: O(C beams) per chain
// plus O(max_chains x chains) per question (a heap beyond 32 chains). Parallel over questions;
// the same result at any thread count. Values are checked (argument-named invalid_argument):
// parent_scores finite >= 0, probabilities in [0, 1] or NaN, n_candidates in [0, C - 1], CSR
// offsets, beams >= 1, min_prob in [0, 1], max_chains >= 1, C >= 1.
BeamStepResult beam_step(const double* parent_scores, const uint8_t* finished, const double* choice_probs,
                         const int64_t* n_candidates, int64_t n_chains, int64_t n_choices,
                         const int64_t* chain_offsets, int64_t n_questions, int64_t beams, double min_prob,
                         int64_t max_chains);

}  // namespace rrag
