// The split-conformal quantile of r-scores, selected by integer rank.
#pragma once

#include <cstdint>

namespace rrag {

// k = ceil((double(n) + 1.0) * (1.0 - alpha)) in float64; the rank conformal uses.
int64_t conformal_rank(int64_t n, double alpha);

// For each alphas[j]: the k-th smallest of r[0..n) (1-based), or +inf when k > n (or, with
// raise_if_too_few, std::invalid_argument "alpha: ..."). Checks: n >= 1 ("r: empty
// calibration set"), r without NaN, every alpha in (0, 1). From 65,536 r-scores on, one
// parallel pass and a selection over a narrow band of values per alpha (exact fallback).
void conformal_quantile(const double* r, int64_t n, const double* alphas, int64_t n_alphas, bool raise_if_too_few,
                        double* out);

// Testing hook: false forces the exact selection over all n (results are identical).
void set_quantile_bands(bool on);

void check_alpha(double alpha, const char* arg);

}  // namespace rrag
