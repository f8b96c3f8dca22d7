#include "patterns/pattern.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "patterns/pattern_equality.h"
#include "patterns/pattern_stats.h"
#include "util/errors.h"

namespace sparsevit::patterns {
namespace {

Pattern dense_pattern(int32_t n, int32_t h, int32_t prefix) {
  Pattern p(n, h, prefix);
  for (int32_t i = 0; i < h; ++i)
    p.set_head(i, [n](int32_t, std::vector<int32_t>& keys) {
      for (int32_t k = 0; k < n; ++k) keys.push_back(k);
    });
  return p;
}

TEST(Pattern, CsrFromRowsIsSortedAndDeduplicated) {
  Pattern p(4, 1, 0);
  p.set_head(0, [](int32_t j, std::vector<int32_t>& keys) { keys = {3, j, 3, 0}; });
  EXPECT_EQ(p.row_ptr(0), (std::vector<int32_t>{0, 2, 5, 8, 10}));
  EXPECT_EQ(p.col_idx(0), (std::vector<int32_t>{0, 3, 0, 1, 3, 0, 2, 3, 0, 3}));
  EXPECT_TRUE(p.contains(0, 1, 1));
  EXPECT_FALSE(p.contains(0, 1, 2));
  EXPECT_FALSE(p.diagonals(0).has_value());
}

TEST(Pattern, SamePairsIgnoresHowThePatternWasBuilt) {
  // |j-k| <= 1 from diagonal offsets (with a structure hint) and from rows (without one).
  Pattern diag(6, 2, 0), rows(6, 2, 0);
  for (int32_t h = 0; h < 2; ++h) {
    diag.set_head_diagonals(h, DiagonalStructure{{0, 1}, {}});
    rows.set_head(h, [](int32_t j, std::vector<int32_t>& keys) {
      for (int32_t k = std::max(0, j - 1); k <= std::min(5, j + 1); ++k) keys.push_back(k);
    });
  }
  EXPECT_TRUE(same_pairs(diag, rows));
  // One key more in one head, or another prefix: different.
  Pattern more = rows;
  more.set_head(1, [](int32_t j, std::vector<int32_t>& keys) {
    for (int32_t k = std::max(0, j - 1); k <= std::min(5, j + 1); ++k) keys.push_back(k);
    if (j == 0) keys.push_back(5);
  });
  EXPECT_FALSE(same_pairs(diag, more));
  EXPECT_FALSE(same_pairs(dense_pattern(6, 2, 0), dense_pattern(6, 2, 1)));
  EXPECT_FALSE(same_pairs(dense_pattern(6, 2, 0), dense_pattern(6, 1, 0)));
  // Per layer: dense (nullopt) layers must sit at the same depths.
  using Layers = std::vector<std::optional<Pattern>>;
  EXPECT_TRUE(same_pairs(Layers{std::nullopt, diag}, Layers{std::nullopt, rows}));
  EXPECT_FALSE(same_pairs(Layers{std::nullopt, diag}, Layers{diag, std::nullopt}));
  EXPECT_FALSE(same_pairs(Layers{diag, diag}, Layers{diag, more}));
  EXPECT_FALSE(same_pairs(Layers{diag}, Layers{diag, diag}));
}

TEST(Pattern, RejectsKeysOutOfRangeAndBadShapes) {
  Pattern p(3, 1, 0);
  EXPECT_THROW(p.set_head(0, [](int32_t, std::vector<int32_t>& k) { k = {3}; }), std::out_of_range);
  EXPECT_THROW(p.set_head(1, [](int32_t, std::vector<int32_t>&) {}), std::out_of_range);
  EXPECT_THROW(Pattern(0, 1, 0), UsageError);
  EXPECT_THROW(Pattern(3, 0, 0), UsageError);
  EXPECT_THROW(Pattern(3, 1, 4), UsageError);
}

TEST(Pattern, DiagonalsWithGlobalClassToken) {
  Pattern p(6, 1, 1);
  p.set_head_diagonals(0, DiagonalStructure{{2, 9, 2}, {0}});
  // Row 0 is global, column 0 is in every row, offsets >= N are dropped from the hint.
  EXPECT_EQ(p.diagonals(0)->offsets, (std::vector<int32_t>{2}));
  EXPECT_EQ(p.edges(0), 6 + /*rows 1..5 keep col 0*/ 5 + /*|j-k|=2 among 1..5 plus (2,0) dup*/ 6);
  EXPECT_TRUE(p.contains(0, 3, 1));
  EXPECT_TRUE(p.contains(0, 3, 5));
  EXPECT_FALSE(p.contains(0, 3, 4));
  EXPECT_TRUE(p.contains(0, 0, 4));
}

TEST(Pattern, FlatLayoutPadsColumns) {
  Pattern p(3, 2, 0);
  p.set_head_diagonals(0, DiagonalStructure{{0}, {}});
  p.set_head_diagonals(1, DiagonalStructure{{0, 1}, {}});
  EXPECT_EQ(p.max_edges(), 7);
  EXPECT_EQ(p.flat_row_ptr(), (std::vector<int32_t>{0, 1, 2, 3, 0, 2, 5, 7}));
  const auto cols = p.padded_col_idx();
  ASSERT_EQ(cols.size(), 14u);
  EXPECT_EQ(std::vector<int32_t>(cols.begin(), cols.begin() + 7), (std::vector<int32_t>{0, 1, 2, 0, 0, 0, 0}));
  EXPECT_EQ(std::vector<int32_t>(cols.begin() + 7, cols.end()), (std::vector<int32_t>{0, 1, 0, 1, 2, 1, 2}));
}

TEST(PatternStats, DensePatternHasZeroPruningAndFullDensity) {
  const Pattern p = dense_pattern(197, 2, 1);
  EXPECT_DOUBLE_EQ(pruning_ratio(p), 0.0);
  EXPECT_DOUBLE_EQ(density(p), 1.0);
  EXPECT_DOUBLE_EQ(union_coverage(p), 1.0);
  EXPECT_DOUBLE_EQ(head_jaccard(p, 0, 1), 1.0);
  EXPECT_EQ(patch_edges(p, 0), 196 * 196);
}

TEST(PatternStats, DenseVitBaseAttentionGflops) {
  // 12 layers x 12 heads x 2 x 64 x 197^2 / 1e9 = 0.7153 (the number papers report as 0.715).
  const Pattern p = dense_pattern(197, 12, 1);
  EXPECT_NEAR(12 * attention_gflops(p, 64), 0.715, 0.001);
  EXPECT_NEAR(12 * attention_gflops_patch(p, 64), 12 * 12 * 2 * 64 * 196.0 * 196 / 1e9, 1e-12);
}

TEST(PatternStats, PruningRatioExcludesTheClassToken) {
  // Local window |j-k| <= w without the main diagonal over 196 patch tokens (literature values).
  for (auto [w, expected] : {std::pair{2, 0.9797}, std::pair{10, 0.9008}}) {
    Pattern p(197, 1, 1);
    std::vector<int32_t> offsets;
    for (int32_t o = 1; o <= w; ++o) offsets.push_back(o);
    p.set_head_diagonals(0, DiagonalStructure{offsets, {0}});
    EXPECT_NEAR(pruning_ratio(p), expected, 5e-5) << w;
  }
}

TEST(PatternStats, JaccardAndCoverageOfDisjointHeads) {
  Pattern p(10, 2, 0);
  p.set_head_diagonals(0, DiagonalStructure{{1}, {}});
  p.set_head_diagonals(1, DiagonalStructure{{2}, {}});
  EXPECT_DOUBLE_EQ(head_jaccard(p, 0, 1), 0.0);
  EXPECT_DOUBLE_EQ(union_coverage(p), (18.0 + 16.0) / 100.0);
  const auto m = head_overlap(p);
  EXPECT_DOUBLE_EQ(m[0][0], 1.0);
  EXPECT_DOUBLE_EQ(m[0][1], 0.0);
}

}  // namespace
}  // namespace sparsevit::patterns
