#include "kernels/conformal_quantile.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "kernels/checks.hpp"
#include "kernels/r_scores.hpp"

namespace rrag {

int64_t conformal_rank(int64_t n, double alpha) {
  return static_cast<int64_t>(std::ceil((double(n) + 1.0) * (1.0 - alpha)));
}

void check_alpha(double alpha, const char* arg) {
  if (!(alpha > 0.0 && alpha < 1.0)) fail(arg, "must be in (0, 1), got " + std::to_string(alpha));
}

void conformal_quantile(const double* r, int64_t n, const double* alphas, int64_t n_alphas, bool raise_if_too_few,
                        double* out) {
  if (n < 1) fail("r", "empty calibration set (no r-scores)");
  check_scores_not_nan(r, n, "r");
  for (int64_t j = 0; j < n_alphas; ++j) check_alpha(alphas[j], "alpha");
  // Ranks ascending, then progressive nth_element: each selection narrows the next range.
  std::vector<int64_t> ks(static_cast<size_t>(n_alphas)), idx(static_cast<size_t>(n_alphas));
  for (int64_t j = 0; j < n_alphas; ++j) {
    ks[j] = conformal_rank(n, alphas[j]);
    if (ks[j] > n && raise_if_too_few)
      fail("alpha", "alpha = " + std::to_string(alphas[j]) + " needs rank k = ceil((n+1)(1-alpha)) = " +
                        std::to_string(ks[j]) + " > n = " + std::to_string(n) + " r-scores");
  }
  std::iota(idx.begin(), idx.end(), int64_t(0));
  std::sort(idx.begin(), idx.end(), [&](int64_t x, int64_t y) { return ks[x] < ks[y]; });
  std::vector<double> buf(r, r + n);
  int64_t lo = 0;
  for (int64_t t = 0; t < n_alphas; ++t) {
    const int64_t j = idx[t], k = ks[j];
    if (k > n) {
      out[j] = std::numeric_limits<double>::infinity();
      continue;
    }
    std::nth_element(buf.begin() + lo, buf.begin() + (k - 1), buf.end());
    out[j] = buf[k - 1];
    lo = k - 1;
  }
}

}  // namespace rrag
