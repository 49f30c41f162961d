#pragma once

#include <cstdint>

namespace rrag {

// out[r] = cos(queries_q, docs_r) for doc_offsets[q] <= r < doc_offsets[q + 1], computed as
// (<q, r> * inv|q|) * inv|r|. queries: Q x d, docs: D x d, doc_offsets: Q + 1 (CSR), out: D.
void segmented_cosine(const float* queries, int64_t n_queries, const float* docs, int64_t n_docs,
                      int64_t d, const int64_t* doc_offsets, float* out, bool check_finite);

}  // namespace rrag
