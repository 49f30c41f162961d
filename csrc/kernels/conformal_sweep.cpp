#include "kernels/conformal_sweep.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "kernels/checks.hpp"
#include "kernels/parallel.hpp"
#include "kernels/conformal_quantile.hpp"
#include "kernels/r_scores.hpp"
#include "kernels/runtime.hpp"

// How the sweep avoids a sort per split and a read of every claim per split
// -------------------------------------------------------------------------
// Responses are laid out by group (position t = 0..n-1; group g owns [gstart[g], gstart[g+1])).
// Phase A, per split: one pass computes the keys (SIMD, see simd::Primitives::split_key_bits),
// writes a calibration bitmap over the positions (bit = key < lo) and marks the few keys in a
// window [lo, hi] around the expected m-th key; the m-th key T is selected among those and
// their bits set (a radix-select fallback covers a miss). q_hat(alpha, g) = the k-th smallest
// calibration r of group g is read off a precomputed band of r-values around the expected
// quantile: the calibration members below the band are a popcount of (calibration bitmap AND
// "r below the band" bitmap), the rest a short walk over the band's responses sorted by r (an
// exact selection over the group is the fallback when the rank falls outside the band).
// Phase B, per split: the metrics of a test response depend on its group's q_hat only through
// which of its scores are >= q_hat. Over all splits, alpha's thresholds span [q_lo, q_hi]; at
// an alpha where none of a response's scores (nor its largest unsupported score) lies in
// [q_lo, q_hi), it contributes the same counts at every split. Responses are grouped into
// classes of equal codes (claim count, then per alpha: kept count, fully-supported bit, and
// whether the alpha is unstable for it), and laid out by class, where a second key pass gives
// the calibration bits: a class's test count is its length minus a popcount, times its
// contributions at its stable alphas; its unstable alphas are evaluated member by member from a
// compact copy of their in-band scores. Every result is an integer count or one fixed
// expression of counts, so it equals the direct evaluation bit for bit.

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
// Half-widths in standard deviations of the key window and the quantile bands (< 0: no
// window, no bands), and whether stable alphas use the class codes (false: all exact).
std::atomic<double> g_window_sigmas{8.0}, g_band_sigmas{8.0};
std::atomic<bool> g_stable_classes{true};
}  // namespace

void set_sweep_tuning(double window_sigmas, double band_sigmas, bool stable_classes) {
  g_window_sigmas = window_sigmas;
  g_band_sigmas = band_sigmas;
  g_stable_classes = stable_classes;
}

namespace {

constexpr int kBucketBits = 12;  // radix-select fallback: 4096 L1-resident counters
constexpr int64_t kBuckets = int64_t(1) << kBucketBits;
constexpr uint64_t kU64Max = std::numeric_limits<uint64_t>::max();
// Sample size for the quantile bands' ends.
constexpr int64_t kBandSample = 65536;

inline int64_t n_words(int64_t n) { return (n + 63) / 64; }
inline bool bit_at(const uint64_t* bits, int64_t t) { return ((bits[t >> 6] >> (t & 63)) & 1u) != 0; }
inline void set_bit(uint64_t* bits, int64_t t) { bits[t >> 6] |= uint64_t(1) << (t & 63); }
// Mask of the bits of word w that fall in positions [lo, hi).
inline uint64_t range_mask(int64_t w, int64_t lo, int64_t hi) {
  const int64_t first = w * 64;
  uint64_t m = kU64Max;
  if (lo > first) m &= kU64Max << (lo - first);
  if (hi < first + 64) m &= (hi - first) <= 0 ? 0 : (kU64Max >> (64 - (hi - first)));
  return m;
}
// SWAR popcount: the generic x86-64 build has no POPCNT instruction, and the builtin would be
// a library call.
inline int64_t popcount64(uint64_t x) {
  x = x - ((x >> 1) & 0x5555555555555555ULL);
  x = (x & 0x3333333333333333ULL) + ((x >> 2) & 0x3333333333333333ULL);
  x = (x + (x >> 4)) & 0x0F0F0F0F0F0F0F0FULL;
  return static_cast<int64_t>((x * 0x0101010101010101ULL) >> 56);
}
// Number of set bits of (a AND b) (b == nullptr: of a) over positions [lo, hi).
inline int64_t popcount_range(const uint64_t* a, const uint64_t* b, int64_t lo, int64_t hi) {
  if (hi <= lo) return 0;
  const int64_t w0 = lo >> 6, w1 = (hi - 1) >> 6;
  int64_t total = 0;
  for (int64_t w = w0; w <= w1; ++w) {
    uint64_t x = a[w] & (b != nullptr ? b[w] : kU64Max);
    if (w == w0 || w == w1) x &= range_mask(w, lo, hi);
    total += popcount64(x);
  }
  return total;
}

// Positions by group (stable): perm[t] = the response at position t (identity for one group),
// group_at[t] its group; group g owns positions [gstart[g], gstart[g+1]).
struct GroupLayout {
  std::vector<int64_t> perm, gstart;
  std::vector<int32_t> group_at;
  bool identity = true;

