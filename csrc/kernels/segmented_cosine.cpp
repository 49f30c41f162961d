#include "kernels/segmented_cosine.hpp"

#include <algorithm>
#include <vector>

#include "kernels/checks.hpp"
#include "kernels/parallel.hpp"
#include "kernels/row_norms.hpp"
#include "kernels/runtime.hpp"

namespace rrag {

void segmented_cosine(const float* queries, int64_t n_queries, const float* docs, int64_t n_docs,
                      int64_t d, const int64_t* doc_offsets, float* out, bool check_finite) {
  check_dim(d, "queries");
  check_offsets(doc_offsets, n_queries, n_docs, "doc_offsets");
  std::vector<float> inv_q(n_queries);
  inverse_row_norms(queries, n_queries, d, inv_q.data(), check_finite, "queries");
  // Work is split by doc chunks, not by query, so that one huge segment among many empty
  // ones still spreads over all threads; a chunk walks the segments it overlaps.
  constexpr int64_t kChunk = 256;
  const int64_t n_chunks = (n_docs + kChunk - 1) / kChunk;
  const auto& prims = primitives();
  BadRowTracker bad;
  parallel_for(n_docs, kChunk, workers_for(n_docs * d, int64_t(1) << 18, n_chunks), [&](int64_t lo, int64_t hi, int) {
    float sqnorms[kChunk];
    int64_t q = std::upper_bound(doc_offsets, doc_offsets + n_queries + 1, lo) - doc_offsets - 1;
    while (lo < hi) {
      const int64_t seg_hi = std::min(hi, doc_offsets[q + 1]);
      if (seg_hi > lo) {
        prims.dot_sqnorm_one_to_many(queries + q * d, docs + lo * d, seg_hi - lo, d, out + lo, sqnorms);
        for (int64_t r = lo; r < seg_hi; ++r) {
          const float sq = sqnorms[r - lo];
          if (check_finite && !finite_sqnorm(sq)) bad.report(r);
          out[r] = (out[r] * inv_q[q]) * inverse_norm(sq);
        }
        lo = seg_hi;
      }
      ++q;
    }
  });
  bad.throw_if_bad("docs");
}

}  // namespace rrag
