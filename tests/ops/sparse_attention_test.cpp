// The sparse attention operator against the float64 dense masked reference: forward and all three
// gradients over random per-head patterns, every static generator of the pattern library, and the
// Pattern-based C++ API. Tolerances per dtype are in ops_test_helpers.h (float64: rtol 1e-10 forward,
// 1e-9 gradients; float32: 1e-4 / 1e-3 with absolute floors 1e-5 / 1e-4).
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <string>

#include "ops/sparse_attention.h"
#include "ops_test_helpers.h"
#include "patterns/mask_registry.h"
#include "patterns/pattern.h"
#include "util/errors.h"

namespace sparsevit::ops::testing {
namespace {

TEST(SparseAttention, MatchesReferenceOverShapes) {
  at::manual_seed(1);
  int case_id = 0;
  for (const at::ScalarType dtype : {at::kFloat, at::kDouble}) {
    for (const int64_t N : {1, 2, 50, 197, 257}) {
      for (const int64_t D : {8, 16, 64, 80}) {
        for (const int64_t B : {1, 3}) {
          const int64_t H = 3;
          // 0..12 keys per row: empty rows, one-key rows and longer rows all occur.
          ++case_id;
          const Csr csr = random_csr(H, N, 0, 12, 1000 + case_id, case_id % 2 ? at::kInt : at::kLong);
          const auto opts = at::TensorOptions().dtype(dtype);
          const at::Tensor q = at::randn({B, H, N, D}, opts), k = at::randn({B, H, N, D}, opts),
                           v = at::randn({B, H, N, D}, opts), go = at::randn({B, H, N, D}, opts);
          const double scale = default_scale(D);
          const std::string what = std::string(c10::toString(dtype)) + " N=" + std::to_string(N) +
                                   " D=" + std::to_string(D) + " B=" + std::to_string(B);
          EXPECT_TRUE(matches_reference(run_op(q, k, v, csr, scale, go), run_reference(q, k, v, csr, scale, go),
                                        dtype, what));
        }
      }
    }
  }
}

TEST(SparseAttention, MatchesReferenceOnDenseAndLongRows) {
  at::manual_seed(2);
  for (const at::ScalarType dtype : {at::kFloat, at::kDouble}) {
    const int64_t B = 2, H = 2, N = 67, D = 24;
    const Csr csr = random_csr(H, N, 40, N, 77, at::kInt, /*shuffle_keys=*/true);
    const auto opts = at::TensorOptions().dtype(dtype);
    const at::Tensor q = at::randn({B, H, N, D}, opts), k = at::randn({B, H, N, D}, opts),
                     v = at::randn({B, H, N, D}, opts), go = at::randn({B, H, N, D}, opts);
    EXPECT_TRUE(matches_reference(run_op(q, k, v, csr, 0.3, go), run_reference(q, k, v, csr, 0.3, go), dtype,
                                  c10::toString(dtype)));
  }
}

// Every static generator of the pattern library, at the ViT token count and a small odd one.
TEST(SparseAttention, MatchesReferenceOnEveryGenerator) {
  at::manual_seed(3);
  int tested = 0;
  for (const std::string& name : patterns::mask_names()) {
    if (patterns::find_mask(name).dynamic) continue;
    for (const int32_t N : {197, 50}) {
      patterns::Pattern pattern;
      try {
        pattern = patterns::build_mask(name, patterns::MaskContext{{N, 1, 4, 64, 12}, 1}, patterns::MaskKwargs{});
      } catch (const UsageError& e) {
        // Generators that need inputs beyond kwargs defaults (e.g. pruning's calibration) are skipped.
        std::cout << "[ skipped  ] mask '" << name << "': " << e.what() << "\n";
        continue;
      }
      const PatternTensors t = pattern_tensors(pattern);
      const Csr csr{t.row_ptr, t.col_idx};
      for (const at::ScalarType dtype : {at::kFloat, at::kDouble}) {
        const int64_t B = 2, H = 4, D = 16;
        const auto opts = at::TensorOptions().dtype(dtype);
        const at::Tensor q = at::randn({B, H, N, D}, opts), k = at::randn({B, H, N, D}, opts),
                         v = at::randn({B, H, N, D}, opts), go = at::randn({B, H, N, D}, opts);
        EXPECT_TRUE(matches_reference(run_op(q, k, v, csr, 0.25, go), run_reference(q, k, v, csr, 0.25, go), dtype,
                                      name + " N=" + std::to_string(N) + " " + c10::toString(dtype)));
      }
      ++tested;
    }
  }
  EXPECT_GE(tested, 8) << "expected fibo, local, random, sparse_transformer, bigbird, longformer at two sizes";
}

TEST(SparseAttention, PatternOverloadEqualsCsrCall) {
  at::manual_seed(4);
  patterns::MaskKwargs kw;
  kw.set_scalar("w_min", "5").set_scalar("w_max", "65");
  const patterns::Pattern pattern = patterns::build_mask("fibo", patterns::MaskContext{{197, 1, 12, 64, 12}, 0}, kw);
  const at::Tensor q = at::randn({2, 12, 197, 64}), k = at::randn({2, 12, 197, 64}), v = at::randn({2, 12, 197, 64});
  const PatternTensors t = PatternTensors::from_pattern(pattern);
  EXPECT_EQ(t.total_edges, pattern.total_edges());
  EXPECT_GT(t.density(), 0.0);
  EXPECT_LT(t.density(), 0.2);
  const at::Tensor a = sparse_attention(q, k, v, pattern, 0.125);
  const at::Tensor b = sparse_attention(q, k, v, t.row_ptr, t.col_idx, 0.125);
  EXPECT_TRUE(at::equal(a, b));
}

TEST(SparseAttention, PatternCacheIsKeyedByContent) {
  const auto ctx = patterns::MaskContext{{50, 1, 2, 64, 1}, 0};
  patterns::MaskKwargs kw_a, kw_b;
  kw_a.set_scalar("window", "2");
  kw_b.set_scalar("window", "5");
  const patterns::Pattern a = patterns::build_mask("local", ctx, kw_a);
  const patterns::Pattern a_copy = patterns::build_mask("local", ctx, kw_a);
  const patterns::Pattern b = patterns::build_mask("local", ctx, kw_b);
  const PatternTensors ta = pattern_tensors(a), ta2 = pattern_tensors(a_copy), tb = pattern_tensors(b);
  // Same content: one cached entry (shared storage); different content: different tensors.
  EXPECT_EQ(ta.row_ptr.data_ptr(), ta2.row_ptr.data_ptr());
  EXPECT_NE(ta.row_ptr.data_ptr(), tb.row_ptr.data_ptr());
  EXPECT_FALSE(at::equal(ta.row_ptr, tb.row_ptr));
  EXPECT_TRUE(at::equal(ta.row_ptr, PatternTensors::from_pattern(a).row_ptr));
  EXPECT_TRUE(at::equal(tb.col_idx, PatternTensors::from_pattern(b).col_idx));
}

}  // namespace
}  // namespace sparsevit::ops::testing
