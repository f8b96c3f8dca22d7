// Golden tests of CrosswayDecoder against the independent float64 reference of Crossway
// Diffusion's image decoders (tests/golden/conditional_unet1d_reference.py): type C on the
// U-Net's mid features and type D on the observation features, plus the positional grid.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <cmath>

#include "policy/crossway_decoder.h"
#include "policy_golden.h"
#include "util/errors.h"

namespace sparsevit::golden::diffusion_policy {
namespace {

policy::CrosswayDecoderOptions golden_options(policy::CrosswayInput input, int64_t feature_dim) {
  policy::CrosswayDecoderOptions o;
  o.input = input;
  o.feature_dim = feature_dim;
  o.n_obs_steps = 2;
  o.decode_dims = {8, 16};
  o.decode_pe_dim = 8;
  o.decode_resolution = 2;
  o.image_height = o.image_width = 8;
  o.kernel_size = 3;
  o.n_groups = 4;
  return o;
}

TEST(CrosswayDecoderGolden, UnetMidFeaturesMatchTheReference) {
  policy::CrosswayDecoder decoder(golden_options(policy::CrosswayInput::kUnetMid, 16));
  load_by_name(decoder, {&kDecoderMidWeights});
  at::NoGradGuard no_grad;
  const at::Tensor rec = decoder.forward(float_tensor(kDecoderMidInput, {2, 16, 4}));
  ASSERT_EQ(rec.sizes(), at::IntArrayRef({4, 3, 8, 8}));
  EXPECT_LT(max_relative_error(rec, double_tensor(kDecoderMidReconstruction, {4, 3, 8, 8})), kTolerance);
}

TEST(CrosswayDecoderGolden, ObservationFeaturesMatchTheReference) {
  policy::CrosswayDecoder decoder(golden_options(policy::CrosswayInput::kObsFeatures, 6));
  // The blocks and final conv are the type C case's; proj is its own.
  std::vector<PolicyGoldenTensor> shared;
  for (const auto& t : kDecoderMidWeights)
    if (std::string(t.name).rfind("proj.", 0) != 0) shared.push_back(t);
  load_by_name(decoder, {&shared, &kDecoderObsProjWeights});
  at::NoGradGuard no_grad;
  const at::Tensor rec = decoder.forward(float_tensor(kUnetFilmGlobalCond, {2, 6}));
  EXPECT_LT(max_relative_error(rec, double_tensor(kDecoderObsReconstruction, {4, 3, 8, 8})), kTolerance);
  // Swapping the two observation steps swaps the reconstructions (batch-major order).
  const at::Tensor swapped = decoder.forward(float_tensor(kUnetFilmGlobalCond, {2, 6}).view({2, 2, 3}).flip(1).reshape({2, 6}));
  EXPECT_LT(max_relative_error(swapped[0], double_tensor(kDecoderObsReconstruction, {4, 3, 8, 8})[1]), kTolerance);
}

TEST(CrosswayDecoderGolden, PositionalGridIsSinCosOfTheScaledCoordinates) {
  const at::Tensor grid = policy::crossway_positional_grid(1, 8, 3, 5, at::TensorOptions(at::kDouble));
  ASSERT_EQ(grid.sizes(), at::IntArrayRef({1, 8, 3, 5}));
  // Row 2 is y = +1, column 1 is x = -0.5; channels: sin(pi y), sin(pi x), sin(2pi y), sin(2pi x), cos(...).
  const double y = 1.0, x = -0.5;
  const double expected[] = {std::sin(M_PI * y), std::sin(M_PI * x), std::sin(2 * M_PI * y), std::sin(2 * M_PI * x),
                             std::cos(M_PI * y), std::cos(M_PI * x), std::cos(2 * M_PI * y), std::cos(2 * M_PI * x)};
  for (int c = 0; c < 8; ++c) EXPECT_NEAR(grid[0][c][2][1].item<double>(), expected[c], 1e-12) << "channel " << c;
}

TEST(CrosswayDecoder, DefaultsAreThePushTConfigAndLossIsWeightedMse) {
  policy::CrosswayDecoderOptions o;
  EXPECT_EQ(o.decode_dims, (std::vector<int64_t>{128, 256}));
  EXPECT_DOUBLE_EQ(o.loss_weight, 0.1);
  EXPECT_EQ(o.image_height, 96);
  policy::CrosswayDecoder decoder(golden_options(policy::CrosswayInput::kUnetMid, 16));
  const at::Tensor a = at::zeros({4, 3, 8, 8}), b = at::full({4, 3, 8, 8}, 2.0);
  EXPECT_NEAR(decoder.loss(a, b).item<double>(), 0.1 * 4.0, 1e-6);
  EXPECT_THROW(decoder.loss(a, at::zeros({4, 3, 4, 4})), sparsevit::UsageError);
  EXPECT_THROW(decoder.forward(at::zeros({2, 16, 3})), sparsevit::UsageError);  // 3 positions: not a 2 x 2 grid
}

}  // namespace
}  // namespace sparsevit::golden::diffusion_policy
