// The CUDA kernels' backward (query pass: dq and P / dS per edge; key pass: dk, dv over the
// transposed CSR, or the diagonal slots), run by the host emulation, against the float64
// reference gradients and against finite differences of the emulated forward.
#include "ops_cuda/emulation_test_helpers.h"

namespace sparsevit::ops::cuda::testing {
namespace {

constexpr double kFp32Tolerance = 1e-5;

template <typename Run>
void expect_gradients(const Run& run, const Reference& ref, double tol, const std::string& what) {
  EXPECT_LE(relative_error(run.dq_vals, ref.dq), tol) << what << " dq";
  EXPECT_LE(relative_error(run.dk_vals, ref.dk), tol) << what << " dk";
  EXPECT_LE(relative_error(run.dv_vals, ref.dv), tol) << what << " dv";
}

TEST(CudaEmulationBackward, CsrFp32MatchesReferenceGradients) {
  for (int64_t D : {16, 17, 64, 128}) {
    // An asymmetric random pattern: dk, dv are right only if the key pass walks the transpose.
    const Problem<float, float> pr(random_pattern(3, 31, 0.2, 3, 40 + static_cast<uint32_t>(D)), 2, D, 3);
    expect_gradients(pr.run(false, true, Layout::kDense, Layout::kDense), pr.ref(), kFp32Tolerance,
                     "D " + std::to_string(D));
  }
}

TEST(CudaEmulationBackward, DiagonalFp32MatchesReferenceGradients) {
  for (const std::vector<int32_t>& globals : {std::vector<int32_t>{}, {0}, {0, 9, 44}}) {
    const Problem<float, float> pr(fibottention_like(4, 45, globals, 5), 2, 64, 23);
    expect_gradients(pr.run(true, true, Layout::kDense, Layout::kDense), pr.ref(), kFp32Tolerance,
                     std::to_string(globals.size()) + " globals");
  }
}

TEST(CudaEmulationBackward, Bf16MatchesReferenceGradients) {
  for (bool diagonal : {false, true}) {
    const Pattern p = diagonal ? fibottention_like(3, 40, {0}, 8) : random_pattern(3, 40, 0.25, 2, 8);
    const Problem<float, BFloat16Bits> pr(p, 2, 64, 29);
    // Gradients are float32 sums of rounded inputs, rounded to bfloat16 once at the store.
    expect_gradients(pr.run(diagonal, true, Layout::kDense, Layout::kDense), pr.ref(), 8e-3,
                     diagonal ? "diagonal" : "csr");
  }
}

// d(sum out * g)/dx by central differences of the emulated float64 forward.
template <typename Mutate>
double numeric_gradient(const Problem<double, double>& base, bool diagonal, Mutate&& mutate, double eps) {
  Problem<double, double> plus = base, minus = base;
  mutate(plus, eps);
  mutate(minus, -eps);
  const auto rp = plus.run(diagonal, false, Layout::kDense, Layout::kDense);
  const auto rm = minus.run(diagonal, false, Layout::kDense, Layout::kDense);
  double fp = 0, fm = 0;
  for (size_t i = 0; i < base.g.size(); ++i) {
    fp += rp.out_vals[i] * base.g[i];
    fm += rm.out_vals[i] * base.g[i];
  }
  return (fp - fm) / (2 * eps);
}

TEST(CudaEmulationBackward, Float64GradientsMatchFiniteDifferences) {
  for (bool diagonal : {false, true}) {
    const Pattern p = diagonal ? fibottention_like(2, 9, {0}, 1, 2) : random_pattern(2, 9, 0.4, 1, 1);
    const Problem<double, double> pr(p, 1, 5, 3);
    const auto run = pr.run(diagonal, true, Layout::kDense, Layout::kDense);
    const double eps = 1e-6;
    for (size_t i = 0; i < pr.q.size(); ++i) {
      const double nq = numeric_gradient(pr, diagonal, [&](Problem<double, double>& x, double e) { x.q[i] += e; }, eps);
      const double nk = numeric_gradient(pr, diagonal, [&](Problem<double, double>& x, double e) { x.k[i] += e; }, eps);
      const double nv = numeric_gradient(pr, diagonal, [&](Problem<double, double>& x, double e) { x.v[i] += e; }, eps);
      ASSERT_NEAR(run.dq_vals[i], nq, 1e-7 + 1e-6 * std::abs(nq)) << "dq " << i << " diagonal " << diagonal;
      ASSERT_NEAR(run.dk_vals[i], nk, 1e-7 + 1e-6 * std::abs(nk)) << "dk " << i << " diagonal " << diagonal;
      ASSERT_NEAR(run.dv_vals[i], nv, 1e-7 + 1e-6 * std::abs(nv)) << "dv " << i << " diagonal " << diagonal;
    }
  }
}

}  // namespace
}  // namespace sparsevit::ops::cuda::testing
