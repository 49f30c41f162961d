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

  // 8 claims per step with masked loads of the scores and the label bytes; 8 responses per
  // block, whose 8 partial-maximum vectors are reduced together by a transpose tree (21
  // instructions instead of 8 separate horizontal reductions).
  static constexpr int64_t kUnsupportedPrefetch = 4096;
  static __m512d max_of_each(const __m512d a[8]) {
    __m512d t[4];
    for (int i = 0; i < 4; ++i)  // lane pairs within each 128-bit lane: [a_2i, a_2i+1] interleaved
      t[i] = _mm512_max_pd(_mm512_unpacklo_pd(a[2 * i], a[2 * i + 1]), _mm512_unpackhi_pd(a[2 * i], a[2 * i + 1]));
    __m512d v[2];
    for (int i = 0; i < 2; ++i)  // 128-bit lanes 0|2 and 1|3
      v[i] = _mm512_max_pd(_mm512_shuffle_f64x2(t[2 * i], t[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                           _mm512_shuffle_f64x2(t[2 * i], t[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    return _mm512_max_pd(_mm512_shuffle_f64x2(v[0], v[1], _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_f64x2(v[0], v[1], _MM_SHUFFLE(3, 1, 3, 1)));
  }
  static bool unsupported_max(const double* x, const bool* ok, const int64_t* offsets, int64_t n,
                              double sentinel, double* umax, bool* has_bad) {
    const __m512d minus_inf = _mm512_set1_pd(-__builtin_inf());
    const __m512d sentinel_v = _mm512_set1_pd(sentinel);
    const __m128i zero = _mm_setzero_si128();
    __mmask8 nan = 0;
    for (int64_t i0 = 0; i0 < n; i0 += 8) {
      const int block = n - i0 >= 8 ? 8 : int(n - i0);
      __m512d acc[8];
      __mmask8 any_bad = 0;
      for (int r = 0; r < 8; ++r) {
        acc[r] = minus_inf;
        if (r >= block) continue;
        const int64_t e = offsets[i0 + r + 1];
        // One core's hardware prefetch alone reaches about half the read bandwidth (see
        // kPrefetchGroups): run kUnsupportedPrefetch bytes (512 claims) ahead in the scores
        // and as many claims ahead in the labels (4 KiB: measured best from cold caches).
        __builtin_prefetch(x + offsets[i0 + r] + kUnsupportedPrefetch / 8, 0, 3);
        __builtin_prefetch(reinterpret_cast<const char*>(ok) + offsets[i0 + r] + kUnsupportedPrefetch / 8, 0, 3);
        __mmask8 bad = 0;
        for (int64_t c = offsets[i0 + r]; c < e; c += 8) {
          const int64_t rem = e - c;
          const __mmask8 lanes = rem >= 8 ? __mmask8(0xFF) : __mmask8((1u << rem) - 1u);
          const __m512d v = _mm512_maskz_loadu_pd(lanes, x + c);
          const __m128i labels = _mm_maskz_loadu_epi8(__mmask16(lanes), ok + c);
          const __mmask8 unsupported = __mmask8(_mm_mask_cmpeq_epi8_mask(__mmask16(lanes), labels, zero));
          acc[r] = _mm512_mask_max_pd(acc[r], unsupported, acc[r], v);
          bad |= unsupported;
          nan |= _mm512_mask_cmp_pd_mask(lanes, v, v, _CMP_UNORD_Q);
        }
        any_bad |= __mmask8((bad != 0 ? 1u : 0u) << r);
      }
      const __m512d m = _mm512_mask_blend_pd(any_bad, sentinel_v, max_of_each(acc));
      const __mmask8 store = block == 8 ? __mmask8(0xFF) : __mmask8((1u << block) - 1u);
      _mm512_mask_storeu_pd(umax + i0, store, m);
      if (has_bad != nullptr)
        for (int r = 0; r < block; ++r) has_bad[i0 + r] = ((any_bad >> r) & 1u) != 0;
    }
    return nan != 0;
  }

  // 8 keys per step (AVX-512DQ 64-bit multiplies); unsigned compares give the bits directly.
  static void split_key_bits(uint64_t base, const int64_t* perm, int64_t count, uint64_t lo, uint64_t span,
                             uint64_t* below, uint64_t* window) {
    const __m512i gamma = _mm512_set1_epi64(static_cast<long long>(kSplitGamma));
    const __m512i mul1 = _mm512_set1_epi64(static_cast<long long>(kSplitMul1));
    const __m512i mul2 = _mm512_set1_epi64(static_cast<long long>(kSplitMul2));
    const __m512i basev = _mm512_set1_epi64(static_cast<long long>(base));
    const __m512i lov = _mm512_set1_epi64(static_cast<long long>(lo));
    const __m512i spanv = _mm512_set1_epi64(static_cast<long long>(span));
    const __m512i one = _mm512_set1_epi64(1);
    const __m512i ramp = _mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0);
    for (int64_t w = 0; w * 64 < count; ++w) {
      uint64_t lower = 0, inside = 0;
      for (int q = 0; q < 8; ++q) {
        const int64_t t = w * 64 + q * 8;
        if (t >= count) break;
        const int64_t rem = count - t;
        const __mmask8 lanes = rem >= 8 ? __mmask8(0xFF) : __mmask8((1u << rem) - 1u);
        const __m512i j = perm != nullptr ? _mm512_maskz_loadu_epi64(lanes, perm + t)
                                          : _mm512_add_epi64(_mm512_set1_epi64(t), ramp);
        __m512i z = _mm512_add_epi64(basev, _mm512_mullo_epi64(_mm512_add_epi64(j, one), gamma));
        z = _mm512_mullo_epi64(_mm512_xor_si512(z, _mm512_srli_epi64(z, 30)), mul1);
        z = _mm512_mullo_epi64(_mm512_xor_si512(z, _mm512_srli_epi64(z, 27)), mul2);
        z = _mm512_xor_si512(z, _mm512_srli_epi64(z, 31));
        const __mmask8 lt = _mm512_mask_cmplt_epu64_mask(lanes, z, lov);
        const __mmask8 in = _mm512_mask_cmple_epu64_mask(lanes, _mm512_sub_epi64(z, lov), spanv);
        lower |= uint64_t(lt) << (q * 8);
        inside |= uint64_t(in) << (q * 8);
      }
      below[w] = lower;
      if (window != nullptr) window[w] = inside;
    }
  }

  // Up to 8 claims in one vector: kept and supported counts of every lane's threshold
  // accumulate as exact doubles (one compare per claim d: lanes c with s_c <= s_d gain 1),
  // one vector division, and a masked maximum of the hits. Longer responses: the scalar path.
  // 8 values per step: two compares, a compress of the members into the low lanes and a full
  // (unmasked) store, the write position advanced by the member count.
  static int64_t band_gather(const double* x, int64_t n, double lo, double hi, double* members, int64_t* below) {
    const __m512d vlo = _mm512_set1_pd(lo), vhi = _mm512_set1_pd(hi);
    int64_t m = 0, b = 0, i = 0;
    for (; i + 8 <= n; i += 8) {
      const __m512d v = _mm512_loadu_pd(x + i);
      const __mmask8 lt = _mm512_cmp_pd_mask(v, vlo, _CMP_LT_OQ);
      const __mmask8 in = _mm512_cmp_pd_mask(v, vlo, _CMP_GE_OQ) & _mm512_cmp_pd_mask(v, vhi, _CMP_LE_OQ);
      _mm512_storeu_pd(members + m, _mm512_maskz_compress_pd(in, v));
      b += __builtin_popcount(lt);
      m += __builtin_popcount(in);
    }
    *below += b;
    return m + impl::band_gather_scalar(x + i, n - i, lo, hi, members + m, below);
  }
  static double r_score_short(const double* s, const bool* ok, int64_t p, double a, double sentinel) {
    if (p > 8) return impl::r_score_short_scalar(s, ok, p, a, sentinel);
    const __mmask8 lanes = __mmask8((1u << p) - 1u);
    const __m512d v = _mm512_maskz_loadu_pd(lanes, s);
    const __m128i labels = _mm_maskz_loadu_epi8(__mmask16(lanes), ok);
    const unsigned supported_lanes = unsigned(_mm_mask_test_epi8_mask(__mmask16(lanes), labels, labels));
    const __m512d one = _mm512_set1_pd(1.0);
    __m512d kept = _mm512_setzero_pd(), supported = _mm512_setzero_pd();
    for (int64_t d = 0; d < p; ++d) {
      const __m512d sd = _mm512_permutexvar_pd(_mm512_set1_epi64(d), v);
      const __mmask8 in = _mm512_mask_cmp_pd_mask(lanes, v, sd, _CMP_LE_OQ);  // s_c <= s_d
      kept = _mm512_mask_add_pd(kept, in, kept, one);
      const __mmask8 in_ok = __mmask8(in & (((supported_lanes >> d) & 1u) ? 0xFFu : 0u));
      supported = _mm512_mask_add_pd(supported, in_ok, supported, one);
    }
    const __m512d fraction = _mm512_maskz_div_pd(lanes, supported, kept);  // kept >= 1 on lanes < p
    const __mmask8 hit = _mm512_mask_cmp_pd_mask(lanes, fraction, _mm512_set1_pd(a), _CMP_LT_OQ);
    return hit ? _mm512_mask_reduce_max_pd(hit, v) : sentinel;
  }
};
}  // namespace

const Primitives& primitives_avx512() {
  static const Primitives p = impl::make_primitives<Avx512Traits>("avx512");
  return p;
}
}  // namespace rrag::simd
