// MIRAGE claim graph from NLI probabilities: edge weights, edge kinds, per-claim counts,
// and the CSR adjacency of the non-ignored edges.
#pragma once

#include <cstdint>
#include <vector>

namespace rrag {

struct NliGraph {
  std::vector<double> w_supp, w_contr;  // (P,)
  std::vector<int8_t> kind;             // (P,): +1 support, -1 contradiction, 0 ignored
  std::vector<int64_t> support_count, contradiction_count;  // (n_claims,)
  std::vector<int64_t> indptr;          // (n_claims + 1,)
  std::vector<int64_t> neighbors, edge_ids;  // (2 * non-ignored edges,)
};

// Edge p joins claims i[p] != j[p] (both in [0, n_claims)). probs_fwd / probs_bwd are
// (P, 3) row-major probabilities (NLI of i -> j and j -> i); column entail_col holds
// p_entail and column contr_col p_contr. Per direction w_supp = max(0, 2 p_entail - 1),
// w_contr = p_contr; directions are combined by max (mean = false) or by (a + b) * 0.5.
// kind = +1 when w_supp > w_contr, -1 when w_contr > w_supp, else 0. Every probability
// must be finite and in [0, 1]. Each non-ignored edge is listed in the rows of both its
// ends; a row's entries are sorted by neighbor, then edge id.
NliGraph nli_graph(const int64_t* i, const int64_t* j, int64_t n_pairs, const double* probs_fwd,
                   const double* probs_bwd, int64_t n_claims, int entail_col, int contr_col, bool mean);

}  // namespace rrag
