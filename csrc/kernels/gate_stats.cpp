#include "kernels/gate_stats.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "kernels/checks.hpp"

namespace rrag {

GateStats gate_stats(const uint8_t* keep, int64_t n, const int64_t* edge_i, const int64_t* edge_j,
                     const int8_t* kind, int64_t n_edges, const int64_t* domain_ids, double eps,
                     bool count_unknown) {
  if (!(std::isfinite(eps) && eps >= 0.0)) fail("eps", "must be finite and >= 0, got " + std::to_string(eps));
  GateStats g;
  // Branch-free passes (keep and kind are as good as random, so branches would mispredict on
  // about every other element); the rare bad input is then located by a second, slow scan.
  uint8_t bad_keep = 0;
  int64_t kept = 0, min_dom = std::numeric_limits<int64_t>::max(), max_dom = -1;
  bool unknown = false;
  for (int64_t c = 0; c < n; ++c) {
    bad_keep |= keep[c] > 1 ? 1 : 0;
    const bool k = keep[c] != 0;
    kept += k ? 1 : 0;
    const int64_t dom = domain_ids[c];
    unknown |= k & (dom < 0);
    if (k && dom >= 0) {
      min_dom = std::min(min_dom, dom);
      max_dom = std::max(max_dom, dom);
    }
  }
  if (bad_keep) fail("keep", "must hold 0/1 values");
  g.n_kept = kept;
  bool bad_edge = false;
  int64_t support = 0, contradiction = 0;
  for (int64_t e = 0; e < n_edges; ++e) {
    const int64_t a = edge_i[e], b = edge_j[e];
    const int8_t k = kind[e];
    const bool ok = (a >= 0) & (a < n) & (b >= 0) & (b < n) & (k >= -1) & (k <= 1);
    bad_edge |= !ok;
    const int64_t both = ok ? int64_t(keep[a] & keep[b]) : 0;
    support += both & int64_t(k > 0);
    contradiction += both & int64_t(k < 0);
  }
  if (bad_edge)
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
    }
  g.n_support = support;
  g.n_contradiction = contradiction;
  // Distinct known domains of the kept claims: a table over their id range when it is
  // small (the usual dense ids), else a sort.
  int64_t distinct = 0;
  if (max_dom >= 0 && static_cast<uint64_t>(max_dom - min_dom) <= 4 * static_cast<uint64_t>(n) + 1024) {
    std::vector<uint8_t> seen(static_cast<size_t>(max_dom - min_dom + 1), 0);
    for (int64_t c = 0; c < n; ++c)
      if (keep[c] && domain_ids[c] >= 0) {
        uint8_t& slot = seen[static_cast<size_t>(domain_ids[c] - min_dom)];
        distinct += slot ^ 1;
        slot = 1;
      }
  } else if (max_dom >= 0) {
    std::vector<int64_t> domains;
    for (int64_t c = 0; c < n; ++c)
      if (keep[c] && domain_ids[c] >= 0) domains.push_back(domain_ids[c]);
    std::sort(domains.begin(), domains.end());
    distinct = std::unique(domains.begin(), domains.end()) - domains.begin();
  }
  g.n_domains = distinct + (unknown && count_unknown ? 1 : 0);
  const double denom = static_cast<double>(g.n_support + g.n_contradiction) + eps;
  g.r_contr = denom > 0.0 ? static_cast<double>(g.n_contradiction) / denom : 0.0;
  return g;
}

}  // namespace rrag
