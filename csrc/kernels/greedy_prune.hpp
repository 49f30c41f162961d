// MIRAGE greedy pruning of the claim graph, exactly (fixed-point integer arithmetic).
#pragma once

#include <cstdint>
#include <vector>

namespace rrag {

// Values are quantised to integers q(x) = nearbyint(x * 2^32) (round half to even), so
// every sum below is exact and the result equals that of a naive recompute-F search.
// |x| must be <= 2^20 (kMaxAbsValue) and finite.
constexpr double kQuantScale = 4294967296.0;  // 2^32
constexpr double kMaxAbsValue = 1048576.0;    // 2^20

struct PruneResult {
  std::vector<uint8_t> keep;       // (N,)
  std::vector<int64_t> removal_order;
  double F = 0.0;                  // final F(S) = F_int / 2^32, correctly rounded
};

// F(S) = sum_{c in S} (s(c) - pen(c)) + sum_{edges e = (i, j), i and j in S} w_e.
// Starting from S = all claims, repeatedly remove the claim c whose removal raises F the
// most, gain(c) = -(s(c) - pen(c)) - sum of w_e over the edges from c to claims in S;
// only while the best gain is > 0; equal gains: lowest index. An indexed max-heap (no stale entries)
// with incremental neighbour updates: O((N + E) log N).
// node_scores: N; self_penalty: N or nullptr (zeros); edge_i, edge_j, edge_weight: E.
// Parallel edges add; self-loops and out-of-range ends are errors.
PruneResult greedy_prune(const double* node_scores, int64_t n, const int64_t* edge_i, const int64_t* edge_j,
                         const double* edge_weight, int64_t n_edges, const double* self_penalty);

}  // namespace rrag
