#pragma once

#include <cstdint>

namespace rrag {

// Throws std::invalid_argument naming k unless k >= 1 (the bindings call it before they
// allocate the (B, k) outputs).
void check_triple_k(int64_t k);

// ReliableRAG triple reliability, fused (no chains x triples matrix is held):
//   R(b, t) = alpha * cos(q_b, t) + (1 - alpha) * c(t) / 10,
// computed as float(alpha) * ((<q_b, t> * inv|q_b|) * inv|t|) + float((1 - alpha) * c(t) / 10)
// (the second term in double); cosine of a zero row is 0. For each chain b the k triples of
// highest R that b has not used, descending; equal R by lower triple index first; when fewer
// than k are available the row ends with index -1 and score -inf.
//
// Segmented form: chain b scores only the triples of its question q = chain_question[b],
// rows triple_offsets[q] .. triple_offsets[q + 1] - 1, and returns those global rows.
// query_emb: B x d, triple_emb: T x d (float32), credibility: T (float64, finite, in [0, 10]),
// triple_offsets: Q + 1 (CSR), chain_question: B (in [0, Q)), used: n_used bool or nullptr,
// chain by chain in chain order, chain b's n_b = n_triples(chain_question[b]) entries indexed
// by local triple position (n_used must be the sum of the n_b), alpha in [0, 1], k >= 1;
// out_scores: B x k float32, out_indices: B x k int64.
void triple_reliability_segmented(const float* query_emb, int64_t n_chains, const float* triple_emb,
                                  int64_t n_triples, int64_t d, const double* credibility,
                                  const int64_t* triple_offsets, int64_t n_questions,
                                  const int64_t* chain_question, const bool* used, int64_t n_used,
                                  double alpha, int64_t k, float* out_scores, int64_t* out_indices,
                                  bool check_finite);

// The single form: every chain scores all T triples (one question); used: B x T row-major
// bool or nullptr. Bitwise the segmented form with triple_offsets = {0, T}.
void triple_reliability(const float* query_emb, int64_t n_chains, const float* triple_emb, int64_t n_triples,
                        int64_t d, const double* credibility, const bool* used, double alpha, int64_t k,
                        float* out_scores, int64_t* out_indices, bool check_finite);

}  // namespace rrag