  GroupLayout(const int64_t* groups, int64_t n, int64_t n_groups)
      : gstart(static_cast<size_t>(n_groups + 1), 0), group_at(static_cast<size_t>(n), 0) {
    if (groups == nullptr) {
      gstart[1] = n;
      return;
    }
    identity = false;
    for (int64_t j = 0; j < n; ++j) ++gstart[groups[j] + 1];
    for (int64_t g = 0; g < n_groups; ++g) gstart[g + 1] += gstart[g];
    std::vector<int64_t> next(gstart.begin(), gstart.end() - 1);
    perm.resize(static_cast<size_t>(n));
    for (int64_t j = 0; j < n; ++j) perm[next[groups[j]]++] = j;
    for (int64_t g = 0; g < n_groups; ++g)
      std::fill(group_at.begin() + gstart[g], group_at.begin() + gstart[g + 1], static_cast<int32_t>(g));
  }
  int64_t response(int64_t t) const { return identity ? t : perm[t]; }
};

struct KeyAndPosition {
  uint64_t key;
  int64_t t;
};

// A split's calibration set: the m responses with the smallest keys, as a bitmap over positions.
// Window: the expected m-th key of n uniform keys, +- `sigmas` (default 8) standard deviations
// of the count.
class CalibrationSelector {
 public:
  CalibrationSelector(const GroupLayout& layout, int64_t n, int64_t m, double sigmas)
      : layout_(layout), n_(n), m_(m), use_window_(sigmas >= 0.0) {
    const double f = double(m) / double(n);
    const double half_width = sigmas * std::sqrt(double(n) * f * (1.0 - f)) + 16.0;
    lo_ = key_at((double(m) - half_width) / double(n));
    hi_ = key_at((double(m) + half_width) / double(n));
  }

  // Fills bits (n_words(n) words) and returns the threshold key T (calibration: key <= T).
  // window, window_bits and scratch are the calling thread's buffers.
  uint64_t select(uint64_t base, uint64_t* bits, std::vector<KeyAndPosition>& window,
                  std::vector<uint64_t>& window_bits, std::vector<int64_t>& scratch) const {
    if (use_window_) {
      window.clear();
      window_bits.resize(static_cast<size_t>(n_words(n_)));
      const int64_t* perm = layout_.identity ? nullptr : layout_.perm.data();
      primitives().split_key_bits(base, perm, n_, lo_, hi_ - lo_, bits, window_bits.data());
      int64_t below = 0;
      for (int64_t w = 0; w < n_words(n_); ++w) {
        below += popcount64(bits[w]);
        for (uint64_t x = window_bits[w]; x != 0; x &= x - 1) {  // rare: the window holds ~16 sigma of keys
          const int64_t t = w * 64 + __builtin_ctzll(x);
          window.push_back({split_key(base, layout_.response(t)), t});
        }
      }
      const int64_t need = m_ - below;  // the m-th key is the need-th smallest of the window
      if (need >= 1 && need <= static_cast<int64_t>(window.size())) {
        std::nth_element(window.begin(), window.begin() + (need - 1), window.end(),
                         [](const KeyAndPosition& x, const KeyAndPosition& y) { return x.key < y.key; });
        for (int64_t i = 0; i < need; ++i) set_bit(bits, window[i].t);
        return window[need - 1].key;
      }
    }
    const uint64_t T = radix_select(base, scratch);
    fill_bits(base, T, bits);
    return T;
  }

  // bits = (key <= T) for every position.
  void fill_bits(uint64_t base, uint64_t T, uint64_t* bits) const {
    primitives().split_key_bits(base, layout_.identity ? nullptr : layout_.perm.data(), n_, T + 1, 0, bits, nullptr);
  }

 private:
  // The key below which a share `fraction` of uniform keys falls, clamped to the key range.
  static uint64_t key_at(double fraction) {
    const double two64 = 18446744073709551616.0;
    if (!(fraction > 0.0)) return 0;  // NaN too (a NaN width from _set_sweep_tuning)
    const double x = fraction * two64;
    return x >= two64 ? kU64Max : static_cast<uint64_t>(x);
  }

  // The m-th smallest key by a radix select over the top key bits, for when the window misses
  // (astronomically rare for large n, but the result must not depend on luck).
  uint64_t radix_select(uint64_t base, std::vector<int64_t>& hist) const {
    hist.assign(static_cast<size_t>(kBuckets), 0);
    for (int64_t j = 0; j < n_; ++j) ++hist[split_key(base, j) >> (64 - kBucketBits)];
    int64_t below = 0, b = 0;
    while (below + hist[b] < m_) below += hist[b++];
    std::vector<uint64_t> bucket;
    for (int64_t j = 0; j < n_; ++j) {
      const uint64_t k = split_key(base, j);
      if (static_cast<int64_t>(k >> (64 - kBucketBits)) == b) bucket.push_back(k);
    }
    std::nth_element(bucket.begin(), bucket.begin() + (m_ - below - 1), bucket.end());
    return bucket[m_ - below - 1];
  }

