// Conformal factuality r-scores (Mohri & Hashimoto 2024): one score per response.
#pragma once

#include <cstdint>

namespace rrag {

// r-score of each response i (claims offsets[i] .. offsets[i+1]): scan the thresholds t
// over the response's scores in descending order (equal scores form one threshold, since a
// threshold keeps the claims with s >= t); S_i is the first t at which the supported
// fraction double(n_supported) / double(n_kept) of the claims with s >= t is < a. When no
// threshold qualifies, or the response has no claims, S_i = sentinel. O(p log p) per
// response; responses in parallel; the result does not depend on the thread count.
//
// Checks: offsets (CSR over n_claims), scores without NaN (the lowest bad index is named),
// a in (0, 1], sentinel not NaN. Throws std::invalid_argument "<arg>: ...".
void r_scores(const double* scores, const bool* labels_ok, int64_t n_claims, const int64_t* offsets,
              int64_t n_responses, double a, double sentinel, double* out);

// The r-score of one response from its claims' scores and labels (no checks, no NaN), for
// any a in (0, 1]: pairwise counts up to simd::kShortResponse claims, a sort beyond. r_scores
// uses it for a < 1 (a = 1 has its own SIMD pass). `order` is scratch of length >= p.
double r_score_one(const double* s, const bool* ok, int64_t p, double a, double sentinel, int64_t* order);

void check_scores_not_nan(const double* scores, int64_t n, const char* arg);
void check_level_a(double a);

}  // namespace rrag
