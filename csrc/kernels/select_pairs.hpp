// MIRAGE pair selection: cross-source claim pairs whose token sets overlap enough.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace rrag {

// Word tokens of each text mapped to integer ids, by first appearance over all texts.
// A token is a match of the regex [a-z0-9]+(?:'[a-z]+)? on the ASCII-lower-cased bytes
// (the caller lower-cases non-ASCII texts itself, so the result equals Python's
// re.findall(pattern, text.lower()) on every input: UTF-8 continuation bytes are never
// ASCII, so a multi-byte character simply ends a token).
// token_ids: concatenated ids; token_offsets: N + 1 CSR offsets (text c is
// token_ids[token_offsets[c]:token_offsets[c + 1]]). Returns the vocabulary size.
int64_t claim_token_ids(const std::vector<std::string_view>& texts, std::vector<int64_t>& token_ids,
                        std::vector<int64_t>& token_offsets);

struct PairList {
  std::vector<int64_t> i, j;
  std::vector<double> overlap;
};

// Pairs i < j with source_ids[i] != source_ids[j], both token sets non-empty and
// overlap = |T(i) & T(j)| / min(|T(i)|, |T(j)|) >= tau (a double division of two
// integers). T(c) is the SET of claim c's tokens (duplicates count once). Output sorted
// by overlap descending, then i, then j ascending; at most max_pairs pairs
// (max_pairs < 0: no cap).
//
// token_ids: n_tokens integers (any int64 values); token_offsets: n_claims + 1 CSR offsets;
// source_ids: n_claims. Results do not depend on the thread count.
PairList select_pairs(const int64_t* token_ids, int64_t n_tokens, const int64_t* token_offsets,
                      int64_t n_claims, const int64_t* source_ids, double tau, int64_t max_pairs);

}  // namespace rrag