  const GroupLayout& layout_;
  int64_t n_, m_;
  bool use_window_;
  uint64_t lo_ = 0, hi_ = 0;
};

// For each (alpha, group): a band [L, U] of r-values around the expected conformal quantile,
// the bitmap of positions whose r is below their group's L, and the band's positions by (r, t).
//
// Width: the group rank R of the k-th smallest of a uniform calibration subset (share f) has
// variance ~ n_g * rho (1 - rho) (1 - f) / f, rho = k / n_cal; with groups the calibration count
// itself varies, adding ~ n_g (1 - alpha)^2 (1 - f) / f. The band spans `sigmas` standard
// deviations either side (+16). Its ends are found in two steps: a strided sample of the group
// gives coarse ends (widened by the sample's rank error), one pass collects the positions
// between them, and sorting those gives the exact ends. Any ends are correct (a miss
// only costs the exact selection); narrow ones make the per-split walk short.
class QuantileBands {
 public:
  QuantileBands(const std::vector<double>& r_at, const GroupLayout& layout, const double* alphas, int64_t A,
                int64_t G, double calib_fraction, double sigmas)
      : A_(A), G_(G), enabled_(sigmas >= 0.0), below_(static_cast<size_t>(A)), band_(static_cast<size_t>(A * G)) {
    if (!enabled_) return;
    const int64_t n = static_cast<int64_t>(r_at.size());
    const double f = calib_fraction;
    const double minus_inf = -std::numeric_limits<double>::infinity(), inf = std::numeric_limits<double>::infinity();
    // Per (alpha, group): exact target ranks [lo_rank, hi_rank] in the group, coarse value ends.
    std::vector<int64_t> lo_rank(static_cast<size_t>(A * G)), hi_rank(static_cast<size_t>(A * G));
    std::vector<double> coarse_lo(static_cast<size_t>(A * G), minus_inf), coarse_hi(static_cast<size_t>(A * G), inf);
    std::vector<double> sample;
    for (int64_t g = 0; g < G; ++g) {
      const int64_t b = layout.gstart[g], e = layout.gstart[g + 1], ng = e - b;
      const int64_t stride = std::max<int64_t>(1, ng / kBandSample);
      sample.clear();
      for (int64_t t = b; t < e; t += stride) sample.push_back(r_at[t]);
      std::sort(sample.begin(), sample.end());
      const int64_t ns = static_cast<int64_t>(sample.size());
      for (int64_t ai = 0; ai < A; ++ai) {
        const int64_t k = ai * G + g;
        const double ncal = f * double(ng), alpha = alphas[ai];
        const double rho = std::min(1.0, std::ceil((ncal + 1.0) * (1.0 - alpha)) / std::max(ncal, 1.0));
        const double centre = rho * double(ng);
        const double var = double(ng) * (1.0 - f) / f * (rho * (1.0 - rho) + (G > 1 ? (1.0 - alpha) * (1.0 - alpha) : 0.0));
        const double half_width = sigmas * std::sqrt(var) + 16.0;
        lo_rank[k] = static_cast<int64_t>(std::floor(centre - half_width));
        hi_rank[k] = static_cast<int64_t>(std::ceil(centre + half_width));
        if (ns == 0) continue;
        // The sample's own rank error, in group positions: ng * sqrt(rho (1 - rho) / ns).
        const double slack = stride > 1 ? sigmas * double(ng) * std::sqrt(std::max(rho * (1.0 - rho), 1.0 / double(ns)) / double(ns)) + double(stride) : 0.0;
        const double s_lo = std::floor((double(lo_rank[k]) - slack) / double(stride));
        const double s_hi = std::ceil((double(hi_rank[k]) + slack) / double(stride));
        if (s_lo > 0.0) coarse_lo[k] = sample[std::min(static_cast<int64_t>(s_lo), ns - 1)];
        if (s_hi < double(ns - 1)) coarse_hi[k] = sample[std::max(static_cast<int64_t>(s_hi), int64_t(0))];
      }
    }
    // One pass for all alphas, in parallel over blocks of words: "below the coarse low end" bits
    // and, per thread, the positions between the coarse ends (order irrelevant: sorted below).
    for (int64_t ai = 0; ai < A; ++ai) below_[ai].assign(static_cast<size_t>(n_words(n)), 0);
    const std::vector<int32_t>& group_at = layout.group_at;
    // Per-worker lists of the in-band positions, merged and sorted by (r, position) below, so
    // the split of the words between workers does not matter.
    constexpr int64_t kWordBlock = 256;
    const int64_t words = n_words(n);
    const int workers = workers_for(n * A, int64_t(1) << 16, (words + kWordBlock - 1) / kWordBlock);
    std::vector<std::vector<std::vector<int64_t>>> found(static_cast<size_t>(workers));
    parallel_for(words, kWordBlock, workers, [&](int64_t w0, int64_t w1, int worker) {
      auto& mine = found[static_cast<size_t>(worker)];
      if (mine.empty()) mine.assign(static_cast<size_t>(A * G), {});
      for (int64_t w = w0; w < w1; ++w) {
        const int64_t t0 = w * 64, t_end = std::min<int64_t>(64, n - t0);
        for (int64_t ai = 0; ai < A; ++ai) {
          const double* lo = coarse_lo.data() + ai * G;
          const double* up = coarse_hi.data() + ai * G;
          uint64_t word = 0;
          for (int64_t i = 0; i < t_end; ++i) {
            const int64_t t = t0 + i, g = group_at[t];
            const double x = r_at[t];
            word |= uint64_t(x < lo[g] ? 1u : 0u) << i;
            if ((x >= lo[g]) & (x <= up[g])) mine[ai * G + g].push_back(t);
          }
          below_[ai][w] = word;
        }
      }
    });
    // Exact ends inside the coarse band; its members below the exact low end join the bitmap.
    std::vector<std::pair<double, int64_t>> members;
    for (int64_t ai = 0; ai < A; ++ai)
      for (int64_t g = 0; g < G; ++g) {
        const int64_t k = ai * G + g;
        members.clear();
        for (auto& mine : found)
          if (!mine.empty())
            for (int64_t t : mine[k]) members.push_back({r_at[t], t});
        std::sort(members.begin(), members.end());  // by (r, position)
        const int64_t n_below = popcount_range(below_[ai].data(), nullptr, layout.gstart[g], layout.gstart[g + 1]);
        const int64_t nm = static_cast<int64_t>(members.size());
        int64_t first = 0, last = nm;  // the band: members[first, last)
        const int64_t lo_at = lo_rank[k] - n_below, hi_at = hi_rank[k] - n_below;
        if (lo_at > 0 && lo_at < nm) {
          first = lo_at;
          while (first > 0 && members[first - 1].first == members[first].first) --first;  // ties stay together
        }
        if (hi_at >= 0 && hi_at < nm - 1) {
          last = hi_at + 1;
          while (last < nm && members[last].first == members[last - 1].first) ++last;
        }
        for (int64_t i = 0; i < first; ++i) set_bit(below_[ai].data(), members[i].second);
        band_[k].reserve(static_cast<size_t>(last - first));
        for (int64_t i = first; i < last; ++i) band_[k].push_back(members[i].second);
      }
  }

