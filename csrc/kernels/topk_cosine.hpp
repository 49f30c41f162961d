#pragma once

#include <cstdint>

namespace rrag {

// For each query, the k corpus rows of highest cosine, descending; equal scores are ordered
// by lower corpus index first. Scores are bitwise those of cosine_matrix(queries, corpus).
// queries: Q x d, corpus: N x d, out_scores: Q x k float32, out_indices: Q x k int64.
// The Q x N matrix is never held: tiles of it are reduced into per-query heaps.
void topk_cosine(const float* queries, int64_t n_queries, const float* corpus, int64_t n_corpus,
                 int64_t d, int64_t k, float* out_scores, int64_t* out_indices, bool check_finite);

}  // namespace rrag
