#pragma once

#include <cstdint>

namespace rrag {

// out[i * m + j] = cos(a_i, b_j) = (<a_i, b_j> * inv|a_i|) * inv|b_j|; 0 for a zero row.
// a: n x d, b: m x d, out: n x m, all row-major float32.
void cosine_matrix(const float* a, int64_t n, const float* b, int64_t m, int64_t d, float* out,
                   bool check_finite);

}  // namespace rrag
