// The tiled diagonal kernels on problems wider than one tile and one stage: the benchmarks'
// Fibottention pattern (offsets up to N/3, a class token) at N = 530-600, so a head has several
// tiles (512 queries forward / 256 backward at D = 64; 256 / 128 at D = 128), each with several
// stages, and extra global tokens whose partials cross tiles; against the float64 reference (D = 40
// and fp64 run the per-row fallback, as on the device), the per-row design, bit-identical reruns,
// and the count-only traffic equal to the counted run's.
#include "ops_cuda/emulation_test_helpers.h"
#include "ops_cuda/fibottention_plan.h"

namespace sparsevit::ops::cuda::testing {
namespace {

// The benchmark pattern at N tokens, with `extra` global tokens added to every head.
Pattern wide_fibottention(int64_t N, int64_t H, const std::vector<int32_t>& extra, uint32_t seed) {
  const DiagonalPlanArrays plan(benchmark_fibottention(N, H, 64));
  std::vector<std::vector<int32_t>> globals = plan.global_tokens();
  for (auto& g : globals) {
    g.insert(g.end(), extra.begin(), extra.end());
    std::sort(g.begin(), g.end());
  }
  return diagonal_pattern(H, N, plan.offsets(), globals, seed);
}

template <typename Run>
void expect_matches(const Run& run, const Reference& ref, double tol, const std::string& what) {
  EXPECT_LE(relative_error(run.out_vals, ref.out), tol) << what << " out";
  EXPECT_LE(relative_error(run.lse_vals, ref.lse), 1e-5) << what << " lse";
  EXPECT_LE(relative_error(run.dq_vals, ref.dq), tol) << what << " dq";
  EXPECT_LE(relative_error(run.dk_vals, ref.dk), tol) << what << " dk";
  EXPECT_LE(relative_error(run.dv_vals, ref.dv), tol) << what << " dv";
}

TEST(CudaEmulationTiles, SeveralTilesAndStagesMatchReferenceFp32) {
  for (int64_t D : {64, 128, 40}) {
    for (const std::vector<int32_t>& extra : {std::vector<int32_t>{}, {299, 598}}) {
      const Problem<float, float> pr(wide_fibottention(600, 4, extra, 3), 1, D, 11);
      const std::string what = "D " + std::to_string(D) + ", " + std::to_string(extra.size()) + " extra globals";
      expect_matches(pr.run(true, true, Layout::kDense, Layout::kDense), pr.ref(), 1e-5, what);
    }
  }
}

TEST(CudaEmulationTiles, SeveralTilesMatchReferenceBf16AndFp64) {
  const Pattern p = wide_fibottention(530, 3, {263}, 5);
  const Problem<float, BFloat16Bits> bf(p, 1, 64, 7);
  expect_matches(bf.run(true, true, Layout::kDense, Layout::kDense), bf.ref(), 8e-3, "bf16");
  const Problem<double, double> fp64(p, 1, 64, 7);
  const auto run = fp64.run(true, true, Layout::kDense, Layout::kDense);
  const Reference ref = fp64.ref();
  EXPECT_LE(relative_error(run.out_vals, ref.out), 1e-12);
  EXPECT_LE(relative_error(run.dq_vals, ref.dq), 1e-12);
  EXPECT_LE(relative_error(run.dk_vals, ref.dk), 1e-12);
  EXPECT_LE(relative_error(run.dv_vals, ref.dv), 1e-12);
}

TEST(CudaEmulationTiles, PerRowDesignStillMatchesReference) {
  // The traffic test compares against this design: it must still be the correct kernel.
  const Problem<float, float> pr(wide_fibottention(300, 3, {}, 9), 1, 64, 13);
  expect_matches(pr.run(true, true, Layout::kDense, Layout::kDense, false, KernelDesign::kRows), pr.ref(), 1e-5,
                 "rows");
}

TEST(CudaEmulationTiles, RerunsBitIdenticalAndStridedViewsEqual) {
  const Problem<float, BFloat16Bits> pr(wide_fibottention(560, 2, {300}, 4), 2, 64, 17);
  const auto a = pr.run(true, true, Layout::kDense, Layout::kDense);
  const auto b = pr.run(true, true, Layout::kDense, Layout::kDense);
  const auto packed = pr.run(true, true, Layout::kDense, Layout::kDense, true);
  const auto odd = pr.run(true, true, Layout::kPaddedOdd, Layout::kPaddedOdd);  // element copies
  for (const auto* r : {&b, &packed, &odd}) {
    EXPECT_EQ(a.out_vals, r->out_vals);
    EXPECT_EQ(a.lse_vals, r->lse_vals);
    EXPECT_EQ(a.dq_vals, r->dq_vals);
    EXPECT_EQ(a.dk_vals, r->dk_vals);
    EXPECT_EQ(a.dv_vals, r->dv_vals);
  }
  EXPECT_EQ(odd.out.touched_padding(), 0);
  EXPECT_EQ(odd.dk.touched_padding(), 0);
}

TEST(CudaEmulationTiles, CountOnlyTrafficEqualsTheCountedRun) {
  const Problem<float, float> pr(wide_fibottention(600, 2, {299}, 6), 1, 64, 19);
  const auto r = pr.run(true, true, Layout::kDense, Layout::kDense);
  EXPECT_GT(r.forward_traffic.sectors_read, 0);
  EXPECT_EQ(r.forward_traffic.sectors_read, r.forward_counted.sectors_read);
  EXPECT_EQ(r.forward_traffic.bytes_staged, r.forward_counted.bytes_staged);
  EXPECT_EQ(r.forward_traffic.bytes_written, r.forward_counted.bytes_written);
  EXPECT_EQ(r.backward_traffic.sectors_read, r.backward_counted.sectors_read);
  EXPECT_EQ(r.backward_traffic.bytes_staged, r.backward_counted.bytes_staged);
  EXPECT_EQ(r.backward_traffic.bytes_written, r.backward_counted.bytes_written);
  // Every output element written once: out, lse, the partials (no per-edge buffers).
  const int64_t N = 600, H = 2, D = 64, globals = 2, tiles = tiles_for(N, forward_tile_queries<float>(D));
  EXPECT_EQ(tiles, 2);
  EXPECT_EQ(r.forward_traffic.bytes_written, H * (N * D * 4 + N * 4 + globals * tiles * (D + 2) * 4));
}

}  // namespace
}  // namespace sparsevit::ops::cuda::testing
