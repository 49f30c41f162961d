#include "kernels/conformal_quantile.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "kernels/checks.hpp"
#include "kernels/parallel.hpp"
#include "kernels/r_scores.hpp"
#include "kernels/runtime.hpp"

namespace rrag {
namespace {
std::atomic<bool> g_use_bands{true};
}  // namespace

int64_t conformal_rank(int64_t n, double alpha) {
  return static_cast<int64_t>(std::ceil((double(n) + 1.0) * (1.0 - alpha)));
}

void check_alpha(double alpha, const char* arg) {
  if (!(alpha > 0.0 && alpha < 1.0)) fail(arg, "must be in (0, 1), got " + std::to_string(alpha));
}

namespace {

// Below this many r-scores one progressive nth_element over a copy is as fast as anything.
constexpr int64_t kBandMinN = int64_t(1) << 16;
constexpr int64_t kSample = 8192;
constexpr int64_t kBlock = 4096;

// Progressive nth_element over a copy: ranks ascending, each selection narrows the next range.
void select_by_sorting(const double* r, int64_t n, const std::vector<int64_t>& ks, double* out) {
  const int64_t n_alphas = static_cast<int64_t>(ks.size());
  std::vector<int64_t> idx(static_cast<size_t>(n_alphas));
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

// Large n: the k-th smallest is read off a narrow band of values instead of a selection over
// all n. A strided sample gives, for each rank k, values lo <= hi whose sample ranks lie
// 4.5 sigma + 2 samples below and above k/n; one parallel pass counts the r < lo exactly and
// gathers the r in [lo, hi]; when k - count falls inside the band, the answer is that order
// statistic of the band (a selection over ~5 % of n); else (a sample that misled) the exact
// selection over all n runs. Every step is exact, so the result is the same at any thread
// count and equals the reference.
bool select_from_bands(const double* r, int64_t n, const std::vector<int64_t>& ks, double* out) {
  const int64_t n_alphas = static_cast<int64_t>(ks.size());
  // Band ends in sample ranks, then those order statistics of the sample (progressive
  // selections: cheaper than sorting it).
  std::vector<int64_t> lo_at(static_cast<size_t>(n_alphas)), hi_at(static_cast<size_t>(n_alphas));
  std::vector<int64_t> wanted;
  for (int64_t j = 0; j < n_alphas; ++j) {
    const double p = std::min(1.0, double(ks[j]) / double(n));
    const double delta = 4.5 * std::sqrt(std::max(p * (1.0 - p), 1.0 / kSample) / kSample) + 2.0 / kSample;
    lo_at[j] = static_cast<int64_t>(std::floor((p - delta) * kSample));
    hi_at[j] = static_cast<int64_t>(std::ceil((p + delta) * kSample));
    if (lo_at[j] > 0) wanted.push_back(lo_at[j]);
    if (hi_at[j] < kSample - 1) wanted.push_back(hi_at[j]);
  }
  std::vector<double> sample(static_cast<size_t>(kSample));
  for (int64_t t = 0; t < kSample; ++t) sample[t] = r[(t * n) / kSample];
  std::sort(wanted.begin(), wanted.end());
  int64_t first = 0;  // positions before `first` hold their order statistics already
  for (const int64_t w : wanted) {
    if (w < first) continue;  // a repeated rank
    std::nth_element(sample.begin() + first, sample.begin() + w, sample.end());
    first = w + 1;
  }
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> lo(static_cast<size_t>(n_alphas)), hi(static_cast<size_t>(n_alphas));
  for (int64_t j = 0; j < n_alphas; ++j) {
    lo[j] = lo_at[j] <= 0 ? -inf : sample[static_cast<size_t>(lo_at[j])];
    hi[j] = hi_at[j] >= kSample - 1 ? inf : sample[static_cast<size_t>(hi_at[j])];
  }
  // Per worker: counts below each band and the band members (their order is irrelevant: a
  // selection follows).
  struct Part {
    std::vector<int64_t> below;
    std::vector<std::vector<double>> members;
    std::vector<double> scratch;
    bool nan = false;
  };
  const auto& prims = primitives();
  const int64_t n_blocks = (n + kBlock - 1) / kBlock;
  const int workers = workers_for(n * n_alphas, int64_t(1) << 17, n_blocks);
  std::vector<Part> parts(static_cast<size_t>(workers));
  parallel_for(n, kBlock, workers, [&](int64_t b, int64_t e, int worker) {
    Part& part = parts[static_cast<size_t>(worker)];
    if (part.below.empty()) {
      part.below.assign(static_cast<size_t>(n_alphas), 0);
      part.members.resize(static_cast<size_t>(n_alphas));
      part.scratch.resize(static_cast<size_t>(kBlock + 8));
    }
    bool nan = false;
    for (int64_t i = b; i < e; ++i) nan |= r[i] != r[i];
    part.nan |= nan;
    for (int64_t j = 0; j < n_alphas; ++j) {
      const int64_t m = prims.band_gather(r + b, e - b, lo[j], hi[j], part.scratch.data(), &part.below[j]);
      part.members[j].insert(part.members[j].end(), part.scratch.begin(), part.scratch.begin() + m);
    }
  });
  for (const Part& part : parts)
    if (part.nan) check_scores_not_nan(r, n, "r");
  // One selection per alpha over its band, in parallel over the alphas.
  std::vector<char> found(static_cast<size_t>(n_alphas), 1);
  parallel_for(n_alphas, 1, workers_for(n_alphas, 1), [&](int64_t j, int64_t, int) {
    const int64_t k = ks[j];
    if (k > n) {
      out[j] = inf;
      return;
    }
    int64_t below = 0;
    size_t size = 0;
    for (const Part& part : parts)
      if (!part.below.empty()) {
        below += part.below[j];
        size += part.members[j].size();
      }
    const int64_t at = k - 1 - below;
    if (at < 0 || at >= static_cast<int64_t>(size)) {
      found[j] = 0;
      return;
    }
    std::vector<double> band;
    band.reserve(size);
    for (const Part& part : parts)
      if (!part.below.empty()) band.insert(band.end(), part.members[j].begin(), part.members[j].end());
    std::nth_element(band.begin(), band.begin() + at, band.end());
    out[j] = band[static_cast<size_t>(at)];
  });
  return std::all_of(found.begin(), found.end(), [](char f) { return f != 0; });
}

}  // namespace

void conformal_quantile(const double* r, int64_t n, const double* alphas, int64_t n_alphas, bool raise_if_too_few,
                        double* out) {
  if (n < 1) fail("r", "empty calibration set (no r-scores)");
  for (int64_t j = 0; j < n_alphas; ++j) check_alpha(alphas[j], "alpha");
  std::vector<int64_t> ks(static_cast<size_t>(n_alphas));
  for (int64_t j = 0; j < n_alphas; ++j) {
    ks[j] = conformal_rank(n, alphas[j]);
    if (ks[j] > n && raise_if_too_few)
      fail("alpha", "alpha = " + std::to_string(alphas[j]) + " needs rank k = ceil((n+1)(1-alpha)) = " +
                        std::to_string(ks[j]) + " > n = " + std::to_string(n) + " r-scores");
  }
  if (n >= kBandMinN && g_use_bands.load(std::memory_order_relaxed) && select_from_bands(r, n, ks, out)) return;
  check_scores_not_nan(r, n, "r");
  select_by_sorting(r, n, ks, out);
}

void set_quantile_bands(bool on) { g_use_bands.store(on, std::memory_order_relaxed); }

}  // namespace rrag
