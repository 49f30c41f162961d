#include "kernels/gate_stats.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kernels/checks.hpp"

namespace rrag {

GateStats gate_stats(const uint8_t* keep, int64_t n, const int64_t* edge_i, const int64_t* edge_j,
                     const int8_t* kind, int64_t n_edges, const int64_t* domain_ids, double eps,
                     bool count_unknown) {
  if (!(std::isfinite(eps) && eps >= 0.0)) fail("eps", "must be finite and >= 0, got " + std::to_string(eps));
  GateStats g;
  std::vector<int64_t> domains;
  bool unknown = false;
  for (int64_t c = 0; c < n; ++c) {
    if (keep[c] > 1) fail("keep", "must hold 0/1 values");
    if (!keep[c]) continue;
    ++g.n_kept;
    if (domain_ids[c] < 0) unknown = true;
    else domains.push_back(domain_ids[c]);
  }
  for (int64_t e = 0; e < n_edges; ++e) {
    if (edge_i[e] < 0 || edge_i[e] >= n)
      fail("edge_i", "index " + std::to_string(edge_i[e]) + " at position " + std::to_string(e) +
                         " out of range [0, " + std::to_string(n) + ")");
    if (edge_j[e] < 0 || edge_j[e] >= n)
      fail("edge_j", "index " + std::to_string(edge_j[e]) + " at position " + std::to_string(e) +
                         " out of range [0, " + std::to_string(n) + ")");
    if (kind[e] < -1 || kind[e] > 1)
      fail("kind", "values must be -1, 0 or +1, got " + std::to_string(int(kind[e])) + " at position " +
                       std::to_string(e));
    if (!(keep[edge_i[e]] && keep[edge_j[e]])) continue;
    if (kind[e] > 0) ++g.n_support;
    else if (kind[e] < 0) ++g.n_contradiction;
  }
  std::sort(domains.begin(), domains.end());
  g.n_domains = std::unique(domains.begin(), domains.end()) - domains.begin();
  if (unknown && count_unknown) ++g.n_domains;
  const double denom = static_cast<double>(g.n_support + g.n_contradiction) + eps;
  g.r_contr = denom > 0.0 ? static_cast<double>(g.n_contradiction) / denom : 0.0;
  return g;
}

}  // namespace rrag
