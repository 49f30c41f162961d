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
};
}  // namespace

const Primitives& primitives_scalar() {
  static const Primitives p = impl::make_primitives<ScalarTraits>("scalar");
  return p;
}
}  // namespace rrag::simd
