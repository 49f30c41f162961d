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
  // 4 claims per step; ok bytes widened to 64-bit lanes; lanes past the segment's end read
  // nothing (masked load) and count as supported.
  static bool unsupported_max(const double* x, const bool* ok, const int64_t* offsets, int64_t n,
                              double sentinel, double* umax, bool* has_bad) {
    alignas(32) static const int64_t ramp[4] = {0, 1, 2, 3};
    const __m256d minus_inf = _mm256_set1_pd(-__builtin_inf());
    const __m256i zero = _mm256_setzero_si256();
    const unsigned char* okb = reinterpret_cast<const unsigned char*>(ok);
    int nan = 0;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t e = offsets[i + 1];
      __builtin_prefetch(x + offsets[i] + 512, 0, 3);  // 512 claims ahead, as in the AVX-512 version
      __builtin_prefetch(okb + offsets[i] + 512, 0, 3);
      __m256d acc = minus_inf;
      int bad = 0;
      for (int64_t c = offsets[i]; c < e; c += 4) {
        const int64_t rem = e - c;
        __m256d v;
        uint32_t labels = 0x01010101u;
        if (rem >= 4) {
          v = _mm256_loadu_pd(x + c);
          __builtin_memcpy(&labels, okb + c, 4);
        } else {
          const __m256i lanes = _mm256_cmpgt_epi64(_mm256_set1_epi64x(rem), _mm256_load_si256((const __m256i*)ramp));
          v = _mm256_maskload_pd(x + c, lanes);
          __builtin_memcpy(&labels, okb + c, size_t(rem));
        }
        const __m256i wide = _mm256_cvtepu8_epi64(_mm_cvtsi32_si128(int(labels)));
        const __m256d unsupported = _mm256_castsi256_pd(_mm256_cmpeq_epi64(wide, zero));
        acc = _mm256_max_pd(acc, _mm256_blendv_pd(minus_inf, v, unsupported));
        bad |= _mm256_movemask_pd(unsupported);
        nan |= _mm256_movemask_pd(_mm256_cmp_pd(v, v, _CMP_UNORD_Q));
      }
      __m128d m = _mm_max_pd(_mm256_castpd256_pd128(acc), _mm256_extractf128_pd(acc, 1));
      m = _mm_max_sd(m, _mm_unpackhi_pd(m, m));
      umax[i] = bad ? _mm_cvtsd_f64(m) : sentinel;
      if (has_bad != nullptr) has_bad[i] = bad != 0;
    }
    return nan != 0;
  }
  // AVX2 has no 64-bit multiply: the scalar loop (three multiplies per key) is as fast.
  static void split_key_bits(uint64_t base, const int64_t* perm, int64_t count, uint64_t lo, uint64_t span,
                             uint64_t* below, uint64_t* window) {
    impl::split_key_bits_scalar(base, perm, count, lo, span, below, window);
  }
};
}  // namespace

const Primitives& primitives_avx2() {
  static const Primitives p = impl::make_primitives<Avx2Traits>("avx2");
  return p;
}
}  // namespace rrag::simd
