#include "kernels/conformal_sweep.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "kernels/checks.hpp"
#include "kernels/conformal_quantile.hpp"
#include "kernels/r_scores.hpp"
#include "kernels/runtime.hpp"

namespace rrag {

int64_t calibration_size(int64_t n, double calib_fraction) {
  if (!(calib_fraction > 0.0 && calib_fraction < 1.0))
    fail("calib_fraction", "must be in (0, 1), got " + std::to_string(calib_fraction));
  const int64_t m = static_cast<int64_t>(std::floor(calib_fraction * double(n)));
  if (m < 1) fail("calib_fraction", "empty calibration set: floor(calib_fraction * n) = 0 for n = " + std::to_string(n));
  if (m > n - 1) fail("calib_fraction", "empty test set: floor(calib_fraction * n) = n = " + std::to_string(n));
  return m;
}

namespace {
constexpr int kBucketBits = 12;  // 4096 counters: L1-resident; ~n/4096 keys per bucket
constexpr int64_t kBuckets = int64_t(1) << kBucketBits;
}  // namespace

void conformal_sweep(const double* scores, const bool* labels_ok, int64_t n_claims, const int64_t* offsets,
                     int64_t n, const double* alphas, int64_t n_alphas, int64_t n_splits, double calib_fraction,
                     uint64_t seed, double a, double sentinel, const int64_t* groups, int64_t n_groups,
                     const SweepOutput& out) {
  check_offsets(offsets, n, n_claims, "offsets");
  check_level_a(a);
  check_scores_not_nan(scores, n_claims, "scores");
  for (int64_t j = 0; j < n_alphas; ++j) check_alpha(alphas[j], "alphas");
  if (n_splits < 0) fail("n_splits", "must be >= 0, got " + std::to_string(n_splits));
  const int64_t m = calibration_size(n, calib_fraction);
  const int64_t n_test = n - m;
  if (groups == nullptr) n_groups = 1;
  if (n_groups < 1) fail("groups", "n_groups must be >= 1");
  std::vector<int64_t> gid(static_cast<size_t>(n), 0);
  if (groups != nullptr)
    for (int64_t j = 0; j < n; ++j) {
      if (groups[j] < 0 || groups[j] >= n_groups)
        fail("groups", "group id " + std::to_string(groups[j]) + " at index " + std::to_string(j) +
                           " out of range [0, " + std::to_string(n_groups) + ")");
      gid[j] = groups[j];
    }

  // ---- per-response precomputation (once for all splits)
  std::vector<double> r(static_cast<size_t>(n));
  r_scores(scores, labels_ok, n_claims, offsets, n, a, sentinel, r.data());
  const double ninf = -std::numeric_limits<double>::infinity();
  // umax: largest unsupported score, smax: largest score; has_bad / p > 0 say whether they exist
  // (a sentinel q_hat of -inf keeps every claim, so -inf cannot stand for "none").
  std::vector<double> umax(static_cast<size_t>(n), ninf), smax(static_cast<size_t>(n), ninf);
  std::vector<char> has_bad(static_cast<size_t>(n), 0);
  std::vector<double> sorted(scores, scores + n_claims);  // each segment descending
#pragma omp parallel for schedule(dynamic, 4096) num_threads(get_num_threads())
  for (int64_t j = 0; j < n; ++j) {
    const int64_t b = offsets[j], e = offsets[j + 1];
    double u = ninf;
    char bad = 0;
    for (int64_t c = b; c < e; ++c)
      if (!labels_ok[c]) {
        bad = 1;
        if (scores[c] > u) u = scores[c];
      }
    umax[j] = u;
    has_bad[j] = bad;
    std::sort(sorted.begin() + b, sorted.begin() + e, [](double x, double y) { return x > y; });
    if (e > b) smax[j] = sorted[b];
  }
  // Distinct claim counts (for the exact retention sums).
  std::vector<int64_t> pvals(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) pvals[j] = offsets[j + 1] - offsets[j];
  std::sort(pvals.begin(), pvals.end());
  pvals.erase(std::unique(pvals.begin(), pvals.end()), pvals.end());
  const int64_t n_p = static_cast<int64_t>(pvals.size());
  std::vector<int32_t> pidx(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j)
    pidx[j] = static_cast<int32_t>(std::lower_bound(pvals.begin(), pvals.end(), offsets[j + 1] - offsets[j]) -
                                   pvals.begin());
  // Responses by (group, r) ascending; group g occupies [gstart[g], gstart[g+1]).
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), int64_t(0));
  std::sort(order.begin(), order.end(), [&](int64_t x, int64_t y) {
    return gid[x] != gid[y] ? gid[x] < gid[y] : (r[x] < r[y] || (r[x] == r[y] && x < y));
  });
  std::vector<int64_t> gstart(static_cast<size_t>(n_groups + 1), 0);
  for (int64_t j = 0; j < n; ++j) ++gstart[gid[j] + 1];
  for (int64_t g = 0; g < n_groups; ++g) gstart[g + 1] += gstart[g];
  // Alphas by rank ascending (alpha descending) so that one walk serves them all.
  std::vector<int64_t> aorder(static_cast<size_t>(n_alphas));
  std::iota(aorder.begin(), aorder.end(), int64_t(0));
  std::stable_sort(aorder.begin(), aorder.end(), [&](int64_t x, int64_t y) { return alphas[x] > alphas[y]; });
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();

