#include "kernels/topk_cosine.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/checks.hpp"
#include "kernels/parallel.hpp"
#include "kernels/row_norms.hpp"
#include "kernels/runtime.hpp"

namespace rrag {
namespace {

struct Candidate {
  float score;
  int64_t index;
};

// The result order: higher score first, then lower index; NaN (possible only with
// check_finite=false) ranks after every number. A strict total order, so the top-k set is
// unique: however the corpus is split between threads, merging the per-thread top-k lists
// gives the same answer.
inline bool ranks_before(const Candidate& a, const Candidate& b) {
  const bool a_nan = std::isnan(a.score), b_nan = std::isnan(b.score);
  if (a_nan || b_nan) return a_nan != b_nan ? b_nan : a.index < b.index;
  return a.score > b.score || (a.score == b.score && a.index < b.index);
}

// Bounded heap whose front is the worst kept candidate.
class TopK {
 public:
  void reset(Candidate* storage, int64_t k) { heap_ = storage; k_ = k; size_ = 0; }
  // Cheap pre-test before offer(): once full, a candidate can only enter with a score at
  // least the worst kept one's (or when that one is NaN).
  bool may_enter(float score) const {
    return size_ < k_ || score >= heap_[0].score || std::isnan(heap_[0].score);
  }
  void offer(float score, int64_t index) {
    const Candidate c{score, index};
    if (size_ < k_) {
      heap_[size_++] = c;
      std::push_heap(heap_, heap_ + size_, ranks_before);
    } else if (ranks_before(c, heap_[0])) {
      std::pop_heap(heap_, heap_ + size_, ranks_before);
      heap_[size_ - 1] = c;
      std::push_heap(heap_, heap_ + size_, ranks_before);
    }
  }
  int64_t size() const { return size_; }

