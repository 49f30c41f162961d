"""LexicalNLI: a model-free NLI scorer for minimal-edit sentence pairs.

What it is for
--------------
MIRAGE only sends NLI the cross-source claim pairs that already share most of their words
(token overlap >= 0.62), and minimal-edit misinformation changes one checkable fact of a
sentence while keeping the rest. For such pairs the *differences* carry the verdict, and
they can be read off a word alignment without a model.

How it decides
--------------
1. **Tokens** (:func:`.tokens._tokenize`). Lower-cased word tokens; numbers ("1,500", "7.2",
   "1840s", "17th", "fifty-six", "seven") are single tokens; "n't" and "cannot" become
   "not"; a possessive "'s" is its own token. Each token gets a light suffix-stripped
   *key* for matching ("identified" ~ "identifies") and a bit-mask of word classes:
   number, date (4-digit year, decade, "... century", AD/BC, month), negation (not, no,
   never, none, without, ...), quantifier (all, some, most, few, only, ...), superlative,
   antonym pole (before/after, largest/smallest, rose/fell, won/lost, ...: see
   ``lexicon._ANTONYM_GROUPS``), capitalised-not-at-sentence-start (a named-entity proxy; a
   sentence-initial word counts when the next word is capitalised too) and stopword.
   Number mentions are parsed into value ranges: "in the eighteenth century" is 1701-1800,
   "1840s" 1840-1849, "more than forty" [40, inf), "about 150" [127.5, 172.5].
2. **Alignment** (:func:`rrag_kernels.ops.lexical_opcodes`, defined by
   :func:`rrag_kernels.reference.lexical_align.pair_opcodes_ref`). The two key sequences
   are aligned like ``difflib.SequenceMatcher(autojunk=False)`` (common prefix and suffix
   first, then longest matching blocks), giving equal / replace / insert / delete spans. A replace
   span with at most :data:`.align.MAX_SWAP` (4) tokens on each side is a *swap*: one
   fact exchanged for another. Longer replaced spans count as a deleted clause plus an
   added one.
3. **Cues** (:func:`.align._align_features`, returning :class:`Features`):

   * number / date conflict: a hypothesis number inside a swap that no comparable
     premise number (same kind: quantity, year-like or percent; same unit word if both
     have one) is compatible with (value ranges overlap), while the swapped premise span
     held such a number (always for years); a month swapped for another month;
   * negation flip: the negations inside short edits (swaps, insertions and deletions of
     at most MAX_SWAP tokens) differ in parity between the two sides;
   * antonym swap: a word only the premise has and a word only the hypothesis has sit at
     opposite poles of one antonym group;
   * superlative / quantifier swap: a swap exchanges one for another that is not a
     synonym of the same pole ("highest" -> "tallest" is fine);
   * entity swap: a swap exchanges a name of the premise for a name the premise lacks;
   * new content: hypothesis content words whose key the premise lacks (words of a
     number phrase compatible with a premise number do not count: "in the 1950s" for
     "in 1953");
   * moved content: hypothesis content words that the premise has, but out of the
     alignment (reordered); voice change: the two texts use "by" a different number of
     times (passive <-> active).

4. **Outcome** (:func:`decide`, checked in this order), each with a fixed row of
   probabilities (:data:`DEFAULT_TABLE`, columns entailment / neutral / contradiction):

   =====================  ==================================================  ==================
   outcome                when                                                probabilities
   =====================  ==================================================  ==================
   ``unknown``            the premise covers < ``min_coverage`` (0.5) of the   0.20 / 0.65 / 0.15
                          hypothesis's tokens: not a minimal edit, nothing
                          is claimed
   ``contradiction``      a number/date conflict, negation flip, antonym or    0.05 / 0.10 / 0.85
                          superlative/quantifier swap
   ``contradiction_weak`` an entity swap; or >= ``min_moved`` (2) content      0.10 / 0.30 / 0.60
                          words reordered with no change of voice and at most
                          ``max_new_content`` new ones (a role swap: "A
                          defeated B" -> "B defeated A")
   ``entailment``         at most ``max_new_content`` (1) new content word     0.85 / 0.10 / 0.05
                          and no new number: the hypothesis adds nothing of
                          substance (a sub-sequence, a dropped conjunct)
   ``entailment_weak``    the same, with content words reordered (passive /    0.60 / 0.30 / 0.10
                          active)
   ``neutral``            otherwise: the hypothesis adds content               0.10 / 0.80 / 0.10
   =====================  ==================================================  ==================

With an ``embedder`` (any object with ``.encode(list[str]) -> (n, d)``, e.g.
:class:`rrag_kernels.models.MiniLMEmbedder` on all-MiniLM-L6-v2), only the
``unknown`` rows change: cosine >= ``cos_entail`` (0.70) gives ``entailment_weak``,
cosine < ``cos_neutral`` (0.50) gives ``neutral``, in between the row stays ``unknown``.

The thresholds (MAX_SWAP, min_coverage, max_new_content, cos_entail) were chosen on
``../shared/data/nli/train_1..4.jsonl``; ``train_5`` is the validation split.

What it catches, what it misses
-------------------------------
It catches the minimal-edit phenomena whose difference is visible in the words of a short
edit: number, year, century and month swaps (with "more than" / "about" / century and
decade ranges understood, so "in the 1950s" does not contradict "in 1953"); inserted or
removed negations; quantifier, superlative and antonym swaps from its word lists; name
and place swaps between capitalised names; word-order role swaps when nothing else
changes; dropped conjuncts and other sub-sequence entailments; added details that bring
new content words (neutral).

It misses everything that needs meaning rather than words. Paraphrases and
generalisations with few shared words come out ``unknown`` (mostly neutral; with an
embedder, high-cosine pairs become weak entailments, and so do high-cosine
contradictions, which the cosine cannot tell apart). Causal and temporal reversals,
misleading reframes and fabricated conflicts phrased in new words are called neutral or
unknown. A fact swapped inside a long rewritten span is read as a dropped plus an added
clause (neutral). Synonym numbers it cannot convert ("a quarter of a century" for 27
years; durations against dates), lower-case entities ("a Mexican firm"), antonyms and
quantifiers outside its lists and sentence-initial single names are missed; passive /
active rewrites and role swaps are told apart only by the word "by". Any added content
word makes a pair neutral unless a contradiction cue fires, so implied facts in new
words are called neutral. Its probabilities are fixed rows, not calibrated confidences.

The hot path (tokenise + align + feature extraction: :func:`.tokens._tokenize`,
:func:`.align._batch_opcodes`, :func:`.align._align_features`) is Python except the
alignment: :meth:`LexicalNLI.features` maps every key to an integer id once and aligns all
pairs in one :func:`rrag_kernels.ops.lexical_opcodes` call (C++, OpenMP over pairs; with
:data:`.align.USE_CORE` set to False, or without the compiled extension, the op's
pure-Python reference, which gives identical opcodes). It is written so the rest can move to C++ with the same
meaning: tokens are words with integer flags, the alignment is Ratcliff/Obershelp with
difflib's tie-breaks, the output a tuple of small integers and one float. About 35 us per
distinct text and 45 us per pair on one core.

Modules
-------
The package's face is :class:`LexicalNLI`, :func:`decide`, :class:`Features`,
:data:`DEFAULT_TABLE` and ``OUTCOMES`` (what the rest of rrag_kernels reads); each rule
lives in one module of it. The switch between the compiled alignment and its reference,
``USE_CORE``, lives in ``align`` (set it there: a copy on this package would switch
nothing).

==============  =========================================================================
``lexicon``     the word classes (``F_*`` bit flags) and the word lists that set them:
                stopwords, negations, quantifiers, superlatives, antonym poles, months,
                number words, range qualifiers
``numbers``     number values: number words and digit tokens, number mentions with their
                value ranges (step 1), and when two mentions are comparable / compatible
``tokens``      text normalisation ("n't", "cannot"), the light stemmer, per-word flags and
                :class:`~.tokens.Tokens` (step 1)
``align``       the batched alignment through the kernel (step 2) and the cues read off it,
                :class:`Features` (step 3: number, negation, antonym, swap and content rules)
``scorer``      the outcome rule :func:`decide`, :data:`DEFAULT_TABLE` and :class:`LexicalNLI`
                (step 4 and the embedder rule)
==============  =========================================================================
"""

from .align import Features
from .scorer import DEFAULT_TABLE, OUTCOMES, LexicalNLI, decide

__all__ = ["DEFAULT_TABLE", "Features", "LexicalNLI", "decide"]
