// Golden tests of ConditionalUnet1D against an independent float64 reference of Diffusion
// Policy's model (tests/golden/conditional_unet1d_reference.py, fixture by
// tests/golden/make_diffusion_policy_golden.py): the weights load by the original's state_dict
// names, and the prediction and the mid features match in float32.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "policy/conditional_unet1d.h"
#include "policy_golden.h"

namespace sparsevit::golden::diffusion_policy {
namespace {

TEST(ConditionalUnet1DGolden, FilmScaleAndGlobalCondMatchTheReference) {
  policy::ConditionalUnet1D unet(2, 6, 8, {8, 16}, 5, 4, true);
  load_by_name(unet, {&kUnetFilmWeights});
  const at::Tensor sample = float_tensor(kUnetSample, {2, 8, 2});
  const at::Tensor cond = float_tensor(kUnetFilmGlobalCond, {2, 6});
  at::NoGradGuard no_grad;
  const auto out = unet.forward_with_mid(sample, at::tensor({3, 71}, at::kLong), cond);
  EXPECT_LT(max_relative_error(out.prediction, double_tensor(kUnetFilmPrediction, {2, 8, 2})), kTolerance);
  EXPECT_LT(max_relative_error(out.mid, double_tensor(kUnetFilmMid, {2, 16, 4})), kTolerance);
  EXPECT_EQ(unet.mid_horizon(8), 4);
  // Float timesteps embed the same values as integer ones.
  const at::Tensor as_float = unet.forward(sample, at::tensor({3.0f, 71.0f}), cond);
  EXPECT_LT(max_relative_error(as_float, double_tensor(kUnetFilmPrediction, {2, 8, 2})), kTolerance);
}

TEST(ConditionalUnet1DGolden, BiasOnlyFilmWithoutGlobalCondMatchesTheReference) {
  policy::ConditionalUnet1D unet(2, 0, 8, {8, 8, 8}, 3, 2, false);
  load_by_name(unet, {&kUnetBiasWeights});
  at::NoGradGuard no_grad;
  const auto out = unet.forward_with_mid(float_tensor(kUnetSample, {2, 8, 2}), at::tensor({0, 99}, at::kLong), {});
  EXPECT_LT(max_relative_error(out.prediction, double_tensor(kUnetBiasPrediction, {2, 8, 2})), kTolerance);
  EXPECT_LT(max_relative_error(out.mid, double_tensor(kUnetBiasMid, {2, 8, 2})), kTolerance);
}

// The comparison can fail: a different norm grouping, timestep or conditioning moves the output
// far beyond the tolerance, and a different FiLM variant does not even load.
TEST(ConditionalUnet1DGolden, WrongNormTimestepOrWiringDoesNotMatch) {
  const at::Tensor sample = float_tensor(kUnetSample, {2, 8, 2});
  const at::Tensor cond = float_tensor(kUnetFilmGlobalCond, {2, 6});
  const at::Tensor expected = double_tensor(kUnetFilmPrediction, {2, 8, 2});
  at::NoGradGuard no_grad;
  policy::ConditionalUnet1D wrong_groups(2, 6, 8, {8, 16}, 5, 2, true);
  load_by_name(wrong_groups, {&kUnetFilmWeights});
  EXPECT_GT(max_relative_error(wrong_groups.forward(sample, at::tensor({3, 71}), cond), expected), 1e-3);

  policy::ConditionalUnet1D unet(2, 6, 8, {8, 16}, 5, 4, true);
  load_by_name(unet, {&kUnetFilmWeights});
  EXPECT_GT(max_relative_error(unet.forward(sample, at::tensor({4, 71}), cond), expected), 1e-3);
  EXPECT_GT(max_relative_error(unet.forward(sample, at::tensor({3, 71}), cond.flip(1)), expected), 1e-3);

  policy::ConditionalUnet1D bias_only(2, 6, 8, {8, 16}, 5, 4, false);
  EXPECT_THROW(load_by_name(bias_only, {&kUnetFilmWeights}), std::runtime_error);
}

}  // namespace
}  // namespace sparsevit::golden::diffusion_policy
