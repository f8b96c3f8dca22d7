// ConditionalUnet1D beyond the golden values: state_dict names, shapes for several depths and
// horizons, gradients to every parameter, a tiny model overfitting one noisy target, errors.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <torch/optim/adam.h>
#include <torch/utils.h>

#include <string>
#include <vector>

#include "policy/conditional_unet1d.h"
#include "policy/crossway_decoder.h"
#include "util/errors.h"

namespace sparsevit::policy {
namespace {

TEST(ConditionalUnet1D, ParameterNamesAreDiffusionPolicys) {
  ConditionalUnet1D unet(2, 6, 8, {8, 16}, 5, 4, true);
  const auto params = unet.named_parameters();
  for (const char* name :
       {"diffusion_step_encoder.1.weight", "diffusion_step_encoder.3.bias", "down_modules.0.0.blocks.0.block.0.weight",
        "down_modules.0.0.blocks.1.block.1.bias", "down_modules.0.0.cond_encoder.1.weight",
        "down_modules.0.0.residual_conv.weight", "down_modules.0.2.conv.weight", "mid_modules.1.blocks.1.block.0.bias",
        "up_modules.0.0.residual_conv.weight", "up_modules.0.2.conv.weight", "final_conv.0.block.0.weight",
        "final_conv.0.block.1.weight", "final_conv.1.weight"})
    EXPECT_NE(params.find(name), nullptr) << name;
  EXPECT_EQ(params.find("down_modules.1.2.conv.weight"), nullptr);  // the last level does not downsample
  EXPECT_EQ(params.find("down_modules.0.1.residual_conv.weight"), nullptr);  // same channels: identity
  EXPECT_EQ(params["down_modules.0.0.cond_encoder.1.weight"].sizes(), at::IntArrayRef({16, 14}));  // 2 x 8, 8 + 6
  EXPECT_EQ(params["up_modules.0.0.blocks.0.block.0.weight"].sizes(), at::IntArrayRef({8, 32, 5}));
}

TEST(ConditionalUnet1D, ShapesForSeveralDepthsAndHorizons) {
  struct Case {
    std::vector<int64_t> down_dims;
    int64_t horizon, mid_horizon;
  };
  at::NoGradGuard no_grad;
  for (const Case& c : {Case{{8, 16}, 8, 4}, Case{{8, 16}, 10, 5}, Case{{8, 16, 32}, 16, 4}, Case{{16}, 5, 5},
                        Case{{8, 8, 16, 16}, 16, 2}}) {
    ConditionalUnet1D unet(3, 4, 16, c.down_dims, 5, 4, true);
    const auto out = unet.forward_with_mid(at::randn({2, c.horizon, 3}), at::tensor({5, 60}), at::randn({2, 4}));
    EXPECT_EQ(out.prediction.sizes(), at::IntArrayRef({2, c.horizon, 3}));
    EXPECT_EQ(out.mid.sizes(), at::IntArrayRef({2, c.down_dims.back(), c.mid_horizon}));
    EXPECT_EQ(unet.mid_horizon(c.horizon), c.mid_horizon);
    // A scalar timestep is broadcast over the batch.
    EXPECT_EQ(unet.forward(at::randn({2, c.horizon, 3}), at::tensor(7), at::randn({2, 4})).sizes(),
              at::IntArrayRef({2, c.horizon, 3}));
  }
}

TEST(ConditionalUnet1D, MidFeaturesOfHorizon16FeedTheCrosswayDecoder) {
  at::NoGradGuard no_grad;
  ConditionalUnet1D unet(2, 4, 16, {16, 32, 64}, 5, 8, true);
  const auto out = unet.forward_with_mid(at::randn({1, 16, 2}), at::tensor({10}), at::randn({1, 4}));
  CrosswayDecoderOptions o;
  o.feature_dim = 64;
  o.n_obs_steps = 2;
  o.decode_dims = {16, 32};
  o.decode_pe_dim = 8;
  o.image_height = o.image_width = 12;  // 6 x 6 grid before the upsampling: the 2 x 2 grid tiled 3 x 3
  CrosswayDecoder decoder(o);
  EXPECT_EQ(decoder.forward(out.mid).sizes(), at::IntArrayRef({2, 3, 12, 12}));
}

TEST(ConditionalUnet1D, GradientsReachEveryParameter) {
  torch::manual_seed(0);
  ConditionalUnet1D unet(2, 6, 8, {8, 16, 16}, 5, 4, true);
  const at::Tensor loss = unet.forward(at::randn({3, 8, 2}), at::tensor({1, 50, 99}), at::randn({3, 6})).pow(2).mean();
  loss.backward();
  for (const auto& item : unet.named_parameters()) {
    ASSERT_TRUE(item.value().grad().defined()) << item.key();
    EXPECT_GT(item.value().grad().abs().sum().item<double>(), 0.0) << item.key();
  }
}

TEST(ConditionalUnet1D, OverfitsOneNoisyTarget) {
  torch::manual_seed(1);
  ConditionalUnet1D unet(2, 6, 8, {8, 16}, 5, 4, true);
  const at::Tensor sample = at::randn({4, 8, 2}), cond = at::randn({4, 6}), target = at::randn({4, 8, 2});
  const at::Tensor steps = at::tensor({3, 20, 45, 90});
  torch::optim::Adam adam(unet.parameters(), torch::optim::AdamOptions(1e-2));
  double first = 0, last = 0;
  for (int i = 0; i < 60; ++i) {
    adam.zero_grad();
    const at::Tensor loss = (unet.forward(sample, steps, cond) - target).pow(2).mean();
    loss.backward();
    adam.step();
    (i == 0 ? first : last) = loss.item<double>();
  }
  EXPECT_GT(first, 0.5);  // unit-variance target, untrained model
  // Measured 1.31 -> 0.027 (1/50) in 60 steps; 1/20 leaves room for other BLAS / thread counts.
  EXPECT_LT(last, first / 20.0) << first << " -> " << last;
}

TEST(ConditionalUnet1D, RejectsBadShapes) {
  ConditionalUnet1D unet(2, 6, 8, {8, 16, 16}, 5, 4, true);
  EXPECT_THROW(unet.forward(at::randn({2, 6, 2}), at::tensor({1, 2}), at::randn({2, 6})), UsageError);  // 6 % 4
  EXPECT_THROW(unet.forward(at::randn({2, 8, 3}), at::tensor({1, 2}), at::randn({2, 6})), UsageError);
  EXPECT_THROW(unet.forward(at::randn({2, 8, 2}), at::tensor({1, 2}), at::randn({2, 5})), UsageError);
  EXPECT_THROW(unet.forward(at::randn({2, 8, 2}), at::tensor({1, 2}), at::Tensor()), UsageError);
  EXPECT_THROW(unet.forward(at::randn({2, 8, 2}), at::tensor({1, 2, 3}), at::randn({2, 6})), UsageError);
  EXPECT_THROW(ConditionalUnet1D(2, 6, 8, {8, 12}, 5, 8, true), UsageError);  // 12 channels in 8 groups
  EXPECT_THROW(ConditionalUnet1D(2, 6, 8, {}, 5, 8, true), UsageError);
}

}  // namespace
}  // namespace sparsevit::policy