  // The k-th smallest r among the calibration positions of group g (k <= their count), or
  // false when it lies outside the band (the caller selects exactly then).
  bool quantile(const uint64_t* calib, const std::vector<double>& r_at, int64_t b, int64_t e, int64_t ai, int64_t g,
                int64_t k, double* q) const {
    if (!enabled_) return false;
    const int64_t below = popcount_range(calib, below_[ai].data(), b, e);
    int64_t need = k - below;
    if (need < 1) return false;
    for (int64_t t : band_[ai * G_ + g]) {
      need -= bit_at(calib, t) ? 1 : 0;
      if (need == 0) {
        *q = r_at[t];
        return true;
      }
    }
    return false;
  }

 private:
  int64_t A_, G_;
  bool enabled_;
  std::vector<std::vector<uint64_t>> below_;  // per alpha, over positions
  std::vector<std::vector<int64_t>> band_;    // per (alpha, group), by (r, position)
};

// Contributions of a response at one alpha: code = kept << 1 | fully_supported (kept < 2^29);
// kUnstableAlpha: evaluated exactly per split; kExactAll: from all its claims, not just the
// in-band ones (then kept = 0 and fully_supported = 1 stand for "no claim, no unsupported").
constexpr uint32_t kUnstableAlpha = uint32_t(1) << 31, kExactAll = uint32_t(1) << 30;
constexpr uint32_t kCodeBits = kExactAll - 1;
inline uint32_t contribution_code(int64_t kept, bool fully_supported) {
  return (static_cast<uint32_t>(kept) << 1) | (fully_supported ? 1u : 0u);
}

}  // namespace

