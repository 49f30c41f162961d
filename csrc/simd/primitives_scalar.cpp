// Portable fallback: one lane, plain multiply-add (no FMA contraction, see CMakeLists).
#include "simd/primitives_impl.hpp"

namespace rrag::simd {
namespace {
struct ScalarTraits {
  using V = float;
  static constexpr int W = 1, MR = 4, NR = 4;
  static constexpr int GM = 4, GV = 4;  // packed GEMM micro-kernel: GM x (GV * W)
  static constexpr bool kTileReduce = false;
  static V zero() { return 0.0f; }
  static V load(const float* p) { return *p; }
  static V load_tail(const float*, int) { return 0.0f; }  // never called: W == 1
  static V broadcast(float x) { return x; }
  static void store(float* p, V v) { *p = v; }
  static V mul(V a, V b) { return a * b; }
  static V fma(V a, V b, V c) { return a * b + c; }
  static float reduce(V v) { return v; }
  static bool unsupported_max(const double* x, const bool* ok, const int64_t* offsets, int64_t n,
                              double sentinel, double* umax, bool* has_bad) {
    return impl::unsupported_max_scalar(x, ok, offsets, n, sentinel, umax, has_bad);
  }
  static void split_key_bits(uint64_t base, const int64_t* perm, int64_t count, uint64_t lo, uint64_t span,
                             uint64_t* below, uint64_t* window) {
    impl::split_key_bits_scalar(base, perm, count, lo, span, below, window);
  }
  static int64_t band_gather(const double* x, int64_t n, double lo, double hi, double* members, int64_t* below) {
    return impl::band_gather_scalar(x, n, lo, hi, members, below);
  }
  static double r_score_short(const double* s, const bool* ok, int64_t p, double a, double sentinel) {
    return impl::r_score_short_scalar(s, ok, p, a, sentinel);
  }
};
}  // namespace

const Primitives& primitives_scalar() {
  static const Primitives p = impl::make_primitives<ScalarTraits>("scalar");
  return p;
}
}  // namespace rrag::simd
