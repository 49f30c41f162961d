#pragma once

#include <cstdint>

namespace rrag {

// The Conformal-RAG claim score, fused (no C x D intermediate):
//   R(c) = max over docs r of c's query of  sim(x, r) * cos(c, r)     (0 if no docs),
// with sim(x, r) = cos(query, r) or query_doc_sim[r] when that is given, clipped at 0 when
// `clip`. query_emb: Q x d, doc_emb: D x d, claim_emb: C x d, offsets: Q + 1 each (CSR),
// query_doc_sim: D or nullptr, out: C.
void claim_relevance(const float* query_emb, int64_t n_queries, const float* doc_emb,
                     int64_t n_docs, const int64_t* doc_offsets, const float* claim_emb,
                     int64_t n_claims, const int64_t* claim_offsets, int64_t d,
                     const float* query_doc_sim, bool clip, float* out, bool check_finite);

}  // namespace rrag
