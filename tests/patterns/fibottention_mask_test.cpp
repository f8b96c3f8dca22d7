#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "patterns/mask_registry.h"
#include "patterns/pattern_stats.h"
#include "patterns/sequences.h"
#include "util/errors.h"

namespace sparsevit::patterns {
namespace {

Pattern fibo(int32_t n, int32_t h, int32_t layer, int32_t layers, const MaskKwargs& kw, int32_t prefix = 1) {
  return build_mask("fibo", MaskContext{{n, prefix, h, 64, layers}, layer}, kw);
}

std::vector<std::vector<int32_t>> offsets_of(const Pattern& p) {
  std::vector<std::vector<int32_t>> out;
  for (int32_t h = 0; h < p.num_heads(); ++h) out.push_back(p.diagonals(h).value().offsets);
  return out;
}

MaskKwargs unshuffled() { return MaskKwargs().set_scalar("shuffle_layers", "false"); }

TEST(FibottentionMask, WindowFormula) {
  // w_i = w_min + floor((i-1)(w_max-w_min)/(H-1)): 5, 10, 15, ..., 65 for H = 12.
  const Pattern p = fibo(197, 12, 0, 1, unshuffled());
  for (int32_t h = 0; h < 12; ++h) EXPECT_EQ(p.window(h).value(), 5 + h * 60 / 11) << h;
  const Pattern one = fibo(197, 1, 0, 1, unshuffled());
  EXPECT_EQ(one.window(0).value(), 5);
}

TEST(FibottentionMask, PaperOffsetsAreWythoffRowsCutAtTheWindow) {
  const auto offsets = offsets_of(fibo(197, 12, 0, 1, unshuffled()));
  EXPECT_EQ(offsets[0], (std::vector<int32_t>{1, 2, 3, 5}));
  EXPECT_EQ(offsets[1], (std::vector<int32_t>{4, 7}));
  EXPECT_EQ(offsets[2], (std::vector<int32_t>{6, 10}));
  EXPECT_EQ(offsets[11], (std::vector<int32_t>{30, 49}));
  for (int32_t h = 0; h < 12; ++h) {
    const SequenceSeed row = wythoff_row(h + 1);
    const int64_t w = 5 + h * 60 / 11;
    std::vector<int32_t> expected;
    for (int64_t f : fibonacci_terms(row, w)) expected.push_back(static_cast<int32_t>(f));
    EXPECT_EQ(offsets[h], expected) << h;
  }
}

TEST(FibottentionMask, ClosedFormEdgeCounts) {
  // Per head: 2 * sum_{o in O}(P - o) patch pairs, plus the class row and column (2N - 1).
  const int32_t n = 197, p = 196;
  const Pattern pat = fibo(n, 12, 3, 12, MaskKwargs());
  for (int32_t h = 0; h < 12; ++h) {
    int64_t patch = 0;
    for (int32_t o : pat.diagonals(h)->offsets) patch += 2 * (p - o);
    EXPECT_EQ(patch_edges(pat, h), patch) << h;
    EXPECT_EQ(pat.edges(h), patch + 2 * n - 1) << h;
  }
}

TEST(FibottentionMask, LiteraturePruningRatios) {
  const MaskKwargs paper = MaskKwargs().set_scalar("w_min", "5").set_scalar("w_max", "65");
  EXPECT_NEAR(pruning_ratio(build_layer_masks("fibo", AttentionGeometry{197, 1, 12, 64, 12}, paper)), 0.9801, 5e-5);
  MaskKwargs modified = paper;
  modified.set_scalar("schedule", "wythoff_modified");
  EXPECT_NEAR(pruning_ratio(build_layer_masks("fibo", AttentionGeometry{197, 1, 12, 64, 12}, modified)), 0.9622, 5e-5);
}

TEST(FibottentionMask, PaperHeadsAreDisjointAndModifiedSharesAtMostThree) {
  // Wythoff rows partition the integers, so no offset is used by two heads.
  const auto plain = offsets_of(fibo(197, 12, 0, 1, unshuffled()));
  std::multiset<int32_t> all;
  for (const auto& o : plain) all.insert(o.begin(), o.end());
  for (int32_t v : all) EXPECT_EQ(all.count(v), 1u) << v;

  MaskKwargs kw = unshuffled();
  kw.set_scalar("w_min", "5").set_scalar("w_max", "196").set_scalar("schedule", "wythoff_modified");
  const auto modified = offsets_of(fibo(197, 48, 0, 1, kw));
  std::multiset<int32_t> shared;
  for (const auto& o : modified) shared.insert(o.begin(), o.end());
  for (int32_t v : shared) EXPECT_LE(shared.count(v), 3u) << v;
}

TEST(FibottentionMask, LayersPermuteHeadsDeterministically) {
  const MaskKwargs kw;
  const auto base = offsets_of(fibo(197, 12, 0, 12, unshuffled()));
  std::set<std::vector<std::vector<int32_t>>> orders;
  for (int32_t layer = 0; layer < 12; ++layer) {
    const auto a = offsets_of(fibo(197, 12, layer, 12, kw));
    EXPECT_EQ(a, offsets_of(fibo(197, 12, layer, 12, kw)));  // same seed, same layer: same pattern
    auto sorted_a = a, sorted_base = base;
    std::sort(sorted_a.begin(), sorted_a.end());
    std::sort(sorted_base.begin(), sorted_base.end());
    EXPECT_EQ(sorted_a, sorted_base);  // a permutation of the heads
    orders.insert(a);
  }
  EXPECT_GT(orders.size(), 10u);  // layers really differ
  MaskKwargs other;
  other.set_scalar("seed", "7");
  EXPECT_NE(offsets_of(fibo(197, 12, 0, 12, other)), offsets_of(fibo(197, 12, 0, 12, kw)));
}

TEST(FibottentionMask, AblationSequences) {
  auto with = [](const std::string& seq) { return unshuffled().set_scalar("sequence", seq); };
  EXPECT_EQ(offsets_of(fibo(197, 2, 0, 1, with("fibonacci")))[1], (std::vector<int32_t>{1, 2, 3, 5, 8, 13, 21, 34, 55}));
  EXPECT_EQ(offsets_of(fibo(197, 2, 0, 1, with("pow2")))[1], (std::vector<int32_t>{1, 2, 4, 8, 16, 32, 64}));
  EXPECT_EQ(offsets_of(fibo(197, 2, 0, 1, with("pow3")))[1], (std::vector<int32_t>{1, 3, 9, 27}));
  EXPECT_EQ(offsets_of(fibo(197, 2, 0, 1, with("square")))[1], (std::vector<int32_t>{1, 4, 9, 16, 25, 36, 49, 64}));
  EXPECT_EQ(offsets_of(fibo(197, 2, 0, 1, with("cube")))[1], (std::vector<int32_t>{1, 8, 27, 64}));
  MaskKwargs arith = with("arithmetic");
  arith.set_scalar("step", "20").set_scalar("shift_per_head", "true");
  EXPECT_TRUE(offsets_of(fibo(197, 2, 0, 1, arith))[0].empty());  // 20 > w_1 = 5
  EXPECT_EQ(offsets_of(fibo(197, 2, 0, 1, arith))[1], (std::vector<int32_t>{1, 21, 41, 61}));
  EXPECT_EQ(offsets_of(fibo(197, 2, 0, 1, with("fib_shifted")))[1], (std::vector<int32_t>{2, 4, 6, 10, 16, 26, 42}));
  MaskKwargs list = unshuffled();
  list.set_list("sequence", {"3", "1", "100"});
  EXPECT_EQ(offsets_of(fibo(197, 2, 0, 1, list))[1], (std::vector<int32_t>{1, 3}));
  EXPECT_EQ(offsets_of(fibo(197, 2, 0, 1, unshuffled().set_scalar("schedule", "fibonacci")))[0],
            (std::vector<int32_t>{1, 2, 3, 5}));
}

TEST(FibottentionMask, IncludeDiagonalAddsOffsetZeroToEveryHead) {
  // The paper's pattern leaves the principal diagonal out; the ablation puts it back in every
  // head: one more diagonal of P patch pairs per head, nothing else changed.
  const Pattern without = fibo(50, 4, 0, 1, unshuffled());
  const Pattern with = fibo(50, 4, 0, 1, unshuffled().set_scalar("include_diagonal", "true"));
  for (int32_t h = 0; h < 4; ++h) {
    std::vector<int32_t> expected = {0};
    for (int32_t o : without.diagonals(h)->offsets) expected.push_back(o);
    EXPECT_EQ(with.diagonals(h)->offsets, expected) << h;
    EXPECT_EQ(patch_edges(with, h), patch_edges(without, h) + 49) << h;
  }
  EXPECT_THROW(fibo(50, 4, 0, 1, MaskKwargs().set_scalar("compat", "reference").set_scalar("include_diagonal", "true")),
               UsageError);
}

TEST(FibottentionMask, ClassTokenNoneTreatsTokenZeroAsAPatch) {
  const Pattern p = fibo(20, 2, 0, 1, unshuffled().set_scalar("class_token", "none"), 0);
  EXPECT_TRUE(p.diagonals(0)->global_tokens.empty());
  EXPECT_FALSE(p.contains(0, 0, 7));
  EXPECT_TRUE(p.contains(0, 0, 1));
  EXPECT_THROW(fibo(20, 2, 0, 1, MaskKwargs().set_scalar("class_token", "global"), 0), UsageError);
}

TEST(FibottentionMask, InvalidKwargsAreUsageErrors) {
  EXPECT_THROW(fibo(197, 12, 0, 1, MaskKwargs().set_scalar("w_min", "70")), UsageError);  // > w_max
  EXPECT_THROW(fibo(197, 12, 0, 1, MaskKwargs().set_scalar("w_min", "0")), UsageError);
  EXPECT_THROW(fibo(197, 12, 0, 1, MaskKwargs().set_scalar("w_max", "abc")), UsageError);
  EXPECT_THROW(fibo(197, 12, 0, 1, MaskKwargs().set_scalar("schedule", "wythof")), UsageError);
  EXPECT_THROW(fibo(197, 12, 0, 1, MaskKwargs().set_scalar("wmin", "5")), UsageError);
  EXPECT_THROW(fibo(197, 0, 0, 1, MaskKwargs()), UsageError);
  try {
    fibo(197, 12, 0, 1, MaskKwargs().set_scalar("schedule", "wythof"));
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("did you mean 'wythoff'"), std::string::npos) << e.what();
  }
}

TEST(FibottentionMask, WindowsLargerThanTheSequenceAreClampedWithAWarning) {
  const Pattern p = fibo(20, 4, 0, 1, unshuffled());
  EXPECT_EQ(p.window(3).value(), 19);
  EXPECT_FALSE(p.warnings().empty());
  const Pattern small = fibo(1, 2, 0, 1, MaskKwargs().set_scalar("class_token", "none"), 0);
  EXPECT_EQ(small.total_edges(), 0);  // a lone token without the main diagonal: empty rows
}

// Masks the published reference implementation produces (tests/patterns/make_fibottention_reference_cases.py).
struct ReferenceCase {
  int32_t tokens, heads, layer;
  bool modified;
  std::vector<std::vector<int32_t>> offsets;
  uint64_t mask_hash;
};

uint64_t fnv1a_of_masks(const Pattern& p) {
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (int32_t h = 0; h < p.num_heads(); ++h)
    for (int32_t j = 0; j < p.num_tokens(); ++j)
      for (int32_t k = 0; k < p.num_tokens(); ++k) {
        hash ^= p.contains(h, j, k) ? 1u : 0u;
        hash *= 0x100000001b3ULL;
      }
  return hash;
}

TEST(FibottentionMask, CompatReferenceReproducesThePublishedMasks) {
  const std::vector<ReferenceCase> cases = {
#include "fibottention_reference_cases.inc"
  };
  ASSERT_EQ(cases.size(), 30u);
  for (const auto& c : cases) {
    MaskKwargs kw;
    kw.set_scalar("compat", "reference");
    if (c.modified) kw.set_scalar("schedule", "wythoff_modified");
    const int32_t layers = c.tokens == 197 ? 12 : 3;
    const Pattern p = fibo(c.tokens, c.heads, c.layer, layers, kw);
    EXPECT_EQ(offsets_of(p), c.offsets) << "layer " << c.layer << " modified " << c.modified;
    EXPECT_EQ(fnv1a_of_masks(p), c.mask_hash) << "layer " << c.layer << " modified " << c.modified;
    for (int32_t h = 0; h < c.heads; ++h) EXPECT_EQ(p.window(h).value(), c.tokens - 1);
  }
}

TEST(FibottentionMask, CompatReferenceRejectsPaperOnlyKwargs) {
  MaskKwargs kw;
  kw.set_scalar("compat", "reference").set_scalar("w_min", "5");
  EXPECT_THROW(fibo(197, 12, 0, 12, kw), UsageError);
}

}  // namespace
}  // namespace sparsevit::patterns
