#include "kernels/runtime.hpp"

#include <omp.h>

#include <cstdlib>
#include <stdexcept>

namespace rrag {
namespace {

bool cpu_has(const char* feature_set) {
  const std::string s = feature_set;
  if (s == "avx2") return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (s == "avx512")
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
  return s == "scalar";
}

const simd::Primitives* by_name(const std::string& name) {
  if (name == "scalar") return &simd::primitives_scalar();
  if (name == "avx2") return &simd::primitives_avx2();
  if (name == "avx512") return &simd::primitives_avx512();
  return nullptr;
}

const simd::Primitives* best_available() {
  if (cpu_has("avx512")) return &simd::primitives_avx512();
  if (cpu_has("avx2")) return &simd::primitives_avx2();
  return &simd::primitives_scalar();
}

const simd::Primitives* initial_primitives() {
  if (const char* env = std::getenv("RRAG_SIMD")) {
    const simd::Primitives* p = by_name(env);
    if (p && cpu_has(env)) return p;
  }
  return best_available();
}

const simd::Primitives* g_primitives = initial_primitives();
int g_num_threads = omp_get_max_threads();

}  // namespace

int get_num_threads() { return g_num_threads; }

void set_num_threads(int n) {
  if (n < 1) throw std::invalid_argument("n: the thread count must be >= 1, got " + std::to_string(n));
  g_num_threads = n;
}

const simd::Primitives& primitives() { return *g_primitives; }
std::string simd_level() { return g_primitives->name; }

std::vector<std::string> available_simd_levels() {
  std::vector<std::string> out;
  for (const char* name : {"scalar", "avx2", "avx512"})
    if (cpu_has(name)) out.emplace_back(name);
  return out;
}

void set_simd_level(const std::string& name) {
  const simd::Primitives* p = by_name(name);
  if (!p) throw std::invalid_argument("name: unknown SIMD level '" + name + "' (scalar, avx2, avx512)");
  if (!cpu_has(name.c_str()))
    throw std::invalid_argument("name: this CPU does not support SIMD level '" + name + "'");
  g_primitives = p;
}

std::string compiler_id() {
#ifdef RRAG_COMPILER_ID
  return RRAG_COMPILER_ID;
#else
  return "unknown";
#endif
}

int openmp_version() { return _OPENMP; }

bool native_build() {
#if defined(RRAG_NATIVE_BUILD) && RRAG_NATIVE_BUILD
  return true;
#else
  return false;
#endif
}

void BadRowTracker::throw_if_bad(const char* arg) const {
  if (first_ < 0) return;
  throw std::invalid_argument(std::string(arg) + ": contains NaN or inf (first at row " +
                              std::to_string(first_) +
                              "), or a row whose squared norm overflows float32");
}

}  // namespace rrag
