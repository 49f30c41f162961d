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

struct Primitives {
  const char* name;
  int lanes;
  // out[r] = <x_r, x_r> for the n rows of x (row-major, d columns).
  void (*row_sqnorms)(const float* x, int64_t n, int64_t d, float* out);
  // For the n rows of x: dots[r] = <q, x_r>, sqnorms[r] = <x_r, x_r>, in one pass over x.
  void (*dot_sqnorm_one_to_many)(const float* q, const float* x, int64_t n, int64_t d,
                                 float* dots, float* sqnorms);
  // c[i * ldc + j] = <a_i, b_j> for i < m, j < n (a: m x d, b: n x d, both row-major).
  void (*dot_tile)(const float* a, int64_t m, const float* b, int64_t n, int64_t d, float* c,
                   int64_t ldc);

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
