// EMAModel: Diffusion Policy's warm-up decay sequence and the averaged weights after a few steps.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>

#include <cmath>

#include "policy/ema_model.h"
#include "util/errors.h"

namespace sparsevit::policy {
namespace {

struct Tiny : torch::nn::Module {
  Tiny() {
    fc = register_module("fc", torch::nn::Linear(2, 1));
    frozen = register_parameter("frozen", at::zeros({2}), /*requires_grad=*/false);
    table = register_buffer("table", at::zeros({3}));
  }
  torch::nn::Linear fc{nullptr};
  at::Tensor frozen, table;
};

void fill(Tiny& m, double value) {
  at::NoGradGuard no_grad;
  m.fc->weight.fill_(value);
  m.fc->bias.fill_(value);
  m.frozen.fill_(value);
  m.table.fill_(value);
}

TEST(EMAModel, DecayFollowsTheWarmupFormula) {
  Tiny model;
  EMAModel ema(model);
  EXPECT_DOUBLE_EQ(ema.decay_at(0), 0.0);
  EXPECT_DOUBLE_EQ(ema.decay_at(1), 0.0);  // s = max(0, step - 1) = 0
  EXPECT_NEAR(ema.decay_at(2), 1 - std::pow(2.0, -0.75), 1e-15);
  EXPECT_NEAR(ema.decay_at(10), 1 - std::pow(10.0, -0.75), 1e-15);  // 0.8221720...
  EXPECT_NEAR(ema.decay_at(10), 0.822172, 1e-6);
  EXPECT_NEAR(ema.decay_at(1000), 1 - std::pow(1000.0, -0.75), 1e-15);  // 0.9943766...
  EXPECT_NEAR(ema.decay_at(1000), 0.994377, 1e-6);
  EXPECT_DOUBLE_EQ(ema.decay_at(100000000), 0.9999);  // capped at max_value
  EMAModel delayed(model, EmaOptions{/*update_after_step=*/5});
  EXPECT_DOUBLE_EQ(delayed.decay_at(6), 0.0);
  EXPECT_NEAR(delayed.decay_at(15), 1 - std::pow(10.0, -0.75), 1e-15);
}

TEST(EMAModel, AveragesTrainedParametersAndCopiesTheRest) {
  Tiny model;
  fill(model, 1.0);
  EMAModel ema(model);
  // Steps 0 and 1 have decay 0: the average becomes the model.
  fill(model, 2.0);
  ema.step(model);
  EXPECT_DOUBLE_EQ(ema.decay(), 0.0);
  fill(model, 3.0);
  ema.step(model);
  EXPECT_FLOAT_EQ(ema.averaged("fc.weight")[0][0].item<float>(), 3.0f);
  // Step 2: decay d2 = 1 - 2^-0.75; step 3: d3 = 1 - 3^-0.75.
  fill(model, 5.0);
  ema.step(model);
  const double d2 = 1 - std::pow(2.0, -0.75), d3 = 1 - std::pow(3.0, -0.75);
  fill(model, 7.0);
  ema.step(model);
  EXPECT_NEAR(ema.decay(), d3, 1e-15);
  EXPECT_EQ(ema.optimization_step(), 4);
  const double expected = d3 * (d2 * 3.0 + (1 - d2) * 5.0) + (1 - d3) * 7.0;
  EXPECT_NEAR(ema.averaged("fc.weight")[0][1].item<double>(), expected, 1e-5);
  EXPECT_NEAR(ema.averaged("fc.bias")[0].item<double>(), expected, 1e-5);
  EXPECT_FLOAT_EQ(ema.averaged("frozen")[0].item<float>(), 7.0f);  // requires_grad false: copied
  EXPECT_FLOAT_EQ(ema.averaged("table")[2].item<float>(), 7.0f);   // buffers: copied

  Tiny target;
  ema.copy_to(target);
  EXPECT_NEAR(target.fc->weight[0][0].item<double>(), expected, 1e-5);
  EXPECT_FLOAT_EQ(target.table[0].item<float>(), 7.0f);
  EXPECT_THROW(ema.averaged("nope"), UsageError);
  torch::nn::Linear other(3, 1);
  EXPECT_THROW(ema.step(*other), UsageError);
}

}  // namespace
}  // namespace sparsevit::policy
