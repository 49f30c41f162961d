#include "kernels/triple_reliability.hpp"

#include <algorithm>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "kernels/checks.hpp"
#include "kernels/parallel.hpp"
#include "kernels/runtime.hpp"

namespace rrag {
namespace {

// A task is up to ~kMaxChainGroup chains of one question: they stay in L1/L2 while the
// question's triples stream past in blocks of kTripleBlock rows (a multiple of every ISA's
// gemm_nr). A question whose chains fit one task has each block read from memory once (its
// norms) and then used from cache by dot_tile, so every row is read once and nothing is
// packed. A question with more chains ("shared") has its triples' norms and packed panels
// made once, and each task packs its chains and runs the packed GEMM micro-kernel against
// them: ~20 % faster than dot_tile at 10,000 chains x 200 triples (no horizontal reductions),
// while for 20 chains a question packing would cost more than it saves.
constexpr int64_t kTripleBlock = 256;
constexpr int64_t kMaxChainGroup = 64;
// A chain's top-k buffer holds k + max(k, kBufferSlack) keys before it is cut back to k.
constexpr int64_t kBufferSlack = 64;
// The guessed-threshold path (top_by_guess) for k <= kGuessK and at most kGuessCandidates
// candidates (ranking by counting costs candidates squared).
constexpr int64_t kGuessK = 32;
constexpr int64_t kGuessCandidates = 64;
// Local triple positions leave the low half of every available key non-zero (see rank_key).
constexpr int64_t kMaxQuestionTriples = int64_t(0xFFFFFFFFu);

// A unique sort key per (score, local triple position): a larger key ranks first. The high 32
// bits map the score's float32 bits to an unsigned integer in the order of the values (+0.0
// and -0.0 made one, so they tie; NaN, possible only with check_finite=false, below every
// number); the low 32 bits are 0xFFFFFFFF - position, so equal scores rank by lower position.
// Every available triple's key is >= 1, so key 0 marks a used triple and never enters a top-k.
// With unique keys the top-k set and its order are one fixed answer, however it is computed.
inline uint64_t rank_key(float s, int64_t local) {
  uint32_t bits;
  std::memcpy(&bits, &s, sizeof bits);
  if ((bits << 1) == 0) bits = 0;
  uint32_t u = (bits >> 31) ? ~bits : (bits | 0x80000000u);
  if (s != s) u = 0;
  return (uint64_t(u) << 32) | uint64_t(0xFFFFFFFFu - uint32_t(local));
}

inline float key_score(uint64_t key) {
  const uint32_t u = uint32_t(key >> 32);
  const uint32_t bits = (u >> 31) ? (u & 0x7FFFFFFFu) : ~u;
  float s;
  std::memcpy(&s, &bits, sizeof s);
  return s;
}

inline int64_t key_position(uint64_t key) { return int64_t(0xFFFFFFFFu - uint32_t(key)); }

// The k largest keys offered, without ordering them as they come: a key above the floor is
// appended; a full buffer is cut back to its k largest with nth_element and the floor rises to
// the k-th. Scores below the floor's score are rejected before any key is built: once the floor
// has risen that is most triples, with one well-predicted branch each.
class TopKeys {
 public:
  // buf holds cap + 1 keys (a key is stored before it is counted); 1 <= k < cap.
  void reset(uint64_t* buf, int64_t k, int64_t cap) {
    buf_ = buf;
    k_ = k;
    cap_ = cap;
    size_ = 0;
    floor_ = 0;
    floor_score_ = -std::numeric_limits<float>::infinity();
  }
  // The scores of local triple positions local0 .. local0 + n - 1; used (may be null) marks
  // the triples to leave out.
  void offer(const float* scores, const bool* used, int64_t n, int64_t local0) {
    // Locals, not members: a key store could alias the members, which would then go through
    // memory on every triple.
    int64_t size = size_;
    uint64_t* const buf = buf_;
    for (int64_t j = 0; j < n; ++j) {
      const float s = scores[j];
      if (s < floor_score_) continue;  // NaN is never rejected here (its key is, below)
      const uint64_t keep = used != nullptr && used[j] ? 0 : ~uint64_t(0);
      const uint64_t key = rank_key(s, local0 + j) & keep;
      buf[size] = key;
      size += key > floor_ ? 1 : 0;
      if (size == cap_) size = shrink(size);
    }
    size_ = size;
  }
  // Sorts the kept keys descending; returns how many there are (<= k).
  int64_t finish() {
    if (size_ > k_) size_ = shrink(size_);
    std::sort(buf_, buf_ + size_, std::greater<uint64_t>());
    return size_;
  }
  const uint64_t* keys() const { return buf_; }