void conformal_sweep(const double* scores, const bool* labels_ok, int64_t n_claims, const int64_t* offsets,
                     int64_t n, const double* alphas, int64_t n_alphas, int64_t n_splits, double calib_fraction,
                     uint64_t seed, double a, double sentinel, const int64_t* groups, int64_t n_groups,
                     const SweepOutput& out) {
  check_offsets_parallel(offsets, n, n_claims, "offsets");
  check_level_a(a);
  for (int64_t j = 0; j < n_alphas; ++j) check_alpha(alphas[j], "alphas");
  if (n_splits < 0) fail("n_splits", "must be >= 0, got " + std::to_string(n_splits));
  const int64_t m = calibration_size(n, calib_fraction);
  const int64_t n_test = n - m;
  if (groups == nullptr) n_groups = 1;
  if (n_groups < 1) fail("groups", "n_groups must be >= 1");
  if (groups != nullptr)
    for (int64_t j = 0; j < n; ++j)
      if (groups[j] < 0 || groups[j] >= n_groups)
        fail("groups", "group id " + std::to_string(groups[j]) + " at index " + std::to_string(j) +
                           " out of range [0, " + std::to_string(n_groups) + ")");
  // r_scores checks the scores for NaN and the sentinel.
  std::vector<double> r(static_cast<size_t>(n));
  r_scores(scores, labels_ok, n_claims, offsets, n, a, sentinel, r.data());
  if (n_splits == 0) return;
  const int64_t A = n_alphas, G = n_groups, W = n_words(n);
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  // Every split makes a few passes over n keys: parallel over splits from ~64k keys on.
  const int split_workers = workers_for(static_cast<int64_t>(std::min<uint64_t>(bytes_for({n_splits, n}, 1),
                                                                                uint64_t(1) << 62)),
                                        int64_t(1) << 16, n_splits);

  // ---- per-position data used by every split (position t holds response layout.response(t))
  const GroupLayout layout(groups, n, G);
  std::vector<double> r_at(static_cast<size_t>(n));
  for (int64_t t = 0; t < n; ++t) r_at[t] = r[layout.response(t)];
  // umax: largest unsupported score, has_bad: whether there is one (-inf cannot mean "none":
  // a q_hat of -inf keeps every claim).
  std::vector<double> umax(static_cast<size_t>(n));
  std::unique_ptr<bool[]> has_bad(new bool[static_cast<size_t>(n)]);
  {
    const auto& prims = primitives();
    constexpr int64_t kChunk = 4096;
    parallel_for(n, kChunk, workers_for(n_claims + n, int64_t(1) << 16, (n + kChunk - 1) / kChunk),
                 [&](int64_t i0, int64_t i1, int) {
                   prims.unsupported_max(scores, labels_ok, offsets + i0, i1 - i0, -inf, umax.data() + i0,
                                         has_bad.get() + i0);
                 });
  }
  // Distinct claim counts, ascending, and each response's index into them (exact retention).
  std::vector<int64_t> pvals;
  std::vector<int32_t> pidx(static_cast<size_t>(n));
  {
    int64_t p_max = 0;
    for (int64_t j = 0; j < n; ++j) p_max = std::max(p_max, offsets[j + 1] - offsets[j]);
    if (p_max <= 4 * n + 1024) {  // a table over 0..p_max instead of a sort
      std::vector<int32_t> index_of(static_cast<size_t>(p_max + 1), -1);
      for (int64_t j = 0; j < n; ++j) index_of[offsets[j + 1] - offsets[j]] = 0;
      for (int64_t p = 0; p <= p_max; ++p)
        if (index_of[p] == 0) {
          index_of[p] = static_cast<int32_t>(pvals.size());
          pvals.push_back(p);
        }
      for (int64_t j = 0; j < n; ++j) pidx[j] = index_of[offsets[j + 1] - offsets[j]];
    } else {
      pvals.resize(static_cast<size_t>(n));
      for (int64_t j = 0; j < n; ++j) pvals[j] = offsets[j + 1] - offsets[j];
      std::sort(pvals.begin(), pvals.end());
      pvals.erase(std::unique(pvals.begin(), pvals.end()), pvals.end());
      for (int64_t j = 0; j < n; ++j)
        pidx[j] = static_cast<int32_t>(std::lower_bound(pvals.begin(), pvals.end(), offsets[j + 1] - offsets[j]) -
                                       pvals.begin());
    }
  }
  const int64_t n_p = static_cast<int64_t>(pvals.size());

  // ---- phase A: calibration bitmap and q_hat of every split
  std::vector<uint64_t> T(static_cast<size_t>(n_splits));
  const CalibrationSelector selector(layout, n, m, g_window_sigmas.load());
  const QuantileBands bands(r_at, layout, alphas, A, G, calib_fraction, g_band_sigmas.load());
  struct PhaseAScratch {
    std::vector<KeyAndPosition> window;
    std::vector<int64_t> scratch;
    std::vector<double> members;
    std::vector<uint64_t> own_bits, window_bits;
  };
  std::vector<PhaseAScratch> phase_a(static_cast<size_t>(split_workers));
  parallel_for(n_splits, 1, split_workers, [&](int64_t s, int64_t, int worker) {
    {
      PhaseAScratch& ps = phase_a[static_cast<size_t>(worker)];
      std::vector<KeyAndPosition>& window = ps.window;
      std::vector<int64_t>& scratch = ps.scratch;
      std::vector<double>& members = ps.members;
      std::vector<uint64_t>& window_bits = ps.window_bits;
      if (ps.own_bits.empty()) ps.own_bits.resize(static_cast<size_t>(W));
      uint64_t* bits = ps.own_bits.data();
      T[s] = selector.select(split_base(seed, s), bits, window, window_bits, scratch);
      for (int64_t g = 0; g < G; ++g) {
        const int64_t b = layout.gstart[g], e = layout.gstart[g + 1];
        const int64_t ng = popcount_range(bits, nullptr, b, e);
        out.n_calib[s * G + g] = ng;
        bool gathered = false;
        for (int64_t ai = 0; ai < A; ++ai) {
          double& q = out.q_hat[(s * A + ai) * G + g];
          const int64_t k = conformal_rank(ng, alphas[ai]);
          if (k > ng) {
            q = inf;
            continue;
          }
          if (bands.quantile(bits, r_at, b, e, ai, g, k, &q)) continue;
          if (!gathered) {  // exact selection over the group's calibration r-scores
            members.clear();
            for (int64_t t = b; t < e; ++t)
              if (bit_at(bits, t)) members.push_back(r_at[t]);
            gathered = true;
          }
          std::nth_element(members.begin(), members.begin() + (k - 1), members.end());
          q = members[k - 1];
        }
      }
    }
  });
  std::vector<PhaseAScratch>().swap(phase_a);

  // ---- the band of thresholds per (alpha, group), and each position's class
  std::vector<double> q_lo(static_cast<size_t>(A * G), inf), q_hi(static_cast<size_t>(A * G), -inf);
  for (int64_t s = 0; s < n_splits; ++s)
    for (int64_t k = 0; k < A * G; ++k) {
      q_lo[k] = std::min(q_lo[k], out.q_hat[s * A * G + k]);
      q_hi[k] = std::max(q_hi[k], out.q_hat[s * A * G + k]);
    }
  const std::vector<int32_t>& group_at = layout.group_at;
  // codes[t * A + ai]: the position's code at alpha ai = (kept << 1 | fully_supported) over the
  // whole band, kept counting the scores >= q_hi. kUnstableAlpha is set when one of its scores
  // (or its largest unsupported score) lies in [q_lo, q_hi): those (position, alpha) pairs are
  // evaluated exactly per split, from the in-band scores only. hashes: of (claim-count index,
  // codes), for the class table.
  const bool use_classes = g_stable_classes.load();
  std::vector<double> band_lo(static_cast<size_t>(G * A)), band_hi(static_cast<size_t>(G * A));  // [g][ai]
  for (int64_t g = 0; g < G; ++g)
    for (int64_t ai = 0; ai < A; ++ai) {
      band_lo[g * A + ai] = q_lo[ai * G + g];
      band_hi[g * A + ai] = q_hi[ai * G + g];
    }
  constexpr int64_t kFastAlphas = 8;
  std::vector<uint32_t> codes(static_cast<size_t>(n * A));
  std::vector<uint64_t> hashes(static_cast<size_t>(n));
  parallel_for(n, 4096, workers_for(n_claims * A + n, int64_t(1) << 16, (n + 4095) / 4096), [&](int64_t t0, int64_t t1, int) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t j = layout.response(t), g = group_at[t];
      const int64_t p = offsets[j + 1] - offsets[j];
      const double* x = scores + offsets[j];
      // A kept count that would not fit a code, or the testing hook: every alpha exact.
      const bool always_exact = !use_classes || p >= (int64_t(1) << 29);
      uint64_t h = splitmix64_mix(uint64_t(pidx[j]) + kSplitGamma);
      // Claims outer, alphas inner: each score is loaded once; up to kFastAlphas counters live
      // on the stack.
      int64_t kept[kFastAlphas];
      bool in_band[kFastAlphas];
      const double* lo = band_lo.data() + g * A;
      const double* hi = band_hi.data() + g * A;
      for (int64_t a0 = 0; a0 < A; a0 += kFastAlphas) {
        const int64_t na = std::min<int64_t>(kFastAlphas, A - a0);
        for (int64_t i = 0; i < na; ++i) {
          kept[i] = 0;
          in_band[i] = always_exact;
        }
        for (int64_t c = 0; c < p; ++c) {
          const double xc = x[c];
          for (int64_t i = 0; i < na; ++i) {
            kept[i] += xc >= hi[a0 + i] ? 1 : 0;
            in_band[i] |= (xc >= lo[a0 + i]) & (xc < hi[a0 + i]);
          }
        }
        for (int64_t i = 0; i < na; ++i) {
          const int64_t ai = a0 + i;
          bool fs = true;
          if (has_bad[j]) {
            fs = !(umax[j] >= hi[ai]);
            in_band[i] |= (umax[j] >= lo[ai]) & (umax[j] < hi[ai]);
          }
          const uint32_t code = always_exact ? (kUnstableAlpha | kExactAll | contribution_code(0, true))
                                             : contribution_code(kept[i], fs) | (in_band[i] ? kUnstableAlpha : 0u);
          codes[t * A + ai] = code;
          h = splitmix64_mix(h ^ (uint64_t(code) + kSplitGamma));
        }
      }
      hashes[t] = h;
    }
  });
  // Classes of positions with equal (claim-count index, codes): an open-addressing table keyed
  // by the tuple's hash, class ids in order of first appearance.
  std::vector<int32_t> cls(static_cast<size_t>(n));
  std::vector<int64_t> class_rep;  // a position of each class
  {
    auto same = [&](int64_t x, int64_t y) {
      return pidx[layout.response(x)] == pidx[layout.response(y)] &&
             std::equal(codes.begin() + x * A, codes.begin() + (x + 1) * A, codes.begin() + y * A);
    };
    size_t cap = 1024;
    std::vector<int64_t> table(cap, -1);  // class id or -1
    std::vector<uint64_t> table_hash(cap);
    for (int64_t t = 0; t < n; ++t) {
      const uint64_t h = hashes[t];
      size_t slot = h & (cap - 1);
      while (table[slot] >= 0 && !(table_hash[slot] == h && same(class_rep[table[slot]], t))) slot = (slot + 1) & (cap - 1);
      if (table[slot] >= 0) {
        cls[t] = static_cast<int32_t>(table[slot]);
        continue;
      }
      cls[t] = static_cast<int32_t>(class_rep.size());
      table[slot] = cls[t];
      table_hash[slot] = h;
      class_rep.push_back(t);
      if (2 * class_rep.size() > cap) {  // grow: keep the load under 1/2
        cap *= 2;
        std::vector<int64_t> grown(cap, -1);
        std::vector<uint64_t> grown_hash(cap);
        for (size_t sl = 0; sl < table.size(); ++sl)
          if (table[sl] >= 0) {
            size_t d = table_hash[sl] & (cap - 1);
            while (grown[d] >= 0) d = (d + 1) & (cap - 1);
            grown[d] = table[sl];
            grown_hash[d] = table_hash[sl];
          }
        table.swap(grown);
        table_hash.swap(grown_hash);
      }
    }
  }
  const int64_t n_classes = static_cast<int64_t>(class_rep.size());
  std::vector<int32_t> class_pidx(static_cast<size_t>(n_classes));
  std::vector<uint32_t> class_code(static_cast<size_t>(n_classes * A));
  for (int64_t c = 0; c < n_classes; ++c) {
    class_pidx[c] = pidx[layout.response(class_rep[c])];
    std::copy(codes.begin() + class_rep[c] * A, codes.begin() + (class_rep[c] + 1) * A, class_code.begin() + c * A);
  }
  std::vector<uint32_t>().swap(codes);  // per-response codes and hashes are done with
  std::vector<uint64_t>().swap(hashes);
  // Responses in class order (stable counting sort): a split's test count per class is the
  // length of the class's range minus a popcount of its calibration bits, computed in this order.
  std::vector<int64_t> cstart(static_cast<size_t>(n_classes + 1), 0), by_class(static_cast<size_t>(n));
  std::vector<int64_t> slot_position(static_cast<size_t>(n));
  for (int64_t t = 0; t < n; ++t) ++cstart[cls[t] + 1];
  for (int64_t c = 0; c < n_classes; ++c) cstart[c + 1] += cstart[c];
  {
    std::vector<int64_t> next(cstart.begin(), cstart.end() - 1);
    for (int64_t t = 0; t < n; ++t) {
      const int64_t slot = next[cls[t]]++;
      by_class[slot] = layout.response(t);
      slot_position[slot] = t;
    }
  }
  // Exact blocks: one per (class, flagged alpha), holding per member its in-band scores and its
  // largest unsupported score when that is in the band (NaN otherwise: the class's bit holds).
  struct ExactBlock {
    int64_t cls, ai, first_item;
  };
  std::vector<ExactBlock> blocks;
  std::vector<int64_t> item_begin{0};  // CSR of in-band scores per item (= member of a block)
  std::vector<double> item_umax, inband;
  std::vector<int32_t> item_group;
  for (int64_t c = 0; c < n_classes; ++c)
    for (int64_t ai = 0; ai < A; ++ai) {
      if (!(class_code[c * A + ai] & kUnstableAlpha)) continue;
      blocks.push_back({c, ai, static_cast<int64_t>(item_umax.size())});
      for (int64_t slot = cstart[c]; slot < cstart[c + 1]; ++slot) {
        const int64_t j = by_class[slot], g = group_at[slot_position[slot]];
        const double lo = q_lo[ai * G + g], hi = q_hi[ai * G + g];
        const bool exact_all = (class_code[c * A + ai] & kExactAll) != 0;
        for (int64_t x = offsets[j]; x < offsets[j + 1]; ++x)
          if (exact_all || ((scores[x] >= lo) & (scores[x] < hi))) inband.push_back(scores[x]);
        item_begin.push_back(static_cast<int64_t>(inband.size()));
        const bool u_in_band = has_bad[j] && (exact_all || ((umax[j] >= lo) & (umax[j] < hi)));
        item_umax.push_back(u_in_band ? umax[j] : nan);
        item_group.push_back(static_cast<int32_t>(g));
      }
    }
  blocks.push_back({n_classes, 0, static_cast<int64_t>(item_umax.size())});  // sentinel
  std::vector<int32_t>().swap(cls);
  std::vector<int64_t>().swap(slot_position);

  // ---- phase B: metrics of every split
  struct PhaseBScratch {
    std::vector<uint64_t> bits;
    std::vector<int64_t> K, n_of_p, test_of, c_fs, c_ne, c_fsne;
  };
  std::vector<PhaseBScratch> phase_b(static_cast<size_t>(split_workers));
  const auto& prims = primitives();
  parallel_for(n_splits, 1, split_workers, [&](int64_t s, int64_t, int worker) {
    PhaseBScratch& ps = phase_b[static_cast<size_t>(worker)];
    if (ps.bits.empty()) {
      ps.bits.resize(static_cast<size_t>(W));
      ps.K.resize(static_cast<size_t>(n_p * A));
      ps.n_of_p.resize(static_cast<size_t>(n_p));
      ps.test_of.resize(static_cast<size_t>(n_classes));
      ps.c_fs.resize(static_cast<size_t>(A));
      ps.c_ne.resize(static_cast<size_t>(A));
      ps.c_fsne.resize(static_cast<size_t>(A));
    }
    std::vector<uint64_t>& bits = ps.bits;
    std::vector<int64_t>&K = ps.K, &n_of_p = ps.n_of_p, &test_of = ps.test_of;
    std::vector<int64_t>&c_fs = ps.c_fs, &c_ne = ps.c_ne, &c_fsne = ps.c_fsne;
    {
      // calibration bits in class order: key <= T
      prims.split_key_bits(split_base(seed, s), by_class.data(), n, T[s] + 1, 0, bits.data(), nullptr);
      std::fill(K.begin(), K.end(), 0);
      std::fill(n_of_p.begin(), n_of_p.end(), 0);
      std::fill(c_fs.begin(), c_fs.end(), 0);
      std::fill(c_ne.begin(), c_ne.end(), 0);
      std::fill(c_fsne.begin(), c_fsne.end(), 0);
      for (int64_t c = 0; c < n_classes; ++c) {
        const int64_t h = (cstart[c + 1] - cstart[c]) - popcount_range(bits.data(), nullptr, cstart[c], cstart[c + 1]);
        test_of[c] = h;
        if (h == 0) continue;
        const int64_t pi = class_pidx[c];
        n_of_p[pi] += h;
        for (int64_t ai = 0; ai < A; ++ai) {
          const uint32_t code = class_code[c * A + ai];
          if (code & kUnstableAlpha) continue;  // its block below
          const int64_t kept = code >> 1;
          const bool fs = (code & 1u) != 0, ne = kept > 0;
          K[pi * A + ai] += h * kept;
          c_fs[ai] += fs ? h : 0;
          c_ne[ai] += ne ? h : 0;
          c_fsne[ai] += (fs && ne) ? h : 0;
        }
      }
      const double* qs = out.q_hat + s * A * G;
      for (size_t bi = 0; bi + 1 < blocks.size(); ++bi) {
        const ExactBlock& blk = blocks[bi];
        if (test_of[blk.cls] == 0) continue;
        const uint32_t code = class_code[blk.cls * A + blk.ai] & kCodeBits;
        const int64_t kept_always = code >> 1;
        const int64_t fs_if_no_umax = code & 1u;
        // Register accumulators over the block's test members; branch-free on membership.
        int64_t kept_sum = 0, fs_sum = 0, ne_sum = 0, fsne_sum = 0;
        const int64_t first_slot = cstart[blk.cls];
        for (int64_t i = blk.first_item; i < blocks[bi + 1].first_item; ++i) {
          const int64_t slot = first_slot + (i - blk.first_item);
          const int64_t is_test = bit_at(bits.data(), slot) ? 0 : 1;
          const double qa = qs[blk.ai * G + item_group[i]];
          int64_t kept = kept_always;
          for (int64_t x = item_begin[i]; x < item_begin[i + 1]; ++x) kept += inband[x] >= qa ? 1 : 0;
          const double u = item_umax[i];
          const int64_t fs = u != u ? fs_if_no_umax : (u >= qa ? 0 : 1);
          const int64_t ne = kept > 0 ? 1 : 0;
          kept_sum += is_test * kept;
          fs_sum += is_test * fs;
          ne_sum += is_test * ne;
          fsne_sum += is_test * (fs & ne);
        }
        K[class_pidx[blk.cls] * A + blk.ai] += kept_sum;
        c_fs[blk.ai] += fs_sum;
        c_ne[blk.ai] += ne_sum;
        c_fsne[blk.ai] += fsne_sum;
      }
      const int64_t n0 = pvals[0] == 0 ? n_of_p[0] : 0;
      for (int64_t ai = 0; ai < A; ++ai) {
        const int64_t o = s * A + ai;
        double acc = 0.0;
        for (int64_t pi = 0; pi < n_p; ++pi)
          if (pvals[pi] > 0) acc += double(K[pi * A + ai]) / double(pvals[pi]);
        out.retention[o] = (acc + double(n0)) / double(n_test);
        out.fully_supported[o] = double(c_fs[ai]) / double(n_test);
        out.non_empty[o] = double(c_ne[ai]) / double(n_test);
        out.supported_given_non_empty[o] = c_ne[ai] > 0 ? double(c_fsne[ai]) / double(c_ne[ai]) : nan;
      }
    }
  });

}

}  // namespace rrag
