#include "kernels/nli_graph.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "kernels/checks.hpp"
#include "kernels/parallel.hpp"
#include "kernels/runtime.hpp"

namespace rrag {
namespace {

// Lowest bad index over all workers (thread-count independent error messages).
using FirstBad = BadRowTracker;

inline bool is_prob(double x) { return std::isfinite(x) && x >= 0.0 && x <= 1.0; }

}  // namespace

NliGraph nli_graph(const int64_t* i, const int64_t* j, int64_t n_pairs, const double* probs_fwd,
                   const double* probs_bwd, int64_t n_claims, int entail_col, int contr_col, bool mean) {
  if (n_claims < 0) fail("n_claims", "must be >= 0, got " + std::to_string(n_claims));
  if (n_pairs < 0) fail("i", "negative length");
  if (entail_col < 0 || entail_col > 2 || contr_col < 0 || contr_col > 2 || entail_col == contr_col)
    fail("label_order", "entailment and contradiction must be two different columns of 0, 1, 2");
  check_budget(bytes_for({n_claims}, 3 * sizeof(int64_t)), "n_claims", "the per-claim counts and adjacency offsets");
  // Two passes of ~50 bytes a pair, beside a serial adjacency build that costs several times
  // more: threads pay off only from ~256k pairs a worker. Below, a worker preempted by another
  // process would cost more than the pass it saves (measured under load at 100k pairs).
  constexpr int64_t kBlock = 4096;
  const int nt = workers_for(n_pairs, int64_t(1) << 18, (n_pairs + kBlock - 1) / kBlock);

  FirstBad bad_i, bad_j, bad_loop, bad_fwd, bad_bwd;
  parallel_for(n_pairs, kBlock, nt, [&](int64_t lo, int64_t hi, int) {
    for (int64_t p = lo; p < hi; ++p) {
      if (i[p] < 0 || i[p] >= n_claims) bad_i.report(p);
      if (j[p] < 0 || j[p] >= n_claims) bad_j.report(p);
      if (i[p] == j[p]) bad_loop.report(p);
      const double* f = probs_fwd + 3 * p;
      const double* b = probs_bwd + 3 * p;
      if (!(is_prob(f[0]) && is_prob(f[1]) && is_prob(f[2]))) bad_fwd.report(p);
      if (!(is_prob(b[0]) && is_prob(b[1]) && is_prob(b[2]))) bad_bwd.report(p);
    }
  });
  const std::string range = " out of range [0, n_claims = " + std::to_string(n_claims) + ")";
  if (bad_i.first() >= 0)
    fail("i", "index " + std::to_string(i[bad_i.first()]) + " at position " + std::to_string(bad_i.first()) + range);
  if (bad_j.first() >= 0)
    fail("j", "index " + std::to_string(j[bad_j.first()]) + " at position " + std::to_string(bad_j.first()) + range);
  if (bad_loop.first() >= 0)
    fail("j", "self-loop: i[" + std::to_string(bad_loop.first()) + "] == j[" + std::to_string(bad_loop.first()) +
                  "] == " + std::to_string(i[bad_loop.first()]));
  if (bad_fwd.first() >= 0)
    fail("probs_fwd", "probabilities must be finite and in [0, 1] (first bad row " + std::to_string(bad_fwd.first()) + ")");
  if (bad_bwd.first() >= 0)
    fail("probs_bwd", "probabilities must be finite and in [0, 1] (first bad row " + std::to_string(bad_bwd.first()) + ")");

  NliGraph g;
  g.w_supp.resize(n_pairs);
  g.w_contr.resize(n_pairs);
  g.kind.resize(n_pairs);
  parallel_for(n_pairs, kBlock, nt, [&](int64_t lo, int64_t hi, int) {
    for (int64_t p = lo; p < hi; ++p) {
      const double* f = probs_fwd + 3 * p;
      const double* b = probs_bwd + 3 * p;
      const double sf = std::max(0.0, 2.0 * f[entail_col] - 1.0);
      const double sb = std::max(0.0, 2.0 * b[entail_col] - 1.0);
      const double cf = f[contr_col], cb = b[contr_col];
      const double s = mean ? (sf + sb) * 0.5 : std::max(sf, sb);
      const double c = mean ? (cf + cb) * 0.5 : std::max(cf, cb);
      g.w_supp[p] = s;
      g.w_contr[p] = c;
      g.kind[p] = s > c ? int8_t(1) : (c > s ? int8_t(-1) : int8_t(0));
    }
  });

  g.support_count.assign(n_claims, 0);
  g.contradiction_count.assign(n_claims, 0);
  g.indptr.assign(n_claims + 1, 0);
  for (int64_t p = 0; p < n_pairs; ++p) {
    if (g.kind[p] == 0) continue;
    auto& count = g.kind[p] > 0 ? g.support_count : g.contradiction_count;
    ++count[i[p]];
    ++count[j[p]];
    ++g.indptr[i[p] + 1];
    ++g.indptr[j[p] + 1];
  }
  for (int64_t c = 0; c < n_claims; ++c) g.indptr[c + 1] += g.indptr[c];
  const int64_t n_entries = g.indptr[n_claims];
  g.neighbors.resize(n_entries);
  g.edge_ids.resize(n_entries);
  std::vector<int64_t> fill(g.indptr.begin(), g.indptr.end() - 1);
  for (int64_t p = 0; p < n_pairs; ++p) {  // edge ids ascending within each row
    if (g.kind[p] == 0) continue;
    int64_t& a = fill[i[p]];
    g.neighbors[a] = j[p];
    g.edge_ids[a++] = p;
    int64_t& b = fill[j[p]];
    g.neighbors[b] = i[p];
    g.edge_ids[b++] = p;
  }
  // Sort each row by neighbor; a stable sort keeps equal neighbors (parallel edges) in
  // edge-id order.
  std::vector<std::pair<int64_t, int64_t>> row;
  for (int64_t c = 0; c < n_claims; ++c) {
    const int64_t lo = g.indptr[c], hi = g.indptr[c + 1];
    bool sorted = true;
    for (int64_t x = lo + 1; x < hi && sorted; ++x) sorted = g.neighbors[x - 1] <= g.neighbors[x];
    if (sorted) continue;
    row.clear();
    for (int64_t x = lo; x < hi; ++x) row.emplace_back(g.neighbors[x], g.edge_ids[x]);
    std::stable_sort(row.begin(), row.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    for (int64_t x = lo; x < hi; ++x) {
      g.neighbors[x] = row[x - lo].first;
      g.edge_ids[x] = row[x - lo].second;
    }
  }
  return g;
}

}  // namespace rrag
