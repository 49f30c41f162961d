#include "kernels/select_pairs.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <string>

#include "kernels/checks.hpp"
#include "kernels/parallel.hpp"
#include "kernels/runtime.hpp"

namespace rrag {
namespace {

// ------------------------------------------------------------------ tokenizer

// Byte classes of the regex [a-z0-9]+(?:'[a-z]+)? on ASCII-lower-cased text.
struct ByteTables {
  unsigned char lower[256];
  bool alnum[256];  // [a-z0-9] after lower-casing
  bool alpha[256];  // [a-z] after lower-casing
  ByteTables() {
    for (int c = 0; c < 256; ++c) {
      lower[c] = static_cast<unsigned char>((c >= 'A' && c <= 'Z') ? c + ('a' - 'A') : c);
      alpha[c] = lower[c] >= 'a' && lower[c] <= 'z';
      alnum[c] = alpha[c] || (c >= '0' && c <= '9');
    }
  }
};
const ByteTables kBytes;

constexpr uint64_t kHashSeed = 0x9e3779b97f4a7c15ull;
constexpr uint64_t kHashMul = 0xbf58476d1ce4e5b9ull;

inline uint64_t mix(uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  return h;
}

// Open-addressing string -> id table; keys live in one arena, ids by first insertion.
class TokenTable {
 public:
  // Sized for about `expected` distinct tokens without a rehash.
  explicit TokenTable(size_t expected) {
    size_t capacity = 1024;
    while (capacity < 2 * expected) capacity *= 2;
    rehash(capacity);
    entries_.reserve(expected);
    arena_.reserve(6 * expected);
  }

  // `h` is a hash of the n bytes at s (any function of the bytes alone).
  int64_t intern(const char* s, size_t n, uint64_t h) {
    h = mix(h);
    size_t slot = h & mask_;
    while (true) {
      const int32_t id = slots_[slot];
      if (id < 0) break;
      const Entry& e = entries_[id];
      if (e.hash == h && e.len == n && std::memcmp(arena_.data() + e.off, s, n) == 0) return id;
      slot = (slot + 1) & mask_;
    }
    const int32_t id = static_cast<int32_t>(entries_.size());
    entries_.push_back(Entry{h, arena_.size(), n});
    arena_.append(s, n);
    slots_[slot] = id;
    if (2 * entries_.size() > slots_.size()) rehash(2 * slots_.size());
    return id;
  }

  int64_t size() const { return static_cast<int64_t>(entries_.size()); }

 private:
  struct Entry {
    uint64_t hash;
    size_t off, len;
  };

  void rehash(size_t capacity) {
    slots_.assign(capacity, -1);
    mask_ = capacity - 1;
    for (size_t id = 0; id < entries_.size(); ++id) {
      size_t slot = entries_[id].hash & mask_;
      while (slots_[slot] >= 0) slot = (slot + 1) & mask_;
      slots_[slot] = static_cast<int32_t>(id);
    }
  }

