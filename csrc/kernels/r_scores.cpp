#include "kernels/r_scores.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kernels/checks.hpp"
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
  if (a == 1.0) {
    // The fraction drops below 1 exactly at the first threshold that keeps an unsupported
    // claim: the largest unsupported score.
    bool any = false;
    double u = 0.0;
    for (int64_t c = 0; c < p; ++c)
      if (!ok[c] && (!any || s[c] > u)) {
        u = s[c];
        any = true;
      }
    return any ? u : sentinel;
  }
  for (int64_t c = 0; c < p; ++c) order[c] = c;
  // Descending score; the order within a group of equal scores does not matter because the
  // whole group is taken before the fraction is tested. Insertion sort for short responses.
  auto desc = [s](int64_t x, int64_t y) { return s[x] > s[y]; };
  if (p <= 16) {
    for (int64_t i = 1; i < p; ++i) {
      const int64_t v = order[i];
      int64_t j = i;
      while (j > 0 && desc(v, order[j - 1])) {
        order[j] = order[j - 1];
        --j;
      }
      order[j] = v;
    }
  } else {
    std::sort(order, order + p, desc);
  }
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
  check_offsets(offsets, n_responses, n_claims, "offsets");
  check_level_a(a);
  check_scores_not_nan(scores, n_claims, "scores");
  int64_t p_max = 0;
  for (int64_t i = 0; i < n_responses; ++i) p_max = std::max(p_max, offsets[i + 1] - offsets[i]);
#pragma omp parallel num_threads(get_num_threads())
  {
    std::vector<int64_t> order(static_cast<size_t>(p_max));
#pragma omp for schedule(dynamic, 1024)
    for (int64_t i = 0; i < n_responses; ++i) {
      const int64_t b = offsets[i];
      out[i] = r_score_one(scores + b, labels_ok + b, offsets[i + 1] - b, a, sentinel, order.data());
    }
  }
}

}  // namespace rrag
