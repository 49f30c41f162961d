// Argument checks shared by the kernels. They throw std::invalid_argument with a message
// that starts with the argument's name; pybind11 turns that into ValueError.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace rrag {

[[noreturn]] inline void fail(const char* arg, const std::string& what) {
  throw std::invalid_argument(std::string(arg) + ": " + what);
}

// CSR offsets of n_segments segments over n_rows rows: length n_segments + 1, first 0,
// non-decreasing, last n_rows.
inline void check_offsets(const int64_t* offsets, int64_t n_segments, int64_t n_rows, const char* arg) {
  if (n_segments < 0) fail(arg, "negative segment count");
  if (offsets[0] != 0) fail(arg, "offsets[0] must be 0, got " + std::to_string(offsets[0]));
  for (int64_t s = 0; s < n_segments; ++s)
    if (offsets[s + 1] < offsets[s])
      fail(arg, "offsets must be non-decreasing, but offsets[" + std::to_string(s + 1) + "] = " +
                    std::to_string(offsets[s + 1]) + " < offsets[" + std::to_string(s) +
                    "] = " + std::to_string(offsets[s]));
  if (offsets[n_segments] != n_rows)
    fail(arg, "offsets[-1] must equal the number of rows (" + std::to_string(n_rows) + "), got " +
                  std::to_string(offsets[n_segments]));
}

// check_offsets for the streaming kernels, where a sequential pass would cost as much as a
// tenth of the kernel: a branch-free parallel count of decreasing steps, then the sequential
// pass only to name the first problem.
void check_offsets_parallel(const int64_t* offsets, int64_t n_segments, int64_t n_rows, const char* arg);

inline void check_dim(int64_t d, const char* arg) {
  if (d < 1) fail(arg, "the embedding dimension must be >= 1, got " + std::to_string(d));
}

}  // namespace rrag