 private:
  Candidate* heap_ = nullptr;
  int64_t k_ = 0, size_ = 0;
};

}  // namespace

void topk_cosine(const float* queries, int64_t n_queries, const float* corpus, int64_t n_corpus,
                 int64_t d, int64_t k, float* out_scores, int64_t* out_indices, bool check_finite) {
  check_dim(d, "queries");
  if (k < 1 || k > n_corpus)
    fail("k", "must satisfy 1 <= k <= len(corpus) = " + std::to_string(n_corpus) + ", got " + std::to_string(k));
  std::vector<float> inv_q(n_queries), inv_c(n_corpus);
  inverse_row_norms(queries, n_queries, d, inv_q.data(), check_finite, "queries");
  inverse_row_norms(corpus, n_corpus, d, inv_c.data(), check_finite, "corpus");
  if (n_queries == 0) return;

  const auto& prims = primitives();
  const int gm = prims.gemm_mr, gn = prims.gemm_nr;
  // A tile is 8 query panels x 16 corpus panels. Queries are handled in groups whose packed
  // copy is shared by all workers; each worker keeps a heap per query of the group (so a
  // group is bounded by its heap memory) and the corpus streams past once per group.
  const int64_t tile_q = 8 * gm, chunk_rows = 16 * gn;
  const int64_t group = std::max<int64_t>(tile_q, std::min<int64_t>(4096, (int64_t(1) << 20) / k) / tile_q * tile_q);
  const int64_t n_chunks = (n_corpus + chunk_rows - 1) / chunk_rows;
  const int64_t group_rows = std::min(group, n_queries);
  // Parallel from ~2M multiply-adds (about a millisecond on one core) on.
  const uint64_t fmas = std::min<uint64_t>(bytes_for({n_queries, n_corpus, d}, 1), uint64_t(1) << 62);
  const int threads = workers_for(static_cast<int64_t>(fmas), int64_t(1) << 21);

  check_budget(bytes_for({threads, group_rows, k}, sizeof(Candidate) + sizeof(int64_t)), "k",
               "the per-worker top-k heaps");
  std::vector<float> q_packed(size_t(((group_rows + gm - 1) / gm) * gm * d));
  std::vector<Candidate> pool(size_t(threads) * size_t(group_rows) * size_t(k));
  std::vector<int64_t> kept(size_t(threads) * size_t(group_rows));
  struct WorkerState {
    std::vector<float> c_packed, tile;
    std::vector<TopK> heaps;
    int64_t group_start = -1;  // the group its heaps were reset for
  };
  std::vector<WorkerState> state(static_cast<size_t>(threads));

  for (int64_t g0 = 0; g0 < n_queries; g0 += group) {
    const int64_t ng = std::min(group, n_queries - g0);
    const int64_t n_panels = (ng + gm - 1) / gm, n_tiles_q = (ng + tile_q - 1) / tile_q;
    // Few corpus chunks: also split the group's query tiles so every worker has work.
    const int64_t slices = std::clamp<int64_t>((2 * threads + n_chunks - 1) / n_chunks, 1, n_tiles_q);
    const int64_t tiles_per_slice = (n_tiles_q + slices - 1) / slices;
    std::fill(kept.begin(), kept.end(), 0);  // workers that get no task keep nothing

    parallel_for(n_panels, 16, threads, [&](int64_t p0, int64_t p1, int) {
      for (int64_t p = p0; p < p1; ++p)
        prims.pack_panels(queries + (g0 + p * gm) * d, std::min<int64_t>(gm, ng - p * gm), d, gm,
                          q_packed.data() + p * gm * d);
    });

    parallel_for(n_chunks * slices, 1, threads, [&](int64_t task, int64_t, int worker) {
      WorkerState& ws = state[static_cast<size_t>(worker)];
      if (ws.group_start != g0) {
        ws.c_packed.resize(size_t(chunk_rows * d));
        ws.tile.resize(size_t(tile_q * chunk_rows));
        ws.heaps.resize(size_t(ng));
        Candidate* mine = pool.data() + size_t(worker) * ng * k;
        for (int64_t i = 0; i < ng; ++i) ws.heaps[i].reset(mine + i * k, k);
        ws.group_start = g0;
      }
      const int64_t c0 = (task / slices) * chunk_rows, nc = std::min(chunk_rows, n_corpus - c0);
      const int64_t t_lo = (task % slices) * tiles_per_slice, t_hi = std::min(n_tiles_q, t_lo + tiles_per_slice);
      if (t_lo < t_hi) {
        prims.pack_panels(corpus + c0 * d, nc, d, gn, ws.c_packed.data());
        for (int64_t tq = t_lo; tq < t_hi; ++tq) {
          const int64_t q0 = tq * tile_q, nq = std::min(tile_q, ng - q0);
          prims.gemm_packed(q_packed.data() + q0 * d, nq, ws.c_packed.data(), nc, d, ws.tile.data(), nc, nullptr,
                            nullptr);
          for (int64_t i = 0; i < nq; ++i) {
            TopK& heap = ws.heaps[q0 + i];
            const float* row = ws.tile.data() + i * nc;
            const float iq = inv_q[g0 + q0 + i];
            for (int64_t j = 0; j < nc; ++j) {
              // Same formula as cosine_matrix, so the scores agree bitwise.
              const float s = (row[j] * iq) * inv_c[c0 + j];
              if (heap.may_enter(s)) heap.offer(s, c0 + j);
            }
          }
        }
      }
      for (int64_t i = 0; i < ng; ++i) kept[size_t(worker) * ng + i] = ws.heaps[i].size();
    });

    // The top-k of the union of the workers' top-k lists: the same set however the corpus was
    // split (ranks_before is a strict total order), sorted.
    parallel_for(ng, 64, threads, [&](int64_t i0, int64_t i1, int) {
      std::vector<Candidate> merged;
      merged.reserve(size_t(threads * k));
      for (int64_t i = i0; i < i1; ++i) {
        merged.clear();
        for (int t = 0; t < threads; ++t) {
          const Candidate* c = pool.data() + (size_t(t) * ng + i) * k;
          merged.insert(merged.end(), c, c + kept[size_t(t) * ng + i]);
        }
        std::partial_sort(merged.begin(), merged.begin() + k, merged.end(), ranks_before);
        for (int64_t j = 0; j < k; ++j) {
          out_scores[(g0 + i) * k + j] = merged[j].score;
          out_indices[(g0 + i) * k + j] = merged[j].index;
        }
      }
    });
  }
}

}  // namespace rrag
