// Dense float32 primitives shared by the cosine kernels, and the inner loops of the
// conformal kernels, compiled once per ISA (scalar, AVX2+FMA, AVX-512) and chosen at run time
// (see kernels/runtime.hpp).
//
// Every dot product, whichever primitive or tile position computes it, follows one fixed
// summation order for a given ISA: W-lane partial sums over d in steps of W (zero-filled
// tail), then one horizontal reduction. That is why two identical rows always get bitwise
// identical scores, and why results do not depend on the thread count.
#pragma once

#include <cstdint>

namespace rrag::simd {

// Cache lines to prefetch while dot_tile computes (claim_relevance passes the next task's
// rows): one core has only so many misses in flight, so memory must stay busy during the
// arithmetic too. dot_tile spreads the lines of the spans over its steps along k.
struct PrefetchSpans {
  const char* next[2] = {nullptr, nullptr};
  const char* end[2] = {nullptr, nullptr};
  int64_t lines() const {
    int64_t n = 0;
    for (int s = 0; s < 2; ++s) n += next[s] < end[s] ? (end[s] - next[s] + 63) / 64 : 0;
    return n;
  }
  // Up to `count` lines, in order, into L2 (see kPrefetchLocality in primitives_impl.hpp).
  void issue(int count) {
    for (int s = 0; s < 2 && count > 0; ++s)
      for (; next[s] < end[s] && count > 0; next[s] += 64, --count) __builtin_prefetch(next[s], 0, 2);
  }
};

struct Primitives {
  const char* name;
  int lanes;
  // out[r] = <x_r, x_r> for the n rows of x (row-major, d columns).
  void (*row_sqnorms)(const float* x, int64_t n, int64_t d, float* out);
  // For the n rows of x: dots[r] = <q, x_r>, sqnorms[r] = <x_r, x_r>, in one pass over x.
  void (*dot_sqnorm_one_to_many)(const float* q, const float* x, int64_t n, int64_t d,
                                 float* dots, float* sqnorms);
  // c[i * ldc + j] = <a_i, b_j> for i < m, j < n (a: m x d, b: n x d, both row-major);
  // prefetches the lines of `prefetch` (may be null) along the way.
  void (*dot_tile)(const float* a, int64_t m, const float* b, int64_t n, int64_t d, float* c,
                   int64_t ldc, PrefetchSpans* prefetch);

  // Packed GEMM for large tiles (cosine_matrix, topk_cosine): rows are packed into panels
  // of gemm_mr (left operand) or gemm_nr (right operand) rows, stored k-major and
  // zero-padded, so the micro-kernel streams both operands and broadcasts the left one.
  // Each output is one FMA chain over k = 0..d-1: the same rounding at every position.
  int gemm_mr, gemm_nr;
  // out[(p * d + k) * width + r] = x[(p * width + r) * d + k], zero past `rows`;
  // out holds ceil(rows / width) * width * d floats.
  void (*pack_panels)(const float* x, int64_t rows, int64_t d, int width, float* out);
  // c[i * ldc + j] = (<a_i, b_j> * row_scale[i]) * col_scale[j] for i < m, j < n, from
  // packed panels of a (m rows) and b; null scales mean 1 (no multiply).
  void (*gemm_packed)(const float* a_packed, int64_t m, const float* b_packed, int64_t n,
                      int64_t d, float* c, int64_t ldc, const float* row_scale,
                      const float* col_scale);

  // Conformal r-scores at a = 1. For the n segments i of x (claims offsets[i] ..
  // offsets[i+1], float64): umax[i] = the largest x[c] with ok[c] false, or `sentinel` when
  // there is none; has_bad[i] (when not null) = whether there is one. Returns whether any
  // x[c] is NaN. A maximum does not depend on the order it is taken in, so every ISA gives the
  // same values (a zero's sign may differ).
  bool (*unsupported_max)(const double* x, const bool* ok, const int64_t* offsets, int64_t n,
                          double sentinel, double* umax, bool* has_bad);

  // Conformal r-score at a < 1 of one response of 1 <= p <= kShortResponse claims (no NaN):
  // the largest score s_c with double(supported(s >= s_c)) / double(kept(s >= s_c)) < a, or
  // `sentinel` when there is none -- exactly the descending scan's result (the thresholds are
  // the scores, and the counts and the division are the same).
  double (*r_score_short)(const double* s, const bool* ok, int64_t p, double a, double sentinel);

  // Conformal sweep split keys (see kernels/conformal_sweep.hpp for the generator) of the
  // positions t < count, response j = perm ? perm[t] : t:  key = mix(base + (j + 1) * G).
  // below[w] bit b = (key of t = 64w + b) < lo; window[w] (when not null) bit b =
  // lo <= key <= lo + span. Unsigned 64-bit arithmetic; bits past `count` are 0.
  void (*split_key_bits)(uint64_t base, const int64_t* perm, int64_t count, uint64_t lo, uint64_t span,
                         uint64_t* below, uint64_t* window);

  // Conformal quantile bands, over x[0..n) (float64): adds #{x < lo} to *below, writes the x
  // with lo <= x <= hi to members (in order; members must hold n + 8 doubles) and returns how
  // many. NaN is neither. Counts and members are the same at every ISA.
  int64_t (*band_gather)(const double* x, int64_t n, double lo, double hi, double* members, int64_t* below);
};

// Longest response r_score_short takes (a sort is cheaper beyond).
constexpr int64_t kShortResponse = 16;

// The split-key generator shared by every ISA (SplitMix64's finaliser, a bijection of uint64).
constexpr uint64_t kSplitGamma = 0x9E3779B97F4A7C15ULL;
constexpr uint64_t kSplitMul1 = 0xBF58476D1CE4E5B9ULL, kSplitMul2 = 0x94D049BB133111EBULL;
inline uint64_t splitmix64_mix(uint64_t z) {
  z = (z ^ (z >> 30)) * kSplitMul1;
  z = (z ^ (z >> 27)) * kSplitMul2;
  return z ^ (z >> 31);
}

const Primitives& primitives_scalar();
const Primitives& primitives_avx2();
const Primitives& primitives_avx512();

}  // namespace rrag::simd