 private:
  int64_t shrink(int64_t size) {
    std::nth_element(buf_, buf_ + (k_ - 1), buf_ + size, std::greater<uint64_t>());
    floor_ = buf_[k_ - 1];
    floor_score_ = key_score(floor_);
    return k_;
  }
  uint64_t* buf_ = nullptr;
  int64_t k_ = 0, cap_ = 0, size_ = 0;
  uint64_t floor_ = 0;
  float floor_score_ = 0.0f;
};

// The top k (k <= kGuessK) of one chain whose question fits one block, from a threshold guess
// carried over from the previous chain of the task: the positions with score >= guess are
// gathered without branches. When at least k of them are available they hold the whole top k
// (the k-th best available score is then >= guess); so do all of them when guess is -inf and
// none is NaN. Each candidate's rank is counted, again without a branch on the data: the
// candidates ranking before it are those of higher score, or of equal score (-0.0 == +0.0)
// and lower position -- rank_key's order, so the ranks are 0 .. m - 1 and the answer is exact
// whatever the guess; a good guess only makes it cheap. Writes the keys, descending, to top
// (k + 1 slots) and returns how many (<= k), or -1 when the guess let through fewer than k or
// more than kGuessCandidates positions (the caller then takes TopKeys). next_guess gets the
// score at rank guess_rank(k) (or the last): the next chain then lets through about 2k
// positions, rarely fewer than k (simulated on random embeddings, 10,000 chains x 200 triples,
// k = 20, 10 % used: 5 % of the chains fall back, against 10 % for rank 1.5k).
inline int64_t guess_rank(int64_t k) { return 2 * k; }

int64_t top_by_guess(const float* scores, const bool* used, int64_t n, int64_t local0, int64_t k, float guess,
                     uint64_t* top, float& next_guess) {
  int32_t pos[kTripleBlock];
  int32_t m = 0, available = 0;
  for (int32_t j = 0; j < int32_t(n); ++j) {
    const int32_t avail = used != nullptr && used[j] ? 0 : 1;
    pos[m] = j;
    m += avail & (scores[j] >= guess ? 1 : 0);
    available += avail;
  }
  const bool all_available = guess == -std::numeric_limits<float>::infinity() && m == available;
  if (m > kGuessCandidates || (m < k && !all_available)) return -1;
  float cand[kGuessCandidates];
  for (int32_t c = 0; c < m; ++c) cand[c] = scores[pos[c]];
  const int32_t target = int32_t(std::min<int64_t>(m - 1, guess_rank(k)));
  next_guess = -std::numeric_limits<float>::infinity();
  for (int32_t c = 0; c < m; ++c) {
    const float s = cand[c];
    const int32_t p = pos[c];
    int32_t rank = 0;  // int32 lanes: the compiler vectorises this count
    for (int32_t o = 0; o < m; ++o) rank += int32_t(cand[o] > s) | (int32_t(cand[o] == s) & int32_t(pos[o] < p));
    top[std::min<int64_t>(rank, k)] = rank_key(s, local0 + p);  // slot k takes every key past the top k
    if (rank == target) next_guess = s;
  }
  return std::min<int64_t>(m, k);
}

struct Task {
  int64_t question, lo, hi;  // chains order[lo .. hi) (chains sorted by question)
  bool shared;               // the question's chains span several tasks (see kTripleBlock)
};

struct Block {
  int64_t lo, hi;    // triple rows
  int64_t packed;    // where its panels start in the shared packed copy
};

}  // namespace

void check_triple_k(int64_t k) {
  if (k < 1) fail("k", "must be >= 1, got " + std::to_string(k));
}

void triple_reliability_segmented(const float* query_emb, int64_t n_chains, const float* triple_emb,
                                  int64_t n_triples, int64_t d, const double* credibility,
                                  const int64_t* triple_offsets, int64_t n_questions,
                                  const int64_t* chain_question, const bool* used, int64_t n_used,
                                  double alpha, int64_t k, float* out_scores, int64_t* out_indices,
                                  bool check_finite) {
  // ---- value checks, all before any allocation that depends on k
  check_dim(d, "query_emb");
  if (!(alpha >= 0.0 && alpha <= 1.0)) fail("alpha", "must be in [0, 1], got " + std::to_string(alpha));
  check_triple_k(k);
  check_offsets(triple_offsets, n_questions, n_triples, "triple_offsets");
  for (int64_t q = 0; q < n_questions; ++q)
    if (triple_offsets[q + 1] - triple_offsets[q] > kMaxQuestionTriples)
      fail("triple_offsets", "question " + std::to_string(q) + " holds " +
                                 std::to_string(triple_offsets[q + 1] - triple_offsets[q]) +
                                 " triples, more than 2**32 - 1");
  for (int64_t t = 0; t < n_triples; ++t)
    if (!(credibility[t] >= 0.0 && credibility[t] <= 10.0))  // false for NaN too
      fail("credibility", "must be finite and in [0, 10] (first bad at index " + std::to_string(t) + ": " +
                              std::to_string(credibility[t]) + ")");
  // Chains by question (a stable counting sort), and where each chain's slice of `used` starts.
  std::vector<int64_t> chain_start(size_t(n_questions + 1), 0);
  for (int64_t b = 0; b < n_chains; ++b) {
    const int64_t q = chain_question[b];
    if (q < 0 || q >= n_questions)
      fail("chain_question", "index " + std::to_string(q) + " at position " + std::to_string(b) +
                                 " out of range [0, number of questions = " + std::to_string(n_questions) + ")");
    ++chain_start[size_t(q + 1)];
  }
  std::vector<int64_t> used_at;
  if (used != nullptr) {
    used_at.resize(size_t(n_chains));
    // Stops once past n_used, so the sum cannot overflow.
    int64_t at = 0;
    for (int64_t b = 0; b < n_chains && at <= n_used; ++b) {
      used_at[size_t(b)] = at;
      at += triple_offsets[chain_question[b] + 1] - triple_offsets[chain_question[b]];
    }
    if (at > n_used)
      fail("used", "the chains' question sizes sum to more than its length " + std::to_string(n_used));
    if (at < n_used)
      fail("used", "expected length " + std::to_string(at) + " (the chains' question sizes summed), got " +
                       std::to_string(n_used));
  }
  for (int64_t q = 0; q < n_questions; ++q) chain_start[size_t(q + 1)] += chain_start[size_t(q)];
  std::vector<int64_t> order(static_cast<size_t>(n_chains));
  {
    std::vector<int64_t> fill(chain_start.begin(), chain_start.end() - 1);
    for (int64_t b = 0; b < n_chains; ++b) order[size_t(fill[size_t(chain_question[b])]++)] = b;
  }

  // ---- tasks
  int64_t k_eff = 0;  // the longest top-k list any chain keeps
  for (int64_t q = 0; q < n_questions; ++q)
    if (chain_start[size_t(q + 1)] > chain_start[size_t(q)])
      k_eff = std::max(k_eff, std::min(k, triple_offsets[q + 1] - triple_offsets[q]));
  // Fewer chains per task for a long list, so that a worker's buffers stay bounded; whole
  // panels of the packed GEMM (gemm_mr rows).
  const auto& prims = primitives();
  const int64_t gm = prims.gemm_mr, gn = prims.gemm_nr;
  const int64_t group = std::max<int64_t>(1, std::min<int64_t>((int64_t(1) << 16) / std::max<int64_t>(k_eff, 1),
                                                               kMaxChainGroup) / gm) * gm;
  const int64_t cap = k_eff + std::max(k_eff, kBufferSlack);
  std::vector<Task> tasks;
  std::vector<Block> shared_blocks;
  int64_t packed_floats = 0;  // the shared questions' triples, packed in panels of gn rows
  const int64_t block_floats = (kTripleBlock + gn - 1) / gn * gn * d;  // one whole block, packed
  std::vector<int64_t> packed_at;  // per question: where its panels start (shared ones only)
  uint64_t work = 0;  // multiply-adds, for the thread count
  for (int64_t q = 0; q < n_questions; ++q) {
    const int64_t c0 = chain_start[size_t(q)], c1 = chain_start[size_t(q + 1)], n_c = c1 - c0;
    const int64_t t0 = triple_offsets[q], t1 = triple_offsets[q + 1], n_t = t1 - t0;
    if (n_c == 0) {
      // No chain reads these triples; they are still checked, as every backend does.
      if (check_finite && n_t > 0) tasks.push_back({q, c0, c0, false});
      work += uint64_t(n_t) * uint64_t(d);
      continue;
    }
    const int64_t pieces = (n_c + group - 1) / group, per = (n_c + pieces - 1) / pieces;
    const bool shared = pieces > 1 && n_t > 0;
    for (int64_t c = c0; c < c1; c += per) tasks.push_back({q, c, std::min(c1, c + per), shared});
    if (shared) {
      if (packed_at.empty()) packed_at.assign(size_t(n_questions), -1);
      packed_at[size_t(q)] = packed_floats;
      // Block number j of the question starts j * block_floats after the question's panels.
      for (int64_t r = t0; r < t1; r += kTripleBlock) {
        const int64_t hi = std::min(t1, r + kTripleBlock);
        shared_blocks.push_back({r, hi, packed_floats});
        packed_floats += (hi - r + gn - 1) / gn * gn * d;
      }
    }
    work += (uint64_t(n_c) + 1) * uint64_t(n_t) * uint64_t(d);
  }
  // Parallel from ~2M multiply-adds (about a millisecond on one core) on.
  const int64_t n_tasks = static_cast<int64_t>(tasks.size());
  const int workers = workers_for(static_cast<int64_t>(std::min<uint64_t>(work, uint64_t(1) << 62)),
                                  int64_t(1) << 21, std::max<int64_t>(n_tasks, 1));
  check_budget(bytes_for({workers, group, cap + 1}, sizeof(uint64_t)), "k", "the per-worker top-k buffers");
  check_budget(bytes_for({packed_floats}, sizeof(float)), "triple_emb",
               "the packed copy of the triples shared by several tasks");

  // ---- stage 1: norms, credibility terms and packed panels of the shared questions' triples
  const float alpha32 = static_cast<float>(alpha);
  BadRowTracker bad_chains, bad_triples;
  // inv[r] = inv|t_r| and w[r] = float((1 - alpha) * c / 10) for triples [lo, hi).
  auto triple_terms = [&](int64_t lo, int64_t hi, float* inv, float* w) {
    prims.row_sqnorms(triple_emb + lo * d, hi - lo, d, inv);
    for (int64_t r = 0; r < hi - lo; ++r) {
      if (check_finite && !finite_sqnorm(inv[r])) bad_triples.report(lo + r);
      inv[r] = inverse_norm(inv[r]);
      w[r] = static_cast<float>((1.0 - alpha) * credibility[lo + r] / 10.0);
    }
  };
  std::vector<float> shared_inv, shared_w, shared_packed(static_cast<size_t>(packed_floats));
  if (!shared_blocks.empty()) {
    shared_inv.resize(size_t(n_triples));
    shared_w.resize(size_t(n_triples));
  }
  parallel_for(static_cast<int64_t>(shared_blocks.size()), 4, workers, [&](int64_t b0, int64_t b1, int) {
    for (int64_t b = b0; b < b1; ++b) {
      const Block& blk = shared_blocks[size_t(b)];
      triple_terms(blk.lo, blk.hi, shared_inv.data() + blk.lo, shared_w.data() + blk.lo);
      prims.pack_panels(triple_emb + blk.lo * d, blk.hi - blk.lo, d, int(gn), shared_packed.data() + blk.packed);
    }
  });

  // ---- stage 2: one task = a group of chains against all triples of its question
  struct Scratch {
    std::vector<float> chains, packed, tile, inv_q, t_inv, t_w;
    std::vector<uint64_t> keys, guessed;
    std::vector<TopKeys> tops;
  };
  std::vector<std::unique_ptr<Scratch>> scratch(static_cast<size_t>(workers));
  auto scratch_of = [&](int worker) -> Scratch& {
    auto& s = scratch[static_cast<size_t>(worker)];
    if (!s) {
      s.reset(new Scratch);
      s->chains.resize(size_t(group * d));
      s->packed.resize(size_t(group * d));  // group is whole gm-row panels
      s->tile.resize(size_t(group * kTripleBlock));
      s->inv_q.resize(size_t(group));
      s->t_inv.resize(size_t(kTripleBlock));
      s->t_w.resize(size_t(kTripleBlock));
      // A one-block question's fallback may keep up to guess_rank(kGuessK) + 1 keys in tops[0].
      const int64_t fallback = guess_rank(kGuessK) + 1;
      s->keys.resize(size_t(std::max(group * (cap + 1), fallback + std::max(fallback, kBufferSlack) + 1)));
      s->guessed.resize(size_t(kGuessK + 1));
      s->tops.resize(size_t(group));
    }
    return *s;
  };
  // The chains of a task as one row-major block: in place when they are consecutive rows of
  // query_emb (the single form, or chains listed question by question), else gathered.
  auto chain_rows = [&](const Task& task, float* gather) -> const float* {
    const int64_t first = order[size_t(task.lo)];
    bool consecutive = true;
    for (int64_t i = task.lo + 1; i < task.hi && consecutive; ++i)
      consecutive = order[size_t(i)] == first + (i - task.lo);
    if (consecutive) return query_emb + first * d;
    for (int64_t i = task.lo; i < task.hi; ++i)
      std::memcpy(gather + (i - task.lo) * d, query_emb + order[size_t(i)] * d, size_t(d) * sizeof(float));
    return gather;
  };
  auto write_row = [&](int64_t b, const uint64_t* keys, int64_t count, int64_t first_triple) {
    float* s = out_scores + b * k;
    int64_t* idx = out_indices + b * k;
    for (int64_t r = 0; r < count; ++r) {
      s[r] = key_score(keys[r]);
      idx[r] = first_triple + key_position(keys[r]);
    }
    std::fill(s + count, s + k, -std::numeric_limits<float>::infinity());
    std::fill(idx + count, idx + k, int64_t(-1));
  };

  // dots[i * (hi - lo) + j] = <chain i, triple lo + j> by dot_tile (no packing). Given the task
  // that follows in this worker's run, its chains (the rows from its first chain on: exact when
  // its chains are consecutive) and first triples are fetched while the tile computes: one
  // core has only so many misses in flight, and the stream would otherwise pause.
  auto unpacked_dots = [&](const float* chains, int64_t n_c, int64_t lo, int64_t hi, const Task* following,
                           float* dots) {
    simd::PrefetchSpans next;
    if (following != nullptr) {
      const int64_t f0 = triple_offsets[following->question];
      const int64_t f1 = std::min(triple_offsets[following->question + 1], f0 + kTripleBlock);
      if (following->hi > following->lo) {
        const float* first = query_emb + order[size_t(following->lo)] * d;
        next.next[0] = reinterpret_cast<const char*>(first);
        next.end[0] = reinterpret_cast<const char*>(first + (following->hi - following->lo) * d);
      }
      next.next[1] = reinterpret_cast<const char*>(triple_emb + f0 * d);
      next.end[1] = reinterpret_cast<const char*>(triple_emb + f1 * d);
    }
    prims.dot_tile(chains, n_c, triple_emb + lo * d, hi - lo, d, dots, hi - lo, &next);
  };

  // Runs of consecutive tasks per block, so that a task can prefetch its successor's rows, but
  // at least ~8 blocks a worker, so that a preempted worker holds up only a small share.
  const int64_t grain = std::clamp<int64_t>(n_tasks / (8 * int64_t(workers)), 1, 8);
  parallel_for(n_tasks, grain, workers, [&](int64_t task_lo, int64_t task_hi, int worker) {
    Scratch& s = scratch_of(worker);
    for (int64_t ti = task_lo; ti < task_hi; ++ti) {
      const Task& task = tasks[size_t(ti)];
      const int64_t t0 = triple_offsets[task.question], t1 = triple_offsets[task.question + 1];
      const int64_t n_c = task.hi - task.lo, n_t = t1 - t0;
      const float* chains = nullptr;
      if (n_c > 0) {
        chains = chain_rows(task, s.chains.data());
        prims.row_sqnorms(chains, n_c, d, s.inv_q.data());
        for (int64_t i = 0; i < n_c; ++i) {
          if (check_finite && !finite_sqnorm(s.inv_q[size_t(i)])) bad_chains.report(order[size_t(task.lo + i)]);
          s.inv_q[size_t(i)] = inverse_norm(s.inv_q[size_t(i)]);
        }
        if (task.shared) prims.pack_panels(chains, n_c, d, int(gm), s.packed.data());
      }
      // A question within one block: each chain's row is complete once its tile is, so it is
      // selected right there (guessed threshold first, TopKeys when the guess fails); longer
      // questions keep a TopKeys per chain across their blocks.
      const int64_t k_q = std::min(k, n_t), cap_q = k_q + std::max(k_q, kBufferSlack);
      const bool one_block = n_t <= kTripleBlock;
      if (!one_block)
        for (int64_t i = 0; i < n_c; ++i) s.tops[size_t(i)].reset(s.keys.data() + i * (cap + 1), k_q, cap_q);
      float guess = -std::numeric_limits<float>::infinity();
      for (int64_t lo = t0; lo < t1; lo += kTripleBlock) {
        const int64_t hi = std::min(t1, lo + kTripleBlock), n_r = hi - lo;
        const float* inv_t = shared_inv.data() + lo;
        const float* w = shared_w.data() + lo;
        if (!task.shared) {
          triple_terms(lo, hi, s.t_inv.data(), s.t_w.data());
          inv_t = s.t_inv.data();
          w = s.t_w.data();
        }
        if (n_c == 0) continue;
        if (task.shared) {
          // tile = cos, scaled in the micro-kernel: (dot * inv|q|) * inv|t|.
          const float* panels = shared_packed.data() + packed_at[size_t(task.question)] +
                                (lo - t0) / kTripleBlock * block_floats;
          prims.gemm_packed(s.packed.data(), n_c, panels, n_r, d, s.tile.data(), n_r, s.inv_q.data(), inv_t);
        } else {
          const Task* following = hi == t1 && ti + 1 < task_hi ? &tasks[size_t(ti + 1)] : nullptr;
          unpacked_dots(chains, n_c, lo, hi, following, s.tile.data());
        }
        const int64_t local = lo - t0;
        for (int64_t i = 0; i < n_c; ++i) {
          float* row = s.tile.data() + i * n_r;
          const float iq = s.inv_q[size_t(i)];
          // R = alpha * cos + (1 - alpha) * c / 10, cos = (dot * inv|q|) * inv|t| (cosine_matrix's
          // scaling order; the packed GEMM applied it already).
          if (task.shared)
            for (int64_t j = 0; j < n_r; ++j) row[j] = alpha32 * row[j] + w[j];
          else
            for (int64_t j = 0; j < n_r; ++j) row[j] = alpha32 * ((row[j] * iq) * inv_t[j]) + w[j];
          const int64_t b = order[size_t(task.lo + i)];
          const bool* u = used != nullptr ? used + used_at[size_t(b)] + local : nullptr;
          if (!one_block) {
            s.tops[size_t(i)].offer(row, u, n_r, local);
            continue;
          }
          int64_t count = k_q <= kGuessK ? top_by_guess(row, u, n_r, local, k_q, guess, s.guessed.data(), guess) : -1;
          const uint64_t* keys = s.guessed.data();
          if (count < 0) {
            // Also keeps the key at guess_rank, the next chain's guess.
            const int64_t k_sel = k_q <= kGuessK ? std::min(n_r, guess_rank(k_q) + 1) : k_q;
            TopKeys& top = s.tops[0];
            top.reset(s.keys.data(), k_sel, k_sel + std::max(k_sel, kBufferSlack));
            top.offer(row, u, n_r, local);
            const int64_t kept = top.finish();
            keys = top.keys();
            count = std::min(kept, k_q);
            guess = kept > 0 ? key_score(keys[kept - 1]) : -std::numeric_limits<float>::infinity();
          }
          write_row(b, keys, count, t0);
        }
      }
      if (n_t == 0 || !one_block)
        for (int64_t i = 0; i < n_c; ++i) {
          TopKeys& top = s.tops[size_t(i)];
          const int64_t count = n_t > 0 ? top.finish() : 0;
          write_row(order[size_t(task.lo + i)], top.keys(), count, t0);
        }
    }
  });
  bad_chains.throw_if_bad("query_emb");
  bad_triples.throw_if_bad("triple_emb");
}

void triple_reliability(const float* query_emb, int64_t n_chains, const float* triple_emb, int64_t n_triples,
                        int64_t d, const double* credibility, const bool* used, double alpha, int64_t k,
                        float* out_scores, int64_t* out_indices, bool check_finite) {
  const int64_t offsets[2] = {0, n_triples};
  const std::vector<int64_t> question(size_t(n_chains), 0);
  triple_reliability_segmented(query_emb, n_chains, triple_emb, n_triples, d, credibility, offsets, 1,
                               question.data(), used, used != nullptr ? n_chains * n_triples : 0, alpha, k,
                               out_scores, out_indices, check_finite);
}

}  // namespace rrag
