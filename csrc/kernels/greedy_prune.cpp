#include "kernels/greedy_prune.hpp"

#include <cmath>
#include <string>

#include "kernels/checks.hpp"
#include "kernels/parallel.hpp"

namespace rrag {
namespace {

using i128 = __int128;

// rint(v * 2^32), round half to even, for |v| <= 2^20 (so |v * 2^32| <= 2^52): adding and
// removing 2^52 rounds to an integer in the default rounding mode, exactly like
// np.rint / nearbyint, without a libm call. (No -ffast-math: the compiler keeps it.)
inline int64_t quantise(double v) {
  const double x = v * kQuantScale;
  constexpr double magic = 4503599627370496.0;  // 2^52
  const double m = std::copysign(magic, x);  // branchless: weights have random signs
  const double r = (x + m) - m;
  return static_cast<int64_t>(r);
}

void check_values(const double* x, int64_t n, const char* arg) {
  bool ok = true;
  for (int64_t k = 0; k < n; ++k) ok &= std::fabs(x[k]) <= kMaxAbsValue;  // false for NaN too
  if (ok) return;
  for (int64_t k = 0; k < n; ++k) {
    if (!std::isfinite(x[k])) fail(arg, "contains NaN or inf (first at index " + std::to_string(k) + ")");
    if (std::fabs(x[k]) > kMaxAbsValue)
      fail(arg, "|value| must be <= 2^20 (values are quantised to multiples of 2^-32), got " +
                    std::to_string(x[k]) + " at index " + std::to_string(k));
  }
}

// Indexed binary max-heap over claims ordered by (gain descending, index ascending).
template <class G>
class GainHeap {
 public:
  GainHeap(const std::vector<G>& gain, int64_t n) : gain_(gain), heap_(n), pos_(n) {
    for (int32_t c = 0; c < n; ++c) heap_[c] = pos_[c] = c;
    for (int64_t p = n / 2 - 1; p >= 0; --p) sift_down(p);
  }
  bool empty() const { return heap_.empty(); }
  int64_t top() const { return heap_[0]; }
  void pop() {
    pos_[heap_[0]] = -1;
    const int64_t last = heap_.back();
    heap_.pop_back();
    if (heap_.empty()) return;  // the top was the last element
    place(0, last);
    sift_down(0);
  }
  void update(int64_t c) {  // c's gain changed (up or down)
    const int64_t p = pos_[c];
    if (p < 0) return;
    if (p > 0 && better(c, heap_[(p - 1) / 2])) sift_up(p);
    else sift_down(p);
  }

 private:
  bool better(int64_t a, int64_t b) const { return gain_[a] > gain_[b] || (gain_[a] == gain_[b] && a < b); }
  void place(int64_t p, int64_t c) { heap_[p] = c; pos_[c] = p; }
  void sift_up(int64_t p) {
    const int64_t c = heap_[p];
    while (p > 0) {
      const int64_t parent = (p - 1) / 2;
      if (!better(c, heap_[parent])) break;
      place(p, heap_[parent]);
      p = parent;
    }
    place(p, c);
  }
  void sift_down(int64_t p) {
    const int64_t n = static_cast<int64_t>(heap_.size());
    const int64_t c = heap_[p];
    while (true) {
      int64_t child = 2 * p + 1;
      if (child >= n) break;
      if (child + 1 < n && better(heap_[child + 1], heap_[child])) ++child;
      if (!better(heap_[child], c)) break;
      place(p, heap_[child]);
      p = child;
    }
    place(p, c);
  }

