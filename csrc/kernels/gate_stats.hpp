// MIRAGE gate statistics of a defended claim set.
#pragma once

#include <cstdint>

namespace rrag {

struct GateStats {
  int64_t n_kept = 0;
  int64_t n_support = 0;        // edges with kind +1 and both ends kept
  int64_t n_contradiction = 0;  // edges with kind -1 and both ends kept
  int64_t n_domains = 0;        // distinct domain ids among kept claims
  double r_contr = 0.0;         // n_contradiction / (n_support + n_contradiction + eps)
};

// keep: n bytes (0/1); edge_i, edge_j: n_edges ends in [0, n); kind: n_edges values in
// {-1, 0, +1}; domain_ids: n. A negative domain id means "unknown": all unknown claims
// together count as one domain when count_unknown, and as none otherwise. eps must be
// finite and >= 0; r_contr is 0 when its denominator is 0.
GateStats gate_stats(const uint8_t* keep, int64_t n, const int64_t* edge_i, const int64_t* edge_j,
                     const int8_t* kind, int64_t n_edges, const int64_t* domain_ids, double eps,
                     bool count_unknown);

}  // namespace rrag