#pragma omp parallel num_threads(get_num_threads())
  {
    std::vector<uint64_t> keys(static_cast<size_t>(n));
    std::vector<int64_t> hist(static_cast<size_t>(kBuckets));
    std::vector<uint64_t> bucket;
    std::vector<int64_t> ncal(static_cast<size_t>(n_groups));
    std::vector<double> q(static_cast<size_t>(n_groups * n_alphas));
    std::vector<int64_t> K(static_cast<size_t>(n_p * n_alphas));
    std::vector<int64_t> c_fs(static_cast<size_t>(n_alphas)), c_ne(static_cast<size_t>(n_alphas)),
        c_fsne(static_cast<size_t>(n_alphas));
#pragma omp for schedule(dynamic, 1)
    for (int64_t s = 0; s < n_splits; ++s) {
      // 1. keys and a histogram of their top bits
      const uint64_t base = split_base(seed, s);
      std::fill(hist.begin(), hist.end(), 0);
      for (int64_t j = 0; j < n; ++j) {
        const uint64_t k = split_key(base, j);
        keys[j] = k;
        ++hist[k >> (64 - kBucketBits)];
      }
      // 2. T = the m-th smallest key (radix select: the bucket, then the few keys in it)
      int64_t below = 0, b = 0;
      while (below + hist[b] < m) below += hist[b++];
      bucket.clear();
      std::fill(ncal.begin(), ncal.end(), 0);
      for (int64_t j = 0; j < n; ++j)
        if (static_cast<int64_t>(keys[j] >> (64 - kBucketBits)) == b) bucket.push_back(keys[j]);
      std::nth_element(bucket.begin(), bucket.begin() + (m - below - 1), bucket.end());
      const uint64_t T = bucket[m - below - 1];
      for (int64_t j = 0; j < n; ++j) ncal[gid[j]] += keys[j] <= T ? 1 : 0;
      // 3. q_hat per group and alpha: walk the group's responses by r ascending, counting members
      for (int64_t g = 0; g < n_groups; ++g) {
        const int64_t ng = ncal[g];
        int64_t t = 0, seen = 0, i = gstart[g];
        while (t < n_alphas) {
          const int64_t ai = aorder[t];
          const int64_t k = conformal_rank(ng, alphas[ai]);
          if (k > ng) {
            for (; t < n_alphas; ++t) q[g * n_alphas + aorder[t]] = inf;  // ranks only grow
            break;
          }
          while (seen < k) {
            // recompute the key: sequential reads of `order` instead of a random gather
            if (split_key(base, order[i]) <= T) ++seen;
            ++i;
          }
          q[g * n_alphas + ai] = r[order[i - 1]];
          ++t;
        }
      }
      // 4. metrics over the test responses
      std::fill(K.begin(), K.end(), 0);
      std::fill(c_fs.begin(), c_fs.end(), 0);
      std::fill(c_ne.begin(), c_ne.end(), 0);
      std::fill(c_fsne.begin(), c_fsne.end(), 0);
      int64_t n0 = 0;
      for (int64_t j = 0; j < n; ++j) {
        if (keys[j] <= T) continue;
        const int64_t bj = offsets[j], p = offsets[j + 1] - bj;
        if (p == 0) ++n0;
        const double* sj = sorted.data() + bj;
        const double* qg = q.data() + gid[j] * n_alphas;
        const bool bad = has_bad[j] != 0, any = p > 0;
        int64_t* Kj = K.data() + int64_t(pidx[j]) * n_alphas;
        for (int64_t ai = 0; ai < n_alphas; ++ai) {
          const double qa = qg[ai];
          const int64_t fs = (!bad || umax[j] < qa) ? 1 : 0, ne = (any && smax[j] >= qa) ? 1 : 0;
          c_fs[ai] += fs;
          c_ne[ai] += ne;
          c_fsne[ai] += fs & ne;
          int64_t kept = 0;
          for (int64_t c = 0; c < p; ++c) kept += sj[c] >= qa ? 1 : 0;
          Kj[ai] += kept;
        }
      }
      for (int64_t ai = 0; ai < n_alphas; ++ai) {
        const int64_t o = s * n_alphas + ai;
        double acc = 0.0;
        for (int64_t pi = 0; pi < n_p; ++pi)
          if (pvals[pi] > 0) acc += double(K[pi * n_alphas + ai]) / double(pvals[pi]);
        out.retention[o] = (acc + double(n0)) / double(n_test);
        out.fully_supported[o] = double(c_fs[ai]) / double(n_test);
        out.non_empty[o] = double(c_ne[ai]) / double(n_test);
        out.supported_given_non_empty[o] = c_ne[ai] > 0 ? double(c_fsne[ai]) / double(c_ne[ai]) : nan;
        for (int64_t g = 0; g < n_groups; ++g) out.q_hat[o * n_groups + g] = q[g * n_alphas + ai];
      }
      for (int64_t g = 0; g < n_groups; ++g) out.n_calib[s * n_groups + g] = ncal[g];
    }
  }
}

}  // namespace rrag
