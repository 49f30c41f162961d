// LexicalNLI's alignment: difflib opcodes of two token-id sequences, batched over pairs.
#pragma once

#include <cstdint>
#include <vector>

namespace rrag {

// Opcode tags, in the order of rrag_kernels.reference.lexical_align.TAGS.
enum LexicalTag : int32_t { kTagEqual = 0, kTagReplace = 1, kTagDelete = 2, kTagInsert = 3 };

struct LexicalOpcodes {
  std::vector<int64_t> op_offsets;  // n_pairs + 1: pair p's opcodes are rows [op_offsets[p], op_offsets[p + 1])
  std::vector<int32_t> ops;         // K x 5 row-major: tag, i1, i2, j1, j2
};

// For each pair p, a = tokens_a[offsets_a[p]:offsets_a[p + 1]], b likewise: the opcodes of
// difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes() (Ratcliff/Obershelp:
// the longest matching run first, ties to the earliest run in a, then in b; recurse on both
// sides; no junk, no popularity heuristic).
// trim_affixes = true first matches the longest common prefix, then the longest common
// suffix of what is left, and runs difflib on the middle only: the semantics of
// rrag_kernels.nli.lexical._opcodes (which differ from plain difflib when a longer run
// crosses the prefix or suffix). Token ids are any int64 values (only equality matters).
// Results do not depend on the thread count. Each sequence must be shorter than 2^31.
LexicalOpcodes lexical_opcodes(const int64_t* tokens_a, int64_t n_tokens_a, const int64_t* offsets_a,
                               const int64_t* tokens_b, int64_t n_tokens_b, const int64_t* offsets_b,
                               int64_t n_pairs, bool trim_affixes);

}  // namespace rrag