  std::string arena_;
  std::vector<Entry> entries_;
  std::vector<int32_t> slots_;
  size_t mask_ = 0;
};

// ------------------------------------------------------------------ pairs

struct Pair {
  double overlap;
  int64_t i, j;
};

// overlap descending, then (i, j) ascending: a strict total order on distinct pairs, so the
// sorted (and truncated) result is the same however the work was split.
inline bool pair_before(const Pair& a, const Pair& b) {
  if (a.overlap != b.overlap) return a.overlap > b.overlap;
  if (a.i != b.i) return a.i < b.i;
  return a.j < b.j;
}

// The smallest c in [0, size] with double(c) / double(size) >= tau. Division by a fixed
// positive denominator is monotone in c, so a pair of min size `size` is kept iff its
// intersection is >= this (the kernel's exactness rests on it).
inline int64_t min_intersection(int64_t size, double tau) {
  const double n = static_cast<double>(size);
  int64_t t = static_cast<int64_t>(std::ceil(tau * n));
  t = std::clamp<int64_t>(t, 0, size);
  while (t > 0 && static_cast<double>(t - 1) / n >= tau) --t;
  while (t < size && static_cast<double>(t) / n < tau) ++t;
  return t;
}

// Indices 0..n-1 ordered by key ascending, ties by index (a stable counting sort);
// keys are in [0, max_key].
template <class K>
void counting_order(const K* key, int64_t n, int64_t max_key, int32_t* out) {
  std::vector<int64_t> start(max_key + 2, 0);
  for (int64_t x = 0; x < n; ++x) ++start[key[x] + 1];
  for (int64_t k = 0; k <= max_key; ++k) start[k + 1] += start[k];
  for (int64_t x = 0; x < n; ++x) out[start[key[x]]++] = static_cast<int32_t>(x);
}

void keep_best(std::vector<Pair>& v, int64_t max_pairs) {
  if (max_pairs < 0 || static_cast<int64_t>(v.size()) <= max_pairs) return;
  std::nth_element(v.begin(), v.begin() + max_pairs, v.end(), pair_before);
  v.resize(max_pairs);
}

// Sorts v by pair_before in blocks that each take well under a second (sorted chunks, then
// rounds of pairwise merges), so a call with millions of pairs still notices Ctrl-C. Any
// schedule gives the same order: pair_before is a strict total order.
void sort_pairs(std::vector<Pair>& v) {
  const int64_t n = static_cast<int64_t>(v.size());
  constexpr int64_t kChunk = int64_t(1) << 18;
  if (n <= kChunk) {
    std::sort(v.begin(), v.end(), pair_before);
    return;
  }
  const int64_t n_chunks = (n + kChunk - 1) / kChunk;
  parallel_for(n_chunks, 1, workers_for(n_chunks, 1), [&](int64_t c, int64_t, int) {
    std::sort(v.begin() + c * kChunk, v.begin() + std::min(n, (c + 1) * kChunk), pair_before);
  });
  for (int64_t width = kChunk; width < n; width *= 2) {
    const int64_t n_merges = (n + 2 * width - 1) / (2 * width);
    parallel_for(n_merges, 1, workers_for(n_merges, 1), [&](int64_t b, int64_t, int) {
      const int64_t lo = b * 2 * width, mid = std::min(n, lo + width), hi = std::min(n, lo + 2 * width);
      if (mid < hi) std::inplace_merge(v.begin() + lo, v.begin() + mid, v.begin() + hi, pair_before);
    });
  }
}

}  // namespace

int64_t claim_token_ids(const std::vector<std::string_view>& texts, std::vector<int64_t>& token_ids,
                        std::vector<int64_t>& token_offsets) {
  size_t total = 0;
  for (const std::string_view text : texts) total += text.size();
  if (total > static_cast<size_t>(std::numeric_limits<int32_t>::max()))
    fail("texts", "at most 2^31 - 1 bytes of text in one call");
  TokenTable table(total / 8);  // ~6-7 bytes a token in prose; more only rehashes
  token_ids.clear();
  token_ids.reserve(total / 4 + 16);
  token_offsets.assign(1, 0);
  token_offsets.reserve(texts.size() + 1);
  std::string buf;
  for (const std::string_view text : texts) {
    const auto* s = reinterpret_cast<const unsigned char*>(text.data());
    const size_t n = text.size();
    if (buf.size() < n) buf.resize(n);
    char* out = buf.data();
    size_t pos = 0;
    while (true) {
      while (pos < n && !kBytes.alnum[s[pos]]) ++pos;
      if (pos >= n) break;
      // Hash 8 bytes at a time while copying (no per-byte multiply chain).
      size_t len = 0;
      uint64_t h = kHashSeed, word = 0;
      auto push = [&](unsigned char c) {
        out[len] = static_cast<char>(c);
        word |= static_cast<uint64_t>(c) << (8 * (len & 7));
        if ((++len & 7) == 0) {
          h = (h ^ word) * kHashMul;
          h = (h << 29) | (h >> 35);
          word = 0;
        }
      };
      do push(kBytes.lower[s[pos++]]);
      while (pos < n && kBytes.alnum[s[pos]]);
      // The optional "'" + one or more letters (greedy).
      if (pos + 1 < n && s[pos] == '\'' && kBytes.alpha[s[pos + 1]]) {
        push('\'');
        ++pos;
        do push(kBytes.lower[s[pos++]]);
        while (pos < n && kBytes.alpha[s[pos]]);
      }
      h = (h ^ word ^ (static_cast<uint64_t>(len) << 56)) * kHashMul;
      token_ids.push_back(table.intern(out, len, h));
    }
    token_offsets.push_back(static_cast<int64_t>(token_ids.size()));
  }
  return table.size();
}

PairList select_pairs(const int64_t* token_ids, int64_t n_tokens, const int64_t* token_offsets,
                      int64_t n_claims, const int64_t* source_ids, double tau, int64_t max_pairs) {
  if (n_claims < 0) fail("token_offsets", "negative claim count");
  check_offsets(token_offsets, n_claims, n_tokens, "token_offsets");
  if (!(tau >= 0.0 && tau <= 1.0)) fail("tau", "must be in [0, 1], got " + std::to_string(tau));
  if (max_pairs < -1) fail("max_pairs", "must be >= 0 (or -1 for no cap), got " + std::to_string(max_pairs));
  if (n_tokens >= std::numeric_limits<int32_t>::max())
    fail("token_ids", "at most 2^31 - 2 tokens are supported, got " + std::to_string(n_tokens));
  if (n_claims >= std::numeric_limits<int32_t>::max())
    fail("source_ids", "at most 2^31 - 2 claims are supported, got " + std::to_string(n_claims));
  PairList out;
  if (max_pairs == 0 || n_claims < 2 || n_tokens == 0) return out;
  // No more than n (n - 1) / 2 pairs exist (< 2^61 for n < 2^31): capping here keeps every
  // later size computation (2 * max_pairs + 4096 below) far from int64 overflow.
  const int64_t all_pairs = n_claims * (n_claims - 1) / 2;
  if (max_pairs < 0 || max_pairs > all_pairs) max_pairs = all_pairs;
  // The pairs held at once (per-worker lists, then one merged list and the output) must fit
  // the memory budget: checked as they are found, so a call that would exceed it stops
  // before allocating that much; whether it stops depends only on the inputs.
  const uint64_t max_held = static_cast<uint64_t>(memory_budget()) / (2 * sizeof(Pair) + 24);
  std::atomic<int64_t> held{0};
  auto check_held = [&](int64_t total) {
    if (static_cast<uint64_t>(total) > max_held)
      check_budget(bytes_for({total}, 2 * sizeof(Pair) + 24), "max_pairs",
                   "the more than " + std::to_string(total) + " pairs with overlap >= tau");
  };
  const int nt = n_tokens >= 4096 ? get_num_threads() : 1;

  // 1. Vocabulary index of every token: dense ids (the usual case, e.g. from
  //    claim_token_ids) index a table directly, others go through a sorted vocabulary. The
  //    numbering only affects speed, never the result.
  std::vector<int32_t> vid(n_tokens);
  int64_t n_vocab = 0;
  {
    const auto [mn, mx] = std::minmax_element(token_ids, token_ids + n_tokens);
    const uint64_t lo = static_cast<uint64_t>(*mn);
    const uint64_t range = static_cast<uint64_t>(*mx) - lo;
    if (range < 4 * static_cast<uint64_t>(n_tokens) + 1024) {
      std::vector<int32_t> map(range + 1, -1);
      for (int64_t x = 0; x < n_tokens; ++x) {
        int32_t& v = map[static_cast<uint64_t>(token_ids[x]) - lo];
        if (v < 0) v = static_cast<int32_t>(n_vocab++);
        vid[x] = v;
      }
    } else {
      std::vector<int64_t> vocab(token_ids, token_ids + n_tokens);
      std::sort(vocab.begin(), vocab.end());
      vocab.erase(std::unique(vocab.begin(), vocab.end()), vocab.end());
      n_vocab = static_cast<int64_t>(vocab.size());
      parallel_for(n_tokens, 4096, nt, [&](int64_t lo, int64_t hi, int) {
        for (int64_t x = lo; x < hi; ++x)
          vid[x] = static_cast<int32_t>(std::lower_bound(vocab.begin(), vocab.end(), token_ids[x]) - vocab.begin());
      });
    }
  }

  // 2. Each claim's token SET (duplicates dropped in place) and each token's document
  //    frequency.
  std::vector<int64_t> usize(n_claims);
  std::vector<int32_t> df(n_vocab, 0);
  {
    std::vector<int32_t> last(n_vocab, -1);
    for (int64_t c = 0; c < n_claims; ++c) {
      int64_t u = token_offsets[c];
      for (int64_t x = token_offsets[c]; x < token_offsets[c + 1]; ++x) {
        const int32_t v = vid[x];
        if (last[v] == c) continue;
        last[v] = static_cast<int32_t>(c);
        ++df[v];
        vid[u++] = v;
      }
      usize[c] = u - token_offsets[c];
    }
  }

  // Claims with tokens, in key order (set size ascending, then index): of a pair, the one
  // with the lower key has the min size, so each pair is generated from that claim only.
  std::vector<int32_t> by_size(n_claims);
  int64_t max_size = 0;
  for (int64_t c = 0; c < n_claims; ++c) max_size = std::max(max_size, usize[c]);
  counting_order(usize.data(), n_claims, max_size, by_size.data());
  int64_t first = 0;  // skip the claims without tokens
  while (first < n_claims && usize[by_size[first]] == 0) ++first;
  const int32_t* order = by_size.data() + first;
  const int64_t m = n_claims - first;

  // Token sets in key order.
  std::vector<int64_t> koff(m + 1, 0);
  for (int64_t k = 0; k < m; ++k) koff[k + 1] = koff[k] + usize[order[k]];
  std::vector<int32_t> ktok(koff[m]);
  std::vector<int64_t> ksrc(m);
  for (int64_t k = 0; k < m; ++k) {
    const int64_t c = order[k];
    std::copy(vid.data() + token_offsets[c], vid.data() + token_offsets[c] + usize[c], ktok.data() + koff[k]);
    ksrc[k] = source_ids[c];
  }
  vid = std::vector<int32_t>();

  // Inverted index: token -> claim keys containing it, ascending.
  std::vector<int64_t> poff(n_vocab + 1, 0);
  for (int64_t v = 0; v < n_vocab; ++v) poff[v + 1] = poff[v] + df[v];
  std::vector<int32_t> post(koff[m]);
  {
    std::vector<int64_t> fill(poff.begin(), poff.end() - 1);
    for (int64_t k = 0; k < m; ++k)
      for (int64_t x = koff[k]; x < koff[k + 1]; ++x) post[fill[ktok[x]]++] = static_cast<int32_t>(k);
  }

  // 3. Candidates by prefix filtering, exact verification. For the lower-key claim a with
  //    t = min_intersection(|a|, tau) >= 1, a kept pair shares >= t of a's |a| tokens, so
  //    it shares at least one token of ANY |a| - t + 1 of them (pigeonhole): scanning the
  //    postings of a's |a| - t + 1 rarest tokens finds every kept pair (rarest first only
  //    makes it fast). t = 0 (tau = 0) keeps every cross-source pair. Verification counts
  //    the candidate's tokens that are flagged as a's.
  struct Worker {
    std::vector<Pair> found;
    std::vector<uint8_t> mark, in_a;
    std::vector<int32_t> cand, prefix;
  };
  std::vector<Worker> workers(static_cast<size_t>(nt));
  parallel_for(m, 16, nt, [&](int64_t k0, int64_t k1, int worker) {
    Worker& wk = workers[static_cast<size_t>(worker)];
    if (wk.mark.empty()) {
      wk.mark.assign(m, 0);
      wk.in_a.assign(n_vocab, 0);
    }
    std::vector<Pair>& mine = wk.found;
    std::vector<uint8_t>& mark = wk.mark;
    std::vector<uint8_t>& in_a = wk.in_a;
    std::vector<int32_t>& cand = wk.cand;
    std::vector<int32_t>& prefix = wk.prefix;
    for (int64_t k = k0; k < k1; ++k) {
      check_interrupt();
      const int64_t sa = koff[k + 1] - koff[k];
      const int32_t* ta = ktok.data() + koff[k];
      const int64_t t = min_intersection(sa, tau);
      const int64_t src = ksrc[k];
      cand.clear();
      if (t == 0) {
        for (int64_t k2 = k + 1; k2 < m; ++k2)
          if (ksrc[k2] != src) cand.push_back(static_cast<int32_t>(k2));
      } else {
        // Tokens no other claim has (df 1) are free prefix members with empty postings:
        // with enough of them the claim cannot pair at all.
        int64_t np = sa - t + 1;
        prefix.clear();
        for (int64_t x = 0; x < sa; ++x)
          if (df[ta[x]] > 1) prefix.push_back(ta[x]);
        np -= sa - static_cast<int64_t>(prefix.size());
        if (np <= 0) continue;
        if (np < static_cast<int64_t>(prefix.size()))
          std::nth_element(prefix.begin(), prefix.begin() + np, prefix.end(), [&](int32_t a, int32_t b) {
            return df[a] < df[b] || (df[a] == df[b] && a < b);
          });
        for (int64_t x = 0; x < np; ++x) {
          const int32_t* lo = post.data() + poff[prefix[x]];
          const int32_t* hi = post.data() + poff[prefix[x] + 1];
          for (const int32_t* p = std::upper_bound(lo, hi, static_cast<int32_t>(k)); p < hi; ++p) {
            const int32_t k2 = *p;
            if (!mark[k2] && ksrc[k2] != src) {
              mark[k2] = 1;
              cand.push_back(k2);
            }
          }
        }
      }
      if (cand.empty()) continue;
      for (int64_t x = 0; x < sa; ++x) in_a[ta[x]] = 1;
      const double denom = static_cast<double>(sa);
      const size_t before = mine.size();
      for (const int32_t k2 : cand) {
        mark[k2] = 0;
        int64_t common = 0;
        for (int64_t x = koff[k2]; x < koff[k2 + 1]; ++x) common += in_a[ktok[x]];
        const double ov = static_cast<double>(common) / denom;
        if (ov >= tau) {
          const int64_t a = order[k], b = order[k2];
          mine.push_back(Pair{ov, std::min(a, b), std::max(a, b)});
        }
      }
      for (int64_t x = 0; x < sa; ++x) in_a[ta[x]] = 0;
      if (static_cast<int64_t>(mine.size()) >= 2 * max_pairs + 4096) keep_best(mine, max_pairs);
      const int64_t change = static_cast<int64_t>(mine.size()) - static_cast<int64_t>(before);
      if (change != 0) check_held(held.fetch_add(change, std::memory_order_relaxed) + change);
    }
  });
  for (auto& wk : workers) {
    std::vector<uint8_t>().swap(wk.mark);
    std::vector<uint8_t>().swap(wk.in_a);
  }

  // 4. Merge, cap, sort.
  std::vector<Pair> all;
  if (nt == 1) {
    all.swap(workers[0].found);
  } else {
    size_t total = 0;
    for (const auto& wk : workers) total += wk.found.size();
    all.reserve(total);
    for (auto& wk : workers) {
      all.insert(all.end(), wk.found.begin(), wk.found.end());
      std::vector<Pair>().swap(wk.found);
    }
  }
  keep_best(all, max_pairs);
  sort_pairs(all);
  out.i.resize(all.size());
  out.j.resize(all.size());
  out.overlap.resize(all.size());
  for (size_t p = 0; p < all.size(); ++p) {
    out.i[p] = all[p].i;
    out.j[p] = all[p].j;
    out.overlap[p] = all[p].overlap;
  }
  return out;
}

}  // namespace rrag
