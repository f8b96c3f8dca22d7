// Layouts and determinism of the emulated CUDA kernels: NaN-padded strided inputs and outputs
// (padding never read, never written), packed qkv views equal to separate tensors, pair and
// element accesses equal, and bit-identical reruns.
#include "ops_cuda/emulation_test_helpers.h"

namespace sparsevit::ops::cuda::testing {
namespace {

template <typename Run>
void expect_same_bits(const Run& a, const Run& b, const std::string& what) {
  auto same = [](const std::vector<double>& x, const std::vector<double>& y) {
    return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(double)) == 0;
  };
  EXPECT_TRUE(same(a.out_vals, b.out_vals)) << what << " out";
  EXPECT_TRUE(same(a.lse_vals, b.lse_vals)) << what << " lse";
  EXPECT_TRUE(same(a.dq_vals, b.dq_vals)) << what << " dq";
  EXPECT_TRUE(same(a.dk_vals, b.dk_vals)) << what << " dk";
  EXPECT_TRUE(same(a.dv_vals, b.dv_vals)) << what << " dv";
}

template <typename T, typename S>
void check_layouts(const Problem<T, S>& pr, bool diagonal, const std::string& what) {
  const auto dense = pr.run(diagonal, true, Layout::kDense, Layout::kDense);
  for (Layout layout : {Layout::kPadded, Layout::kPaddedOdd}) {
    const std::string name = what + (layout == Layout::kPadded ? " padded" : " padded-odd");
    const auto padded = pr.run(diagonal, true, layout, layout);
    // NaN padding read anywhere would surface as NaN in an output; outputs' padding stays NaN.
    expect_same_bits(dense, padded, name);
    EXPECT_EQ(padded.out.touched_padding(), 0) << name;
    EXPECT_EQ(padded.dq.touched_padding(), 0) << name;
    EXPECT_EQ(padded.dk.touched_padding(), 0) << name;
    EXPECT_EQ(padded.dv.touched_padding(), 0) << name;
  }
  expect_same_bits(dense, pr.run(diagonal, true, Layout::kDense, Layout::kDense, true), what + " packed qkv");
  expect_same_bits(dense, pr.run(diagonal, true, Layout::kDense, Layout::kDense), what + " rerun");
}

TEST(CudaEmulationLayout, StridedPaddedPackedAndRerunsAreBitIdentical) {
  for (int64_t D : {17, 64}) {
    const Problem<float, float> csr(random_pattern(3, 29, 0.25, 2, 3), 2, D, 9);
    check_layouts(csr, false, "fp32 csr D " + std::to_string(D));
    const Problem<float, float> diag(fibottention_like(3, 29, {0, 11}, 3), 2, D, 9);
    check_layouts(diag, true, "fp32 diagonal D " + std::to_string(D));
  }
  const Problem<float, BFloat16Bits> bf(random_pattern(2, 23, 0.3, 1, 4), 2, 64, 10);
  check_layouts(bf, false, "bf16 csr");
  const Problem<float, BFloat16Bits> bfd(fibottention_like(2, 23, {0}, 4), 2, 64, 10);
  check_layouts(bfd, true, "bf16 diagonal");
}

TEST(CudaEmulationLayout, Bf16StoresRoundToNearestEvenAndKeepNaN) {
  EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(float_to_bf16(bits_to_float(0x3f808000u)), 0x3f80);  // tie to even (down)
  EXPECT_EQ(float_to_bf16(bits_to_float(0x3f818000u)), 0x3f82);  // tie to even (up)
  EXPECT_EQ(float_to_bf16(bits_to_float(0x3f808001u)), 0x3f81);
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(std::nanf("")))));
  EXPECT_EQ(bf16_to_float(0xc040), -3.0f);
}

}  // namespace
}  // namespace sparsevit::ops::cuda::testing