  const std::vector<G>& gain_;
  std::vector<int32_t> heap_, pos_;
};

// The greedy loop, with gains of type G (int64_t when no sum can overflow it, else i128).
template <class G>
void run_greedy(const double* node_scores, int64_t n, const int64_t* edge_i, const int64_t* edge_j,
                const double* edge_weight, int64_t n_edges, const double* self_penalty, PruneResult& r) {
  std::vector<G> gain(n);
  i128 F = 0;
  for (int64_t c = 0; c < n; ++c) {
    const int64_t own = quantise(node_scores[c]) - (self_penalty ? quantise(self_penalty[c]) : 0);
    F += own;
    gain[c] = -G(own);
  }
  std::vector<int32_t> off(n + 1, 0);
  for (int64_t e = 0; e < n_edges; ++e) {
    const int64_t a = edge_i[e], b = edge_j[e];
    const int64_t q = quantise(edge_weight[e]);
    F += q;
    gain[a] -= q;
    gain[b] -= q;
    ++off[a + 1];
    ++off[b + 1];
  }
  for (int64_t c = 0; c < n; ++c) off[c + 1] += off[c];
  // Adjacency as edge ids (4 bytes an entry): the other end and the weight are read from
  // the inputs when a claim is removed.
  std::vector<int32_t> adj(off[n]);
  {
    std::vector<int32_t> fill(off.begin(), off.end() - 1);
    for (int64_t e = 0; e < n_edges; ++e) {
      adj[fill[edge_i[e]]++] = static_cast<int32_t>(e);
      adj[fill[edge_j[e]]++] = static_cast<int32_t>(e);
    }
  }

  r.keep.assign(n, 1);
  GainHeap<G> heap(gain, n);
  while (!heap.empty()) {
    check_interrupt();
    const int64_t c = heap.top();
    if (gain[c] <= 0) break;
    heap.pop();
    r.keep[c] = 0;
    r.removal_order.push_back(c);
    F += gain[c];
    // Edges between c and a remaining claim d no longer count in F: removing d later
    // loses w_e less.
    for (int32_t x = off[c]; x < off[c + 1]; ++x) {
      const int32_t e = adj[x];
      const int64_t d = edge_i[e] == c ? edge_j[e] : edge_i[e];
      if (!r.keep[d]) continue;
      gain[d] += quantise(edge_weight[e]);
      heap.update(d);
    }
  }
  r.F = static_cast<double>(F) / kQuantScale;
}

}  // namespace

PruneResult greedy_prune(const double* node_scores, int64_t n, const int64_t* edge_i, const int64_t* edge_j,
                         const double* edge_weight, int64_t n_edges, const double* self_penalty) {
  if (n < 0) fail("node_scores", "negative length");
  if (n_edges < 0) fail("edge_i", "negative length");
  if (n >= (int64_t(1) << 31) || 2 * n_edges >= (int64_t(1) << 31))
    fail("edge_i", "at most 2^31 - 1 claims and 2^30 - 1 edges are supported");
  check_values(node_scores, n, "node_scores");
  if (self_penalty) check_values(self_penalty, n, "self_penalty");
  check_values(edge_weight, n_edges, "edge_weight");
  double max_own = 0.0, max_w = 0.0;
  for (int64_t c = 0; c < n; ++c)
    max_own = std::max(max_own, std::fabs(node_scores[c]) + (self_penalty ? std::fabs(self_penalty[c]) : 0.0));
  for (int64_t e = 0; e < n_edges; ++e) {
    const int64_t a = edge_i[e], b = edge_j[e];
    if (a < 0 || a >= n)
      fail("edge_i", "index " + std::to_string(a) + " at position " + std::to_string(e) + " out of range [0, " +
                         std::to_string(n) + ")");
    if (b < 0 || b >= n)
      fail("edge_j", "index " + std::to_string(b) + " at position " + std::to_string(e) + " out of range [0, " +
                         std::to_string(n) + ")");
    if (a == b)
      fail("edge_j", "self-loop: edge_i[" + std::to_string(e) + "] == edge_j[" + std::to_string(e) + "] == " +
                         std::to_string(a) + " (use self_penalty for a claim's own weight)");
    max_w = std::max(max_w, std::fabs(edge_weight[e]));
  }
  // A gain is -own(c) minus at most deg(c) <= E edge weights: int64 holds every partial sum
  // when (max|own| + E * max|w|) * 2^32 (+1 per rounding) stays below 2^62.
  PruneResult r;
  const double bound = (max_own + static_cast<double>(n_edges) * max_w) * kQuantScale + 2.0 * (n_edges + 1);
  if (bound < 4.6e18)
    run_greedy<int64_t>(node_scores, n, edge_i, edge_j, edge_weight, n_edges, self_penalty, r);
  else
    run_greedy<i128>(node_scores, n, edge_i, edge_j, edge_weight, n_edges, self_penalty, r);
  return r;
}

}  // namespace rrag
