#include "kernels/beam_step.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "kernels/checks.hpp"
#include "kernels/parallel.hpp"
#include "kernels/runtime.hpp"

namespace rrag {
namespace {

// Up to this many beams a row's top columns are found by repeated branch-free argmax passes
// (O(beams x C), no data-dependent branches); beyond it by a partial sort.
constexpr int64_t kArgmaxBeams = 16;
// Questions per block of the parallel loop.
constexpr int64_t kBlock = 16;
// Up to this many chains with children a question's children are merged by scanning the run
// heads (O(max_chains x runs), branch-free); beyond it with a heap (O(max_chains log runs)).
constexpr int64_t kScanRuns = 32;

// The order key of a probability or score x >= 0: its bits as an integer, which order
// non-negative doubles exactly as their values (-0.0 is first made +0.0); integer compares
// and selects make the scans below shorter dependency chains than maxsd would.
inline int64_t order_key(double x) {
  const double y = x + 0.0;
  int64_t bits;
  std::memcpy(&bits, &y, sizeof bits);
  return bits;
}

// The columns of a row's top-k slots (by p desc, column asc; NaN never) that are not below
// min_prob, best first. A column below min_prob ranks after every column at or above it and
// would be skipped, so leaving those out of the selection changes nothing. For L rows at once
// (their passes interleave: two independent dependency chains run twice as fast as one):
// row l's columns go to col[l] (room for k entries) and their count to count[l], -1 when the
// row holds no probability at all. key and at are scratch of L x n_choices entries. k <=
// kArgmaxBeams.
template <int L>
void top_columns(const double* const* row, int64_t n_choices, int64_t k, double min_prob, int64_t* key, int64_t* at,
                 int64_t* const* col, int64_t* count) {
  // The candidates, compacted (branch-free) in column order: order keys and their columns.
  int64_t present[L] = {};
  bool any[L] = {};
  for (int64_t c = 0; c < n_choices; ++c)
    for (int l = 0; l < L; ++l) {
      const double p = row[l][c];
      key[l * n_choices + present[l]] = order_key(p);
      at[l * n_choices + present[l]] = c;
      any[l] |= p == p;
      present[l] += p >= min_prob;  // false for NaN
    }
  int64_t most = 0, passes = 0;
  for (int l = 0; l < L; ++l) {
    most = std::max(most, present[l]);
    count[l] = std::min(k, present[l]);
    passes = std::max(passes, count[l]);
  }
  for (int l = 0; l < L; ++l)
    for (int64_t i = present[l]; i < most; ++i) key[l * n_choices + i] = -1;
  // Each pass takes the first largest (strict comparison: equal probabilities -> the lower
  // column first) and marks it taken (-1, below them all).
  for (int64_t j = 0; j < passes; ++j) {
    int64_t m[L], best[L];
    for (int l = 0; l < L; ++l) m[l] = -1, best[l] = 0;
    for (int64_t i = 0; i < most; ++i)
      for (int l = 0; l < L; ++l) {
        const bool larger = key[l * n_choices + i] > m[l];
        best[l] = larger ? i : best[l];
        m[l] = larger ? key[l * n_choices + i] : m[l];
      }
    for (int l = 0; l < L; ++l) {
      if (j < count[l]) col[l][j] = at[l * n_choices + best[l]];
      key[l * n_choices + best[l]] = -1;
    }
  }
  for (int l = 0; l < L; ++l)
    if (!any[l]) count[l] = -1;
}

// top_columns for one row and any k: a partial sort of the candidates; col has room for
// n_choices entries.
int64_t top_columns_sorted(const double* row, int64_t n_choices, int64_t k, double min_prob, int64_t* col) {
  bool any = false;
  int64_t present = 0;
  for (int64_t c = 0; c < n_choices; ++c) {
    any |= row[c] == row[c];
    if (row[c] >= min_prob) col[present++] = c;
  }
  const auto first = [row](int64_t a, int64_t b) { return row[a] > row[b] || (row[a] == row[b] && a < b); };
  const int64_t n = std::min(k, present);
  std::partial_sort(col, col + n, col + present, first);
  return any ? n : -1;
}

// A chain's children: a run of the question's child buffer, scores non-increasing (the
// parent's score times probabilities in descending order; rounding is monotone).
struct Run {
  int64_t head, end, parent;
};

// Scratch of one worker: the current question's children (in emission order) and runs.
struct Scratch {
  std::vector<double> score;
  std::vector<int64_t> choice, key, at, top, count, pending, head_key;
  std::vector<Run> runs;
};

void check_values(const double* parent_scores, const double* probs, const int64_t* n_candidates, int64_t n_chains,
                  int64_t n_choices) {
  bool ok = true;
  for (int64_t b = 0; b < n_chains; ++b)
    ok &= (parent_scores[b] >= 0.0) & (parent_scores[b] <= 1.7976931348623157e308);  // false for NaN
  if (!ok)
    for (int64_t b = 0; b < n_chains; ++b) {
      if (!std::isfinite(parent_scores[b]))
        fail("parent_scores", "contains NaN or inf (first at index " + std::to_string(b) + ")");
      if (parent_scores[b] < 0.0)
        fail("parent_scores",
             "values must be in [0, inf], got " + std::to_string(parent_scores[b]) + " at index " + std::to_string(b));
    }
  ok = true;
  for (int64_t b = 0; b < n_chains; ++b) ok &= (n_candidates[b] >= 0) & (n_candidates[b] < n_choices);
  if (!ok)
    for (int64_t b = 0; b < n_chains; ++b)
      if (n_candidates[b] < 0 || n_candidates[b] >= n_choices)
        fail("n_candidates", "values must be in [0, " + std::to_string(n_choices - 1) + "], got " +
                                 std::to_string(n_candidates[b]) + " at index " + std::to_string(b));
  // NaN (absent) fails both comparisons, so it passes; -inf, inf, negatives and > 1 do not.
  // A min/max reduction in 8 independent lanes (the selects keep the running value on NaN,
  // as minpd/maxpd do).
  const int64_t total = n_chains * n_choices;
  constexpr int kLanes = 8;
  double lo[kLanes], hi[kLanes];
  for (int u = 0; u < kLanes; ++u) {
    lo[u] = 0.0;
    hi[u] = 1.0;
  }
  int64_t k = 0;
  for (; k + kLanes <= total; k += kLanes)
    for (int u = 0; u < kLanes; ++u) {
      lo[u] = probs[k + u] < lo[u] ? probs[k + u] : lo[u];
      hi[u] = probs[k + u] > hi[u] ? probs[k + u] : hi[u];
    }
  for (; k < total; ++k) {
    lo[0] = probs[k] < lo[0] ? probs[k] : lo[0];
    hi[0] = probs[k] > hi[0] ? probs[k] : hi[0];
  }
  bool bad = false;
  for (int u = 0; u < kLanes; ++u) bad |= lo[u] < 0.0 || hi[u] > 1.0;
  if (bad)
    for (int64_t i = 0; i < total; ++i)
      if (probs[i] < 0.0 || probs[i] > 1.0)
        fail("choice_probs", "values must be in [0, 1] or NaN, got " + std::to_string(probs[i]) + " at row " +
                                 std::to_string(i / n_choices) + ", column " + std::to_string(i % n_choices));
}

}  // namespace

BeamStepResult beam_step(const double* parent_scores, const uint8_t* finished, const double* choice_probs,
                         const int64_t* n_candidates, int64_t n_chains, int64_t n_choices,
                         const int64_t* chain_offsets, int64_t n_questions, int64_t beams, double min_prob,
                         int64_t max_chains) {
  if (n_chains < 0) fail("parent_scores", "negative length");
  if (n_choices < 1) fail("choice_probs", "expected at least 1 column ('A'), got " + std::to_string(n_choices));
  if (beams < 1) fail("beams", "must be >= 1, got " + std::to_string(beams));
  if (!(min_prob >= 0.0 && min_prob <= 1.0))
    fail("min_prob", "must satisfy 0 <= min_prob <= 1, got " + std::to_string(min_prob));
  if (max_chains < 1) fail("max_chains", "must be >= 1, got " + std::to_string(max_chains));
  check_offsets(chain_offsets, n_questions, n_chains, "chain_offsets");
  check_values(parent_scores, choice_probs, n_candidates, n_chains, n_choices);

  // Question q's kept children go to slots [slot[q], slot[q] + cap(q)), cap(q) = min(max_chains,
  // chains x min(beams, C)) (a chain emits at most min(beams, C) children, a carried-over one
  // 1); the gaps are closed at the end.
  const int64_t kb = std::min(beams, n_choices);
  std::vector<int64_t> slot(static_cast<size_t>(n_questions) + 1, 0);
  int64_t largest = 0;
  for (int64_t q = 0; q < n_questions; ++q) {
    const int64_t chains = chain_offsets[q + 1] - chain_offsets[q];
    slot[q + 1] = slot[q] + std::min(max_chains, chains * kb);
    largest = std::max(largest, chains);
  }
  const int64_t n_slots = slot[n_questions];
  check_budget(bytes_for({n_slots}, 3 * 8 + 1) + bytes_for({n_questions + 1}, 8), "max_chains",
               "the kept children (min(max_chains, chains x beams) per question)");
  const int workers = workers_for(n_chains * n_choices + n_questions, int64_t(1) << 15,
                                  (n_questions + kBlock - 1) / kBlock);
  // Per chain of the largest question: kb children (score, choice), a run, a count and a
  // pending index, `width` top columns; per row: keys and columns of two rows.
  const int64_t width = kb <= kArgmaxBeams ? kb : n_choices;
  check_budget(bytes_for({workers, largest}, 16 * kb + sizeof(Run) + 16 + 8 * width) +
                   bytes_for({workers, n_choices + kScanRuns}, 32),
               "beams", "the per-thread child buffers (chains x beams of the largest question)");

  BeamStepResult r;
  r.parent.resize(static_cast<size_t>(n_slots));
  r.choice.resize(static_cast<size_t>(n_slots));
  r.score.resize(static_cast<size_t>(n_slots));
  r.finished.resize(static_cast<size_t>(n_slots));
  r.offsets.assign(static_cast<size_t>(n_questions) + 1, 0);
  std::vector<int64_t> kept(static_cast<size_t>(n_questions), 0);
  std::vector<Scratch> scratch(static_cast<size_t>(workers));
  parallel_for(n_questions, kBlock, workers, [&](int64_t q0, int64_t q1, int worker) {
    Scratch& w = scratch[static_cast<size_t>(worker)];
    w.key.resize(static_cast<size_t>(2 * n_choices));
    w.at.resize(static_cast<size_t>(2 * n_choices));
    w.head_key.resize(static_cast<size_t>(kScanRuns));
    for (int64_t q = q0; q < q1; ++q) {
      const int64_t b0 = chain_offsets[q], b1 = chain_offsets[q + 1], chains = b1 - b0;
      const size_t room = static_cast<size_t>(chains * kb);
      if (w.score.size() < room) {
        w.score.resize(room);
        w.choice.resize(room);
      }
      if (w.count.size() < static_cast<size_t>(chains)) {
        w.count.resize(static_cast<size_t>(chains));
        w.pending.resize(static_cast<size_t>(chains));
        w.top.resize(static_cast<size_t>(chains * width));
      }
      // 1. The top columns of every unfinished chain (count -1: carried over), two rows at a time.
      int64_t n_pending = 0;
      for (int64_t b = b0; b < b1; ++b) {
        w.count[b - b0] = -1;
        if (finished[b] == 0) w.pending[n_pending++] = b - b0;
      }
      const auto row_of = [&](int64_t i) { return choice_probs + (b0 + i) * n_choices; };
      int64_t t = 0;
      if (kb <= kArgmaxBeams) {
        for (; t + 2 <= n_pending; t += 2) {
          const int64_t i0 = w.pending[t], i1 = w.pending[t + 1];
          const double* rows[2] = {row_of(i0), row_of(i1)};
          int64_t* cols[2] = {w.top.data() + i0 * width, w.top.data() + i1 * width};
          int64_t counts[2];
          top_columns<2>(rows, n_choices, kb, min_prob, w.key.data(), w.at.data(), cols, counts);
          w.count[i0] = counts[0];
          w.count[i1] = counts[1];
        }
        for (; t < n_pending; ++t) {
          const int64_t i0 = w.pending[t];
          const double* rows[1] = {row_of(i0)};
          int64_t* cols[1] = {w.top.data() + i0 * width};
          top_columns<1>(rows, n_choices, kb, min_prob, w.key.data(), w.at.data(), cols, &w.count[i0]);
        }
      } else {
        for (; t < n_pending; ++t) {
          const int64_t i0 = w.pending[t];
          w.count[i0] = top_columns_sorted(row_of(i0), n_choices, kb, min_prob, w.top.data() + i0 * width);
        }
      }
      // 2. Each chain's children, in emission order: one run per chain that emits any.
      w.runs.clear();
      int64_t n = 0;
      for (int64_t i = 0; i < chains; ++i) {
        const int64_t b = b0 + i, start = n, m = w.count[i];
        const double s = parent_scores[b];
        if (m < 0) {  // finished, or no choice in the reply: carried over
          w.score[n] = s;
          w.choice[n++] = -1;
        }
        const double* row = row_of(i);
        const int64_t* top = w.top.data() + i * width;
        for (int64_t k = 0; k < m; ++k) {
          const int64_t c = top[k];
          if (c >= 1 && c - 1 >= n_candidates[b]) continue;  // a letter past the candidates: its slot is used up
          w.score[n] = s * row[c];
          w.choice[n++] = c;
        }
        if (n > start) w.runs.push_back(Run{start, n, b});
      }
      // 3. The stable sort by score is a stable merge of the runs, taken until max_chains
      // children are out: the next child is the best run head by (score desc, emission index
      // asc). Runs lie in emission order, so among equal heads the lowest run wins.
      const int64_t base = slot[q], cap = slot[q + 1] - slot[q];
      const auto emit = [&](int64_t out, const Run& run) {
        const int64_t h = run.head, c = w.choice[h];
        r.parent[base + out] = run.parent;
        r.choice[base + out] = c;
        r.score[base + out] = w.score[h];
        r.finished[base + out] = c == 0 || (c < 0 && finished[run.parent] != 0);
      };
      int64_t out = 0;
      std::vector<Run>& runs = w.runs;
      const int64_t n_runs = static_cast<int64_t>(runs.size());
      if (n_runs <= kScanRuns) {
        // A branch-free scan of the heads' order keys (an exhausted run's is -1, below all).
        int64_t* hk = w.head_key.data();
        for (int64_t k = 0; k < n_runs; ++k) hk[k] = order_key(w.score[runs[k].head]);
        for (; out < cap; ++out) {
          int64_t m = -1, best = -1;
          for (int64_t k = 0; k < n_runs; ++k) {
            const bool larger = hk[k] > m;
            best = larger ? k : best;
            m = larger ? hk[k] : m;
          }
          if (best < 0) break;
          Run& run = runs[best];
          emit(out, run);
          hk[best] = ++run.head < run.end ? order_key(w.score[run.head]) : -1;
        }
      } else {
        // A heap of the heads; the top is replaced in place while its run lasts.
        const double* sc = w.score.data();
        const auto worse = [sc](const Run& x, const Run& y) {
          return sc[x.head] < sc[y.head] || (sc[x.head] == sc[y.head] && x.head > y.head);
        };
        std::make_heap(runs.begin(), runs.end(), worse);
        for (; out < cap && !runs.empty(); ++out) {
          emit(out, runs.front());
          std::pop_heap(runs.begin(), runs.end(), worse);
          if (++runs.back().head < runs.back().end) std::push_heap(runs.begin(), runs.end(), worse);
          else runs.pop_back();
        }
      }
      kept[q] = out;
    }
  });
  // Close the gaps left by questions that kept fewer than their slots (moving left only).
  for (int64_t q = 0; q < n_questions; ++q) {
    const int64_t from = slot[q], to = r.offsets[q], n = kept[q];
    r.offsets[q + 1] = to + n;
    if (from == to) continue;
    std::copy(r.parent.begin() + from, r.parent.begin() + from + n, r.parent.begin() + to);
    std::copy(r.choice.begin() + from, r.choice.begin() + from + n, r.choice.begin() + to);
    std::copy(r.score.begin() + from, r.score.begin() + from + n, r.score.begin() + to);
    std::copy(r.finished.begin() + from, r.finished.begin() + from + n, r.finished.begin() + to);
  }
  const size_t n_kept = static_cast<size_t>(r.offsets[n_questions]);
  r.parent.resize(n_kept);
  r.choice.resize(n_kept);
  r.score.resize(n_kept);
  r.finished.resize(n_kept);
  return r;
}

}  // namespace rrag
