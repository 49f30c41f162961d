// Many random calibration/test splits and many alphas of split-conformal factuality in one call.
#pragma once

#include <cstdint>

#include "simd/primitives.hpp"

namespace rrag {

// The split generator, shared bit for bit with reference/conformal_sweep.py.
// SplitMix64's finaliser (a bijection of uint64):
//   mix(z): z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9; z = (z ^ (z >> 27)) * 0x94D049BB133111EB;
//           return z ^ (z >> 31)                                  (all arithmetic mod 2^64)
// Split s of seed: base = mix(seed + (s + 1) * G), key_j = mix(base + (j + 1) * G) with
// G = 0x9E3779B97F4A7C15 (odd, so the keys of one split are distinct). The calibration set is
// the m = floor(calib_fraction * n) responses with the smallest keys; the rest are the test set.
using simd::kSplitGamma;
using simd::splitmix64_mix;
inline uint64_t split_base(uint64_t seed, int64_t split) {
  return splitmix64_mix(seed + (uint64_t(split) + 1) * kSplitGamma);
}
inline uint64_t split_key(uint64_t base, int64_t j) { return splitmix64_mix(base + (uint64_t(j) + 1) * kSplitGamma); }

struct SweepOutput {
  double* q_hat;             // (n_splits, n_alphas, n_groups)
  double* fully_supported;   // (n_splits, n_alphas)
  double* retention;         // (n_splits, n_alphas)
  double* non_empty;         // (n_splits, n_alphas)
  double* supported_given_non_empty;  // (n_splits, n_alphas), NaN when no test response is non-empty
  int64_t* n_calib;          // (n_splits, n_groups)
};

// For each split and alpha: q_hat[g] = the k-th smallest r-score of the calibration responses of
// group g (k = ceil((n_g + 1)(1 - alpha)), +inf when k > n_g), then over the test responses
// (each filtered at its group's q_hat, claim kept iff s >= q_hat):
//   fully_supported = #{no kept unsupported claim} / n_test (an empty filtered response counts),
//   non_empty = #{>= 1 kept claim} / n_test,
//   supported_given_non_empty = #{fully supported and non-empty} / #{non-empty},
//   retention = (n0 + sum over distinct claim counts p > 0, ascending, of double(K_p) / double(p))
//               / n_test, K_p = kept claims of the test responses with p claims, n0 = test
//               responses with no claims (nothing removed).
// Every count is an integer, every float one fixed expression: identical at any thread count.
// groups == nullptr: one group. Checks as r_scores, plus alphas in (0, 1), calib_fraction such
// that 1 <= m <= n - 1, n_splits >= 0, groups in [0, n_groups).
void conformal_sweep(const double* scores, const bool* labels_ok, int64_t n_claims, const int64_t* offsets,
                     int64_t n_responses, const double* alphas, int64_t n_alphas, int64_t n_splits,
                     double calib_fraction, uint64_t seed, double a, double sentinel, const int64_t* groups,
                     int64_t n_groups, const SweepOutput& out);

// Testing hook (defaults 8, 8, true): half-widths, in standard deviations, of the window each
// split's threshold key is selected from and of the r-score bands q_hat is read from (small
// values make the exact fallbacks run often; < 0 turns the shortcut off), and whether
// split-invariant responses are evaluated once per class. Results are identical for any value.
void set_sweep_tuning(double window_sigmas, double band_sigmas, bool stable_classes);

// m = floor(calib_fraction * n); throws unless calib_fraction in (0, 1) and 1 <= m <= n - 1.
int64_t calibration_size(int64_t n, double calib_fraction);

}  // namespace rrag
