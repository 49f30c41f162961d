// The primitives written once over a small vector-traits interface; each
// primitives_<isa>.cpp includes this with its own traits and compiler flags.
#pragma once

#include <algorithm>
#include <cstdint>

#include "simd/primitives.hpp"

namespace rrag::simd::impl {

// Streaming passes prefetch this many 4-row groups ahead: one core's hardware prefetch
// alone reaches only about half the read bandwidth (measured: segmented_cosine 11.1 ->
// 7.7 ms at Q=10,000 x 20, d=384, 2 threads). Prefetches never fault past the end.
// They go to L2 (locality 2, PREFETCHT1): an L1 prefetch holds one of the core's ~16 L1
// fill buffers until the line arrives, which caps a core at ~16 lines in flight; L2
// prefetches do not, so many more misses overlap (measured at Q=10,000, d=384, one
// thread: segmented_cosine 33 -> 17 ms, claim_relevance 33 -> 21 ms).
constexpr int64_t kPrefetchGroups = 2;
constexpr int kPrefetchLocality = 2;

// Dot product of one row pair in the canonical order (W-lane partials, then reduce).
template <class T>
inline float dot_one(const float* a, const float* b, int64_t d) {
  using V = typename T::V;
  V acc = T::zero();
  int64_t k = 0;
  for (; k + T::W <= d; k += T::W) acc = T::fma(T::load(a + k), T::load(b + k), acc);
  if (k < d) acc = T::fma(T::load_tail(a + k, int(d - k)), T::load_tail(b + k, int(d - k)), acc);
  return T::reduce(acc);
}

// Four rows at a time (four independent FMA chains); per row the arithmetic of dot_one.
template <class T>
void row_sqnorms(const float* x, int64_t n, int64_t d, float* out) {
  using V = typename T::V;
  constexpr int R = 4;
  int64_t r0 = 0;
  for (; r0 + R <= n; r0 += R) {
    V acc[R];
    for (int i = 0; i < R; ++i) acc[i] = T::zero();
    int64_t k = 0;
    for (; k + T::W <= d; k += T::W)
      for (int i = 0; i < R; ++i) {
        __builtin_prefetch(x + (r0 + i + kPrefetchGroups * R) * d + k, 0, kPrefetchLocality);
        const V xv = T::load(x + (r0 + i) * d + k);
        acc[i] = T::fma(xv, xv, acc[i]);
      }
    if (k < d)
      for (int i = 0; i < R; ++i) {
        const V xv = T::load_tail(x + (r0 + i) * d + k, int(d - k));
        acc[i] = T::fma(xv, xv, acc[i]);
      }
    for (int i = 0; i < R; ++i) out[r0 + i] = T::reduce(acc[i]);
  }
  for (; r0 < n; ++r0) out[r0] = dot_one<T>(x + r0 * d, x + r0 * d, d);
}

// R rows at a time so that 2R independent FMA chains hide the FMA latency; each row's own
// arithmetic is the same as dot_one, so interleaving does not change any result. Rows past n
// (an edge group) are clamped to the last row and their results dropped.
template <class T, int R>
inline void dot_sqnorm_rows(const float* q, const float* x, int64_t r0, int64_t n, int64_t d, float* dots,
                            float* sqnorms) {
  using V = typename T::V;
  const float* rows[R];
  for (int i = 0; i < R; ++i) rows[i] = x + std::min<int64_t>(r0 + i, n - 1) * d;
  V acc_dot[R], acc_sq[R];
  for (int i = 0; i < R; ++i) acc_dot[i] = acc_sq[i] = T::zero();
  int64_t k = 0;
  for (; k + T::W <= d; k += T::W) {
    const V qv = T::load(q + k);
    for (int i = 0; i < R; ++i) {
      __builtin_prefetch(rows[i] + k + kPrefetchGroups * 4 * d, 0, kPrefetchLocality);
      const V xv = T::load(rows[i] + k);
      acc_dot[i] = T::fma(qv, xv, acc_dot[i]);
      acc_sq[i] = T::fma(xv, xv, acc_sq[i]);
    }
  }
  if (k < d) {
    const int tail = int(d - k);
    const V qv = T::load_tail(q + k, tail);
    for (int i = 0; i < R; ++i) {
      const V xv = T::load_tail(rows[i] + k, tail);
      acc_dot[i] = T::fma(qv, xv, acc_dot[i]);
      acc_sq[i] = T::fma(xv, xv, acc_sq[i]);
    }
  }
  for (int i = 0; i < R && r0 + i < n; ++i) {
    dots[r0 + i] = T::reduce(acc_dot[i]);
    sqnorms[r0 + i] = T::reduce(acc_sq[i]);
  }
}

// Groups of 4 rows; a last group of 1 or 2 rows takes the 2-row path (no clamped work).
template <class T>
void dot_sqnorm_one_to_many(const float* q, const float* x, int64_t n, int64_t d, float* dots,
                            float* sqnorms) {
  int64_t r0 = 0;
  for (; r0 + 2 < n; r0 += 4) dot_sqnorm_rows<T, 4>(q, x, r0, n, d, dots, sqnorms);
  if (r0 < n) dot_sqnorm_rows<T, 2>(q, x, r0, n, d, dots, sqnorms);
}

// Register-blocked MR x NR micro-tile. Edge tiles clamp their row pointers to the last
// valid row and discard the extra results, so every output element is produced by one FMA
// chain over k in the canonical order, whatever its position or the tile's shape.
template <class T, int MR, int NR>
inline void micro_tile(const float* a, int64_t m, int64_t i0, const float* b, int64_t n,
                       int64_t j0, int64_t d, float* c, int64_t ldc, PrefetchSpans* pf, int pf_per_step) {
  using V = typename T::V;
  const float* arow[MR];
  const float* brow[NR];
  for (int i = 0; i < MR; ++i) arow[i] = a + std::min<int64_t>(i0 + i, m - 1) * d;
  for (int j = 0; j < NR; ++j) brow[j] = b + std::min<int64_t>(j0 + j, n - 1) * d;
  V acc[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j] = T::zero();
  int64_t k = 0;
  for (; k + T::W <= d; k += T::W) {
    if (pf != nullptr) pf->issue(pf_per_step);
    V bv[NR];
    for (int j = 0; j < NR; ++j) bv[j] = T::load(brow[j] + k);
    for (int i = 0; i < MR; ++i) {
      const V av = T::load(arow[i] + k);
      for (int j = 0; j < NR; ++j) acc[i][j] = T::fma(av, bv[j], acc[i][j]);
    }
  }
  if (k < d) {
    const int tail = int(d - k);
    V bv[NR];
    for (int j = 0; j < NR; ++j) bv[j] = T::load_tail(brow[j] + k, tail);
    for (int i = 0; i < MR; ++i) {
      const V av = T::load_tail(arow[i] + k, tail);
      for (int j = 0; j < NR; ++j) acc[i][j] = T::fma(av, bv[j], acc[i][j]);
    }
  }
  const int mi = int(std::min<int64_t>(MR, m - i0));
  const int nj = int(std::min<int64_t>(NR, n - j0));
  if constexpr (T::kTileReduce && MR == T::MR && NR == T::NR) {
    // All MR x NR sums at once, in the same addition tree as T::reduce (same bits).
    alignas(64) float col_major[MR * NR];
    T::reduce_tile(acc, col_major);
    for (int i = 0; i < mi; ++i)
      for (int j = 0; j < nj; ++j) c[(i0 + i) * ldc + (j0 + j)] = col_major[j * MR + i];
  } else {
    for (int i = 0; i < mi; ++i)
      for (int j = 0; j < nj; ++j) c[(i0 + i) * ldc + (j0 + j)] = T::reduce(acc[i][j]);
  }
}

// Full MR x NR tiles; an edge of at most half a tile's rows or columns takes the half-size
// tile (claim_relevance's 8 claims x 10 docs: 4 x 4 tiles and a 4 x 2 edge, no clamped work).
template <class T>
void dot_tile(const float* a, int64_t m, const float* b, int64_t n, int64_t d, float* c,
              int64_t ldc, PrefetchSpans* pf) {
  if (m <= 0 || n <= 0) return;
  constexpr int MR = T::MR, NR = T::NR, MH = MR / 2 > 0 ? MR / 2 : 1, NH = NR / 2 > 0 ? NR / 2 : 1;
  int per_step = 0;
  if (pf != nullptr) {
    const int64_t steps = ((m + MR - 1) / MR) * ((n + NR - 1) / NR) * (d / T::W);
    per_step = steps > 0 ? int(std::min<int64_t>(64, (pf->lines() + steps - 1) / steps)) : 0;
    if (per_step == 0) pf = nullptr;
  }
  for (int64_t i0 = 0; i0 < m; i0 += MR) {
    const bool short_rows = m - i0 <= MH;
    for (int64_t j0 = 0; j0 < n; j0 += NR) {
      const bool short_cols = n - j0 <= NH;
      if (!short_rows && !short_cols) micro_tile<T, MR, NR>(a, m, i0, b, n, j0, d, c, ldc, pf, per_step);
      else if (!short_rows) micro_tile<T, MR, NH>(a, m, i0, b, n, j0, d, c, ldc, pf, per_step);
      else if (!short_cols) micro_tile<T, MH, NR>(a, m, i0, b, n, j0, d, c, ldc, pf, per_step);
      else micro_tile<T, MH, NH>(a, m, i0, b, n, j0, d, c, ldc, pf, per_step);
    }
  }
}

inline void pack_panels(const float* x, int64_t rows, int64_t d, int width, float* out) {
  const int64_t panels = (rows + width - 1) / width;
  for (int64_t p = 0; p < panels; ++p) {
    float* dst = out + p * d * width;
    const int valid = int(std::min<int64_t>(width, rows - p * width));
    const float* src = x + p * width * d;
    // k outer: contiguous writes, `valid` sequential read streams.
    for (int64_t k = 0; k < d; ++k) {
      float* col = dst + k * width;
      for (int r = 0; r < valid; ++r) col[r] = src[r * d + k];
      for (int r = valid; r < width; ++r) col[r] = 0.0f;
    }
  }
}

// GM x (GV * W) outer-product micro-kernel: per k, GV vector loads of the b panel, GM
// broadcasts of the a panel, GM * GV FMAs into register accumulators.
template <class T>
inline void gemm_micro(const float* ap, const float* bp, int64_t d, float* c, int64_t ldc, int mi,
                       int nj, const float* row_scale, const float* col_scale) {
  using V = typename T::V;
  constexpr int GM = T::GM, GV = T::GV, NR = T::GV * T::W;
  V acc[GM][GV];
  for (int i = 0; i < GM; ++i)
    for (int v = 0; v < GV; ++v) acc[i][v] = T::zero();
  for (int64_t k = 0; k < d; ++k) {
    V bv[GV];
    for (int v = 0; v < GV; ++v) bv[v] = T::load(bp + k * NR + v * T::W);
    for (int i = 0; i < GM; ++i) {
      const V av = T::broadcast(ap[k * GM + i]);
      for (int v = 0; v < GV; ++v) acc[i][v] = T::fma(av, bv[v], acc[i][v]);
    }
  }
  if (mi == GM && nj == NR) {
    // Scaled in registers, in the order (dot * row) * col that scalar code would use, so
    // the bits are those of a separate scaling pass.
    for (int i = 0; i < GM; ++i)
      for (int v = 0; v < GV; ++v) {
        V x = acc[i][v];
        if (row_scale) x = T::mul(x, T::broadcast(row_scale[i]));
        if (col_scale) x = T::mul(x, T::load(col_scale + v * T::W));
        T::store(c + i * ldc + v * T::W, x);
      }
    return;
  }
  alignas(64) float tile[GM * NR];
  for (int i = 0; i < GM; ++i)
    for (int v = 0; v < GV; ++v) T::store(tile + i * NR + v * T::W, acc[i][v]);
  for (int i = 0; i < mi; ++i)
    for (int j = 0; j < nj; ++j) {
      float x = tile[i * NR + j];
      if (row_scale) x = x * row_scale[i];
      if (col_scale) x = x * col_scale[j];
      c[i * ldc + j] = x;
    }
}

template <class T>
void gemm_packed(const float* a_packed, int64_t m, const float* b_packed, int64_t n, int64_t d,
                 float* c, int64_t ldc, const float* row_scale, const float* col_scale) {
  constexpr int GM = T::GM, NR = T::GV * T::W;
  const int64_t a_panels = (m + GM - 1) / GM, b_panels = (n + NR - 1) / NR;
  // b panel outer: one b panel (d x NR) stays in L1/L2 while every a panel passes it.
  for (int64_t pb = 0; pb < b_panels; ++pb) {
    const int nj = int(std::min<int64_t>(NR, n - pb * NR));
    for (int64_t pa = 0; pa < a_panels; ++pa) {
      const int mi = int(std::min<int64_t>(GM, m - pa * GM));
      gemm_micro<T>(a_packed + pa * d * GM, b_packed + pb * d * NR, d, c + pa * GM * ldc + pb * NR, ldc,
                    mi, nj, row_scale ? row_scale + pa * GM : nullptr, col_scale ? col_scale + pb * NR : nullptr);
    }
  }
}

// One lane: the label selects the score or -inf with bit masks, not a branch (labels are
// unpredictable), and the maximum is a compare-select.
inline bool unsupported_max_scalar(const double* x, const bool* ok, const int64_t* offsets, int64_t n,
                                   double sentinel, double* umax, bool* has_bad) {
  constexpr uint64_t kMinusInf = 0xFFF0000000000000ULL;
  const unsigned char* okb = reinterpret_cast<const unsigned char*>(ok);
  bool nan = false;
  for (int64_t i = 0; i < n; ++i) {
    double u = -__builtin_inf();
    uint64_t bad = 0;
    __builtin_prefetch(x + offsets[i] + 512, 0, 3);  // 512 claims ahead: hardware prefetch alone is slower
    __builtin_prefetch(okb + offsets[i] + 512, 0, 3);
    for (int64_t c = offsets[i]; c < offsets[i + 1]; ++c) {
      uint64_t bits;
      __builtin_memcpy(&bits, x + c, sizeof bits);
      const uint64_t unsupported = uint64_t(okb[c] == 0) * ~uint64_t(0);
      const uint64_t picked = (bits & unsupported) | (kMinusInf & ~unsupported);
      double y;
      __builtin_memcpy(&y, &picked, sizeof y);
      u = y > u ? y : u;
      bad |= unsupported;
      nan |= x[c] != x[c];
    }
    umax[i] = bad ? u : sentinel;
    if (has_bad != nullptr) has_bad[i] = bad != 0;
  }
  return nan;
}

// Branch-free pairwise counts over a fixed width (lanes past p masked off).
inline double r_score_short_scalar(const double* s, const bool* ok, int64_t p, double a, double sentinel) {
  constexpr double kMinusInf = -__builtin_inf();
  double sv[kShortResponse];
  int ov[kShortResponse];
  const int64_t width = p <= 8 ? 8 : kShortResponse;
  for (int64_t d = 0; d < width; ++d) {
    sv[d] = d < p ? s[d] : kMinusInf;
    ov[d] = d < p && ok[d] ? 1 : 0;
  }
  double best = kMinusInf;
  bool any = false;
  for (int64_t c = 0; c < p; ++c) {
    const double t = s[c];
    int kept = 0, supported = 0;
    for (int64_t d = 0; d < width; ++d) {
      const int in = (sv[d] >= t) & (d < p);
      kept += in;
      supported += in & ov[d];
    }
    const bool hit = double(supported) / double(kept) < a;
    const double candidate = hit ? t : kMinusInf;
    best = candidate > best ? candidate : best;
    any |= hit;
  }
  return any ? best : sentinel;
}

// Keys of a word first, bits after: fused, the compiler turns the bit building into variable
// shifts and flag-merging selects that made this loop ~4x slower (measured).
inline void split_key_bits_scalar(uint64_t base, const int64_t* perm, int64_t count, uint64_t lo, uint64_t span,
                                  uint64_t* below, uint64_t* window) {
  uint64_t keys[64];
  for (int64_t w = 0; w * 64 < count; ++w) {
    const int64_t t0 = w * 64, t_end = count - t0 < 64 ? count - t0 : 64;
    for (int64_t b = 0; b < t_end; ++b) {
      const int64_t j = perm != nullptr ? perm[t0 + b] : t0 + b;
      keys[b] = splitmix64_mix(base + (uint64_t(j) + 1) * kSplitGamma);
    }
    uint64_t lower = 0;
    for (int64_t b = 0; b < t_end; ++b) lower |= uint64_t(keys[b] < lo ? 1u : 0u) << b;
    below[w] = lower;
    if (window != nullptr) {
      uint64_t inside = 0;
      for (int64_t b = 0; b < t_end; ++b) inside |= uint64_t(keys[b] - lo <= span ? 1u : 0u) << b;
      window[w] = inside;
    }
  }
}

// Branch-free: every x is stored, the write position advances only for a member (a branch
// would mispredict on every member, a few percent of all x).
inline int64_t band_gather_scalar(const double* x, int64_t n, double lo, double hi, double* members,
                                  int64_t* below) {
  int64_t m = 0, b = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double v = x[i];
    b += v < lo ? 1 : 0;
    members[m] = v;
    m += (v >= lo) & (v <= hi) ? 1 : 0;
  }
  *below += b;
  return m;
}

template <class T>
Primitives make_primitives(const char* name) {
  return Primitives{name,           T::W,          &row_sqnorms<T>,  &dot_sqnorm_one_to_many<T>,
                    &dot_tile<T>,   T::GM,         T::GV * T::W,     &pack_panels,
                    &gemm_packed<T>, &T::unsupported_max, &T::r_score_short, &T::split_key_bits,
                    &T::band_gather};
}

}  // namespace rrag::simd::impl
