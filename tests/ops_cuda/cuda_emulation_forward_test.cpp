// The CUDA kernels' forward, run by the host emulation (same warp code, tiling and reduction
// order), against the float64 reference: random CSR patterns with empty rows, Fibottention-like
// diagonal unions with global tokens, fp32 / bf16 / fp64, head sizes that fill one or two pairs per
// lane or leave lanes (and half pairs) empty.
#include "ops_cuda/emulation_test_helpers.h"

namespace sparsevit::ops::cuda::testing {
namespace {

constexpr double kFp32Tolerance = 1e-5;

// Empty rows: out exactly 0 and lse -inf.
template <typename Run>
void expect_empty_rows_zero(const Pattern& p, int64_t B, int64_t D, const Run& r) {
  for (int64_t bh = 0; bh < B * p.heads; ++bh)
    for (int64_t j = 0; j < p.tokens; ++j) {
      if (!p.rows[bh % p.heads][j].empty()) continue;
      EXPECT_EQ(r.lse_vals[bh * p.tokens + j], -std::numeric_limits<double>::infinity()) << "row " << j;
      for (int64_t d = 0; d < D; ++d) ASSERT_EQ(r.out_vals[(bh * p.tokens + j) * D + d], 0.0) << "row " << j;
    }
}

class CsrForwardFp32 : public ::testing::TestWithParam<int64_t> {};

TEST_P(CsrForwardFp32, MatchesFloat64Reference) {
  const int64_t D = GetParam();
  const Problem<float, float> pr(random_pattern(3, 37, 0.2, 3, 11), 2, D, 5);
  const auto run = pr.run(false, false, Layout::kDense, Layout::kDense);
  const Reference ref = pr.ref();
  EXPECT_LE(relative_error(run.out_vals, ref.out), kFp32Tolerance);
  EXPECT_LE(relative_error(run.lse_vals, ref.lse), kFp32Tolerance);
  expect_empty_rows_zero(pr.pattern, pr.B, D, run);
}

INSTANTIATE_TEST_SUITE_P(HeadDims, CsrForwardFp32, ::testing::Values(16, 17, 32, 63, 64, 96, 128));

TEST(CudaEmulationForward, DiagonalKernelMatchesReferenceAndCsrKernel) {
  for (const std::vector<int32_t>& globals : {std::vector<int32_t>{}, {0}, {0, 17, 49}}) {
    const Problem<float, float> pr(fibottention_like(4, 50, globals, 3), 2, 64, 21);
    const auto diag = pr.run(true, false, Layout::kDense, Layout::kDense);
    const auto csr = pr.run(false, false, Layout::kDense, Layout::kDense);
    const Reference ref = pr.ref();
    EXPECT_LE(relative_error(diag.out_vals, ref.out), kFp32Tolerance) << globals.size() << " globals";
    EXPECT_LE(relative_error(diag.lse_vals, ref.lse), kFp32Tolerance) << globals.size() << " globals";
    EXPECT_LE(relative_error(diag.out_vals, csr.out_vals), kFp32Tolerance);
  }
}

TEST(CudaEmulationForward, EmptyHeadsAndAnEmptyPattern) {
  Pattern p = random_pattern(3, 20, 0.3, 0, 4);
  for (auto& r : p.rows[1]) r.clear();  // one empty head
  const Problem<float, float> pr(p, 2, 32, 8);
  const auto run = pr.run(false, true, Layout::kDense, Layout::kDense);
  const Reference ref = pr.ref();
  EXPECT_LE(relative_error(run.out_vals, ref.out), kFp32Tolerance);
  expect_empty_rows_zero(pr.pattern, pr.B, 32, run);
  Pattern none = p;
  for (auto& head : none.rows)
    for (auto& r : head) r.clear();
  const Problem<float, float> empty(none, 1, 32, 9);
  const auto e = empty.run(false, true, Layout::kDense, Layout::kDense);
  for (double x : e.out_vals) ASSERT_EQ(x, 0.0);
  for (double x : e.dq_vals) ASSERT_EQ(x, 0.0);
  for (double x : e.dk_vals) ASSERT_EQ(x, 0.0);
  for (double x : e.dv_vals) ASSERT_EQ(x, 0.0);
}

TEST(CudaEmulationForward, LargeLogitsStayFinite) {
  // |scale q.k| up to ~2e4: the running max keeps every exp in range.
  const Problem<float, float> pr(random_pattern(2, 24, 0.4, 1, 6), 1, 64, 31, 40.0);
  const auto run = pr.run(false, false, Layout::kDense, Layout::kDense);
  const Reference ref = pr.ref();
  for (double x : run.out_vals) ASSERT_TRUE(std::isfinite(x));
  EXPECT_LE(relative_error(run.out_vals, ref.out), 1e-4);  // the logits themselves carry fp32 error
}

TEST(CudaEmulationForward, Bf16MatchesReferenceOfRoundedInputs) {
  for (bool diagonal : {false, true}) {
    const Pattern p = diagonal ? fibottention_like(3, 41, {0}, 2) : random_pattern(3, 41, 0.25, 2, 2);
    const Problem<float, BFloat16Bits> pr(p, 2, 64, 13);
    const auto run = pr.run(diagonal, false, Layout::kDense, Layout::kDense);
    const Reference ref = pr.ref();
    // out is rounded to bfloat16 once (2^-9 relative); lse stays float32.
    EXPECT_LE(relative_error(run.out_vals, ref.out), 8e-3) << "diagonal " << diagonal;
    EXPECT_LE(relative_error(run.lse_vals, ref.lse), kFp32Tolerance) << "diagonal " << diagonal;
  }
}

TEST(CudaEmulationForward, Float64MatchesReference) {
  for (bool diagonal : {false, true}) {
    const Pattern p = diagonal ? fibottention_like(2, 33, {0, 5}, 7) : random_pattern(2, 33, 0.3, 2, 7);
    const Problem<double, double> pr(p, 2, 40, 17);
    const auto run = pr.run(diagonal, true, Layout::kDense, Layout::kDense);
    const Reference ref = pr.ref();
    EXPECT_LE(relative_error(run.out_vals, ref.out), 1e-12);
    EXPECT_LE(relative_error(run.lse_vals, ref.lse), 1e-12);
    EXPECT_LE(relative_error(run.dq_vals, ref.dq), 1e-12);
    EXPECT_LE(relative_error(run.dk_vals, ref.dk), 1e-12);
    EXPECT_LE(relative_error(run.dv_vals, ref.dv), 1e-12);
  }
}

}  // namespace
}  // namespace sparsevit::ops::cuda::testing
