#include "kernels/r_scores.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "kernels/checks.hpp"
#include "kernels/parallel.hpp"
#include "kernels/runtime.hpp"

namespace rrag {

void check_scores_not_nan(const double* scores, int64_t n, const char* arg) {
  for (int64_t c = 0; c < n; ++c)
    if (std::isnan(scores[c])) fail(arg, "contains NaN (first at index " + std::to_string(c) + ")");
}

void check_level_a(double a) {
  if (!(a > 0.0 && a <= 1.0)) fail("a", "the factuality level must be in (0, 1], got " + std::to_string(a));
}

double r_score_one(const double* s, const bool* ok, int64_t p, double a, double sentinel, int64_t* order) {
  if (p == 0) return sentinel;
  // Short responses: pairwise counts (SIMD primitive), cheaper than a sort.
  if (p <= simd::kShortResponse) return primitives().r_score_short(s, ok, p, a, sentinel);
  for (int64_t c = 0; c < p; ++c) order[c] = c;
  // Descending score; the order within a group of equal scores does not matter because the
  // whole group is taken before the fraction is tested.
  std::sort(order, order + p, [s](int64_t x, int64_t y) { return s[x] > s[y]; });
  int64_t kept = 0, supported = 0;
  int64_t c = 0;
  while (c < p) {
    const double t = s[order[c]];
    while (c < p && s[order[c]] == t) {
      ++kept;
      supported += ok[order[c]] ? 1 : 0;
      ++c;
    }
    if (double(supported) / double(kept) < a) return t;
  }
  return sentinel;
}

void r_scores(const double* scores, const bool* labels_ok, int64_t n_claims, const int64_t* offsets,
              int64_t n_responses, double a, double sentinel, double* out) {
  check_offsets_parallel(offsets, n_responses, n_claims, "offsets");
  check_level_a(a);
  if (std::isnan(sentinel)) fail("sentinel", "must not be NaN");
  // Every claim belongs to exactly one response (checked CSR), so the NaN test rides along in
  // the scoring pass instead of costing a separate read of the scores; the lowest bad index is
  // looked up only when there is one.
  std::atomic<bool> any_nan{false};
  if (a == 1.0) {
    // The fraction drops below 1 exactly at the largest unsupported score: a masked maximum
    // per response, memory-bound (SIMD primitive of the active ISA). Parallel from ~64k
    // claims (~10 microseconds of streaming) on.
    const auto& prims = primitives();
    constexpr int64_t kChunk = 4096;
    const int workers = workers_for(n_claims + n_responses, int64_t(1) << 16, (n_responses + kChunk - 1) / kChunk);
    parallel_for(n_responses, kChunk, workers, [&](int64_t i0, int64_t i1, int) {
      if (prims.unsupported_max(scores, labels_ok, offsets + i0, i1 - i0, sentinel, out + i0, nullptr))
        any_nan.store(true, std::memory_order_relaxed);
    });
  } else {
    int64_t p_max = 0;
    for (int64_t i = 0; i < n_responses; ++i) p_max = std::max(p_max, offsets[i + 1] - offsets[i]);
    constexpr int64_t kChunk = 1024;
    const int workers = workers_for(n_claims + n_responses, int64_t(1) << 14, (n_responses + kChunk - 1) / kChunk);
    std::vector<std::vector<int64_t>> order(static_cast<size_t>(workers));
    parallel_for(n_responses, kChunk, workers, [&](int64_t i0, int64_t i1, int worker) {
      std::vector<int64_t>& ord = order[static_cast<size_t>(worker)];
      if (ord.size() < static_cast<size_t>(p_max)) ord.resize(static_cast<size_t>(p_max));
      bool nan = false;
      for (int64_t i = i0; i < i1; ++i) {
        const int64_t b = offsets[i];
        bool here = false;
        for (int64_t c = b; c < offsets[i + 1]; ++c) here |= scores[c] != scores[c];
        nan |= here;
        // NaN breaks the ordering the sort needs; such a call throws below anyway.
        out[i] = here ? sentinel : r_score_one(scores + b, labels_ok + b, offsets[i + 1] - b, a, sentinel, ord.data());
      }
      if (nan) any_nan.store(true, std::memory_order_relaxed);
    });
  }
  if (any_nan) check_scores_not_nan(scores, n_claims, "scores");
}

}  // namespace rrag
