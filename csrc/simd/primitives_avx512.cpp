// AVX-512F, 16 lanes. dot_tile: 4 x 4 micro-tile (16 accumulators + 4 B vectors + 1 A vector);
// packed GEMM: 12 x 32 (24 accumulators + 2 B vectors + 1 broadcast, of 32 zmm registers).
#include <immintrin.h>

#include "simd/primitives_impl.hpp"

namespace rrag::simd {
namespace {
struct Avx512Traits {
  using V = __m512;
  static constexpr int W = 16, MR = 4, NR = 4;
  static constexpr int GM = 12, GV = 2;  // packed GEMM micro-kernel: GM x (GV * W)
  static V zero() { return _mm512_setzero_ps(); }
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static V load_tail(const float* p, int n) {
    return _mm512_maskz_loadu_ps(__mmask16((1u << n) - 1u), p);
  }
  static V broadcast(float x) { return _mm512_set1_ps(x); }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static float reduce(V v) {
    __m256 h = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  // The 16 horizontal sums of a 4 x 4 dot_tile in 15 adds instead of 16 x 4: each level
  // adds the same lane pairs as reduce() (l + l+8, then + l+4, then + l+2, then + l+1),
  // so every sum is bitwise what reduce() gives. out[4 * j + i] = sum of acc[i][j].
  static constexpr bool kTileReduce = true;
  static void reduce_tile(const V acc[4][4], float* out) {
    V x[8], y[4];
    for (int p = 0; p < 8; ++p) {  // 256-bit halves: lanes l + l+8
      const V a = acc[(2 * p) / 4][(2 * p) % 4], b = acc[(2 * p + 1) / 4][(2 * p + 1) % 4];
      x[p] = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(1, 0, 1, 0)),
                           _mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(3, 2, 3, 2)));
    }
    for (int q = 0; q < 4; ++q)  // 128-bit halves: + l+4; y[q] lane k holds acc r = 4q + k
      y[q] = _mm512_add_ps(_mm512_shuffle_f32x4(x[2 * q], x[2 * q + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                           _mm512_shuffle_f32x4(x[2 * q], x[2 * q + 1], _MM_SHUFFLE(3, 1, 3, 1)));
    const V u0 = _mm512_add_ps(_mm512_shuffle_ps(y[0], y[1], _MM_SHUFFLE(1, 0, 1, 0)),
                               _mm512_shuffle_ps(y[0], y[1], _MM_SHUFFLE(3, 2, 3, 2)));
    const V u1 = _mm512_add_ps(_mm512_shuffle_ps(y[2], y[3], _MM_SHUFFLE(1, 0, 1, 0)),
                               _mm512_shuffle_ps(y[2], y[3], _MM_SHUFFLE(3, 2, 3, 2)));
    const V v = _mm512_add_ps(_mm512_shuffle_ps(u0, u1, _MM_SHUFFLE(2, 0, 2, 0)),
                              _mm512_shuffle_ps(u0, u1, _MM_SHUFFLE(3, 1, 3, 1)));
    // v lane 4k + e holds acc r = 4e + k, i.e. acc[i = e][j = k]: column-major.
    _mm512_store_ps(out, v);
  }
};
}  // namespace

const Primitives& primitives_avx512() {
  static const Primitives p = impl::make_primitives<Avx512Traits>("avx512");
  return p;
}
}  // namespace rrag::simd
