#include "kernels/lexical_align.hpp"

#include <algorithm>
#include <array>
#include <exception>
#include <limits>
#include <string>
#include <utility>

#include "kernels/checks.hpp"
#include "kernels/parallel.hpp"
#include "kernels/runtime.hpp"

namespace rrag {

namespace {

struct Block {
  int32_t i, j, size;
  bool operator<(const Block& o) const { return i != o.i ? i < o.i : (j != o.j ? j < o.j : size < o.size); }
};

// Per-thread scratch, reused across pairs.
struct Scratch {
  std::vector<std::pair<int64_t, int32_t>> b2j;  // (token, j) sorted: positions of each token, ascending j
  std::vector<int32_t> len_prev, len_cur;        // j2len of the previous / current row, indexed j + 1
  std::vector<int32_t> touched_prev, touched_cur;
  std::vector<std::array<int32_t, 4>> queue;
  std::vector<Block> blocks;
};

// difflib's get_matching_blocks of a[0:na] and b[0:nb] (no junk), offsets ia / ib added,
// appended to s.blocks unordered.
void matching_blocks(const int64_t* a, int32_t na, const int64_t* b, int32_t nb, int32_t ia, int32_t ib,
                     Scratch& s) {
  s.b2j.clear();
  for (int32_t j = 0; j < nb; ++j) s.b2j.emplace_back(b[j], j);
  std::sort(s.b2j.begin(), s.b2j.end());
  s.len_prev.assign(size_t(nb) + 1, 0);
  s.len_cur.assign(size_t(nb) + 1, 0);
  s.queue.clear();
  s.queue.push_back({0, na, 0, nb});
  while (!s.queue.empty()) {
    const auto [alo, ahi, blo, bhi] = s.queue.back();
    s.queue.pop_back();
    // find_longest_match(alo, ahi, blo, bhi): j2len[j] = length of the run ending at
    // (i, j); len_*[j + 1] holds it so that j - 1 = -1 needs no test.
    int32_t besti = alo, bestj = blo, bestsize = 0;
    s.touched_prev.clear();
    for (int32_t i = alo; i < ahi; ++i) {
      s.touched_cur.clear();
      auto it = std::lower_bound(s.b2j.begin(), s.b2j.end(), std::make_pair(a[i], blo));
      for (; it != s.b2j.end() && it->first == a[i]; ++it) {
        const int32_t j = it->second;
        if (j >= bhi) break;
        const int32_t k = s.len_prev[size_t(j)] + 1;  // j2len.get(j - 1, 0) + 1
        s.len_cur[size_t(j) + 1] = k;
        s.touched_cur.push_back(j + 1);
        if (k > bestsize) {
          besti = i - k + 1;
          bestj = j - k + 1;
          bestsize = k;
        }
      }
      for (int32_t t : s.touched_prev) s.len_prev[size_t(t)] = 0;
      std::swap(s.len_prev, s.len_cur);
      std::swap(s.touched_prev, s.touched_cur);
    }
    for (int32_t t : s.touched_prev) s.len_prev[size_t(t)] = 0;
    // Without junk the run found is maximal: difflib's extension loops never fire.
    if (bestsize) {
      s.blocks.push_back({besti + ia, bestj + ib, bestsize});
      if (alo < besti && blo < bestj) s.queue.push_back({alo, besti, blo, bestj});
      if (besti + bestsize < ahi && bestj + bestsize < bhi)
        s.queue.push_back({besti + bestsize, ahi, bestj + bestsize, bhi});
    }
  }
}

void pair_opcodes(const int64_t* a, int32_t na, const int64_t* b, int32_t nb, bool trim, Scratch& s,
                  std::vector<int32_t>& out) {
  s.blocks.clear();
  int32_t p = 0, q = 0;
  if (trim) {
    const int32_t m = std::min(na, nb);
    while (p < m && a[p] == b[p]) ++p;
    while (q < m - p && a[na - 1 - q] == b[nb - 1 - q]) ++q;
  }
  if (p) s.blocks.push_back({0, 0, p});
  if (na - q > p && nb - q > p) matching_blocks(a + p, na - q - p, b + p, nb - q - p, p, p, s);
  if (q) s.blocks.push_back({na - q, nb - q, q});
  std::sort(s.blocks.begin(), s.blocks.end());
  // Blocks are never adjacent here (a run next to another would have been found longer),
  // so difflib's merge of adjacent blocks is a no-op.
  s.blocks.push_back({na, nb, 0});
  int32_t i = 0, j = 0;
  for (const Block& blk : s.blocks) {
    int32_t tag = -1;
    if (i < blk.i && j < blk.j) tag = kTagReplace;
    else if (i < blk.i) tag = kTagDelete;
    else if (j < blk.j) tag = kTagInsert;
    if (tag >= 0) out.insert(out.end(), {tag, i, blk.i, j, blk.j});
    if (blk.size) out.insert(out.end(), {int32_t(kTagEqual), blk.i, blk.i + blk.size, blk.j, blk.j + blk.size});
    i = blk.i + blk.size;
    j = blk.j + blk.size;
  }
}

}  // namespace

LexicalOpcodes lexical_opcodes(const int64_t* tokens_a, int64_t n_tokens_a, const int64_t* offsets_a,
                               const int64_t* tokens_b, int64_t n_tokens_b, const int64_t* offsets_b,
                               int64_t n_pairs, bool trim_affixes) {
  if (n_pairs < 0) fail("offsets_a", "negative pair count");
  check_offsets(offsets_a, n_pairs, n_tokens_a, "offsets_a");
  check_offsets(offsets_b, n_pairs, n_tokens_b, "offsets_b");
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max() / 2;
  for (int64_t p = 0; p < n_pairs; ++p) {
    if (offsets_a[p + 1] - offsets_a[p] > kMax)
      fail("offsets_a", "sequence " + std::to_string(p) + " is longer than 2^30 tokens");
    if (offsets_b[p + 1] - offsets_b[p] > kMax)
      fail("offsets_b", "sequence " + std::to_string(p) + " is longer than 2^30 tokens");
  }
  std::vector<std::vector<int32_t>> per_pair(static_cast<size_t>(n_pairs));
  // A few thousand short pairs take ~2 ms on one core: below ~64k tokens a parallel region
  // costs more than it saves (and a preempted worker stalls the whole call).
  const bool parallel = n_pairs > 16 && n_tokens_a + n_tokens_b > (int64_t(1) << 16);
  // Exceptions (bad_alloc) in a block reach the caller through parallel_for.
  constexpr int64_t kBlock = 16;
  const int workers = parallel ? workers_for(n_pairs, kBlock) : 1;
  std::vector<Scratch> scratch(static_cast<size_t>(workers));
  parallel_for(n_pairs, kBlock, workers, [&](int64_t lo, int64_t hi, int worker) {
    Scratch& s = scratch[static_cast<size_t>(worker)];
    for (int64_t p = lo; p < hi; ++p) {
      check_interrupt();
      pair_opcodes(tokens_a + offsets_a[p], int32_t(offsets_a[p + 1] - offsets_a[p]), tokens_b + offsets_b[p],
                   int32_t(offsets_b[p + 1] - offsets_b[p]), trim_affixes, s, per_pair[size_t(p)]);
    }
  });
  LexicalOpcodes r;
  r.op_offsets.resize(size_t(n_pairs) + 1);
  size_t total = 0;
  r.op_offsets[0] = 0;
  for (int64_t p = 0; p < n_pairs; ++p) {
    total += per_pair[size_t(p)].size();
    r.op_offsets[size_t(p) + 1] = int64_t(total / 5);
  }
  r.ops.reserve(total);
  for (auto& v : per_pair) r.ops.insert(r.ops.end(), v.begin(), v.end());
  return r;
}

}  // namespace rrag
