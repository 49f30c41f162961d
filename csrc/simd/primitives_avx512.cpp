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
  static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static float reduce(V v) {
    __m256 h = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
};
}  // namespace

const Primitives& primitives_avx512() {
  static const Primitives p = impl::make_primitives<Avx512Traits>("avx512");
  return p;
}
}  // namespace rrag::simd
