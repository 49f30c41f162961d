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
  // 64-bit multiply mod 2^64 from three 32x32 -> 64 products (AVX2 has no vpmullq):
  // a * b = a_lo b_lo + ((a_lo b_hi + a_hi b_lo) << 32). b_hi is b >> 32, precomputed.
  static __m256i mullo64(__m256i a, __m256i b, __m256i b_hi) {
    const __m256i cross = _mm256_add_epi64(_mm256_mul_epu32(a, b_hi), _mm256_mul_epu32(_mm256_srli_epi64(a, 32), b));
    return _mm256_add_epi64(_mm256_mul_epu32(a, b), _mm256_slli_epi64(cross, 32));
  }
  // 4 keys per step; unsigned compares as signed ones on sign-flipped values. Positions of
  // the identity layout advance the multiplier input by adding 4G instead of multiplying.
  static void split_key_bits(uint64_t base, const int64_t* perm, int64_t count, uint64_t lo, uint64_t span,
                             uint64_t* below, uint64_t* window) {
    const __m256i gamma = _mm256_set1_epi64x(static_cast<long long>(kSplitGamma));
    const __m256i gamma_hi = _mm256_srli_epi64(gamma, 32);
    const __m256i mul1 = _mm256_set1_epi64x(static_cast<long long>(kSplitMul1));
    const __m256i mul1_hi = _mm256_srli_epi64(mul1, 32);
    const __m256i mul2 = _mm256_set1_epi64x(static_cast<long long>(kSplitMul2));
    const __m256i mul2_hi = _mm256_srli_epi64(mul2, 32);
    const __m256i basev = _mm256_set1_epi64x(static_cast<long long>(base));
    const __m256i sign = _mm256_set1_epi64x(static_cast<long long>(uint64_t(1) << 63));
    const __m256i lo_v = _mm256_set1_epi64x(static_cast<long long>(lo));
    const __m256i lo_s = _mm256_xor_si256(lo_v, sign);
    const __m256i span_s = _mm256_xor_si256(_mm256_set1_epi64x(static_cast<long long>(span)), sign);
    const __m256i one = _mm256_set1_epi64x(1);
    const __m256i step = _mm256_set1_epi64x(static_cast<long long>(4 * kSplitGamma));
    const int64_t full = count / 64;
    // z = base + (j + 1) G for the identity layout, lanes t .. t + 3.
    __m256i z_id = _mm256_add_epi64(basev, mullo64(_mm256_set_epi64x(4, 3, 2, 1), gamma, gamma_hi));
    for (int64_t w = 0; w < full; ++w) {
      uint64_t lower = 0, inside = 0;
      for (int q = 0; q < 16; ++q) {
        __m256i z;
        if (perm != nullptr) {
          const __m256i j = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(perm + w * 64 + q * 4));
          z = _mm256_add_epi64(basev, mullo64(_mm256_add_epi64(j, one), gamma, gamma_hi));
        } else {
          z = z_id;
          z_id = _mm256_add_epi64(z_id, step);
        }
        z = mullo64(_mm256_xor_si256(z, _mm256_srli_epi64(z, 30)), mul1, mul1_hi);
        z = mullo64(_mm256_xor_si256(z, _mm256_srli_epi64(z, 27)), mul2, mul2_hi);
        z = _mm256_xor_si256(z, _mm256_srli_epi64(z, 31));
        const __m256i lt = _mm256_cmpgt_epi64(lo_s, _mm256_xor_si256(z, sign));  // z < lo
        const __m256i out = _mm256_cmpgt_epi64(_mm256_xor_si256(_mm256_sub_epi64(z, lo_v), sign), span_s);
        lower |= uint64_t(_mm256_movemask_pd(_mm256_castsi256_pd(lt))) << (q * 4);
        inside |= uint64_t(~_mm256_movemask_pd(_mm256_castsi256_pd(out)) & 0xF) << (q * 4);
      }
      below[w] = lower;
      if (window != nullptr) window[w] = inside;
    }
    if (full * 64 < count) {  // the last, partial word
      const int64_t t0 = full * 64;
      uint64_t lower = 0, inside = 0;
      for (int64_t b = 0; b < count - t0; ++b) {
        const int64_t j = perm != nullptr ? perm[t0 + b] : t0 + b;
        const uint64_t k = splitmix64_mix(base + (uint64_t(j) + 1) * kSplitGamma);
        lower |= uint64_t(k < lo ? 1u : 0u) << b;
        inside |= uint64_t(k - lo <= span ? 1u : 0u) << b;
      }
      below[full] = lower;
      if (window != nullptr) window[full] = inside;
    }
  }
  static int64_t band_gather(const double* x, int64_t n, double lo, double hi, double* members, int64_t* below) {
    return impl::band_gather_scalar(x, n, lo, hi, members, below);
  }
  static double r_score_short(const double* s, const bool* ok, int64_t p, double a, double sentinel) {
    return impl::r_score_short_scalar(s, ok, p, a, sentinel);
  }
};
}  // namespace

const Primitives& primitives_avx2() {
  static const Primitives p = impl::make_primitives<Avx2Traits>("avx2");
  return p;
}
}  // namespace rrag::simd
