// Inverse row norms, with the NaN/inf check folded into the same pass.
#pragma once

#include <cstdint>

namespace rrag {

// inv[r] = 1 / ||x_r|| (0 for a zero row). When check_finite, throws std::invalid_argument
// naming `arg` and the first row holding NaN/inf (or overflowing float32 when squared).
void inverse_row_norms(const float* x, int64_t n, int64_t d, float* inv, bool check_finite,
                       const char* arg);

}  // namespace rrag
