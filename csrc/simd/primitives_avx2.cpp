// AVX2 + FMA, 8 lanes. dot_tile: 4 x 3 micro-tile (12 accumulators + 3 B vectors + 1 A vector fit
// the 16 ymm registers without spilling); packed GEMM: 6 x 16 (12 accumulators + 2 + 1).
#include <immintrin.h>

#include "simd/primitives_impl.hpp"

namespace rrag::simd {
namespace {
struct Avx2Traits {
  using V = __m256;
  static constexpr int W = 8, MR = 4, NR = 3;
  static constexpr int GM = 6, GV = 2;  // packed GEMM micro-kernel: GM x (GV * W)
  static constexpr bool kTileReduce = false;
  static V zero() { return _mm256_setzero_ps(); }
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static V load_tail(const float* p, int n) {
    alignas(32) static const int32_t ramp[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_load_si256((const __m256i*)ramp));
    return _mm256_maskload_ps(p, mask);
  }
  static V broadcast(float x) { return _mm256_set1_ps(x); }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static float reduce(V v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
};
}  // namespace

const Primitives& primitives_avx2() {
  static const Primitives p = impl::make_primitives<Avx2Traits>("avx2");
  return p;
}
}  // namespace rrag::simd
