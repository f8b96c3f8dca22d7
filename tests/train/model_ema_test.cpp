#include "train/model_ema.h"

#include <gtest/gtest.h>

#include <cmath>
#include <torch/torch.h>

#include <sstream>

#include "util/errors.h"

namespace sparsevit::train {
namespace {

struct Net : torch::nn::Module {
  explicit Net(int64_t hidden = 4) {
    fc = register_module("fc", torch::nn::Linear(3, hidden));
    norm = register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({hidden})));
    steps = register_buffer("steps", torch::zeros({1}, torch::kLong));
    scale = register_buffer("scale", torch::ones({hidden}));
  }
  torch::nn::Linear fc{nullptr};
  torch::nn::LayerNorm norm{nullptr};
  torch::Tensor steps, scale;
};

void fill(Net& net, float value) {
  torch::NoGradGuard g;
  for (auto& p : net.parameters()) p.fill_(value);
  net.scale.fill_(value);
  net.steps.fill_(static_cast<int64_t>(value));
}

TEST(ModelEma, StartsAsADeepCopy) {
  torch::manual_seed(0);
  Net net;
  ModelEma ema(net);
  ASSERT_EQ(ema.tensors().size(), 6u);  // fc.weight, fc.bias, norm.weight, norm.bias, steps, scale
  EXPECT_EQ(ema.tensors()[0].first, "fc.weight");
  EXPECT_TRUE(ema.tensors()[0].second.equal(net.fc->weight));
  EXPECT_FALSE(ema.tensors()[0].second.requires_grad());
  fill(net, 5.0f);
  EXPECT_FALSE(ema.tensors()[0].second.equal(net.fc->weight)) << "EMA shares storage with the model";
}

TEST(ModelEma, UpdateIsTheExponentialAverage) {
  Net net;
  fill(net, 1.0f);
  ModelEma ema(net);
  fill(net, 3.0f);
  ema.update(net, 0.9);  // 0.9 * 1 + 0.1 * 3 = 1.2
  for (const auto& [name, t] : ema.tensors()) {
    if (name == "steps") {
      EXPECT_EQ(t.item<int64_t>(), 3) << "integer buffers are copied";
    } else {
      EXPECT_TRUE(torch::allclose(t, torch::full_like(t, 1.2f))) << name;
    }
  }
  ema.update(net, 0.5);  // 0.5 * 1.2 + 0.5 * 3 = 2.1
  EXPECT_NEAR(ema.tensors()[0].second[0][0].item<float>(), 2.1f, 1e-6);
  ema.update(net, 1.0);  // frozen
  EXPECT_NEAR(ema.tensors()[0].second[0][0].item<float>(), 2.1f, 1e-6);
  ema.update(net, 0.0);  // copy
  EXPECT_FLOAT_EQ(ema.tensors()[0].second[0][0].item<float>(), 3.0f);
  EXPECT_EQ(ema.num_updates(), 4);
  EXPECT_THROW(ema.update(net, 1.5), UsageError);
}

// Diffusion Policy's EMAModel: parameters without gradient (a frozen encoder) are copied, not
// averaged, so they stay bit-exact; with copy_buffers the buffers are copied too.
TEST(ModelEma, FrozenParametersAndDpBuffersAreCopied) {
  for (bool copy_buffers : {false, true}) {
    Net net;
    fill(net, 1.0f);
    net.fc->weight.set_requires_grad(false);
    ModelEma ema(net, copy_buffers);
    fill(net, 3.0f);
    ema.update(net, 0.9);
    for (const auto& [name, t] : ema.tensors()) {
      const bool copied = name == "fc.weight" || name == "steps" || (copy_buffers && name == "scale");
      EXPECT_TRUE(torch::allclose(t.to(torch::kFloat), torch::full_like(t, copied ? 3.0f : 1.2f).to(torch::kFloat)))
          << name << " copy_buffers " << copy_buffers;
    }
  }
  // A constant averaged with decay 0.9 drifts in its last bits; copied it does not.
  Net net;
  torch::NoGradGuard g;
  net.fc->weight.copy_(torch::rand_like(net.fc->weight));
  net.fc->weight.set_requires_grad(false);
  ModelEma ema(net);
  for (int i = 0; i < 50; ++i) ema.update(net, 0.9);
  EXPECT_TRUE(ema.tensors()[0].second.equal(net.fc->weight));
}

TEST(ModelEma, UpdateDoesNotTouchAutograd) {
  Net net;
  ModelEma ema(net);
  auto loss = net.fc->forward(torch::ones({2, 3})).sum();
  ema.update(net, 0.99);
  loss.backward();  // the graph is intact
  EXPECT_TRUE(net.fc->weight.grad().defined());
  EXPECT_FALSE(ema.tensors()[0].second.requires_grad());
}

TEST(ModelEma, SwapAndScopeRestoreTheTrainingWeights) {
  Net net;
  fill(net, 1.0f);
  ModelEma ema(net);
  fill(net, 7.0f);
  {
    EmaWeightsScope scope(ema, net);
    EXPECT_FLOAT_EQ(net.fc->weight[0][0].item<float>(), 1.0f);
    EXPECT_FLOAT_EQ(net.scale[0].item<float>(), 1.0f);
    EXPECT_FLOAT_EQ(ema.tensors()[0].second[0][0].item<float>(), 7.0f);
  }
  EXPECT_FLOAT_EQ(net.fc->weight[0][0].item<float>(), 7.0f);
  EXPECT_FLOAT_EQ(ema.tensors()[0].second[0][0].item<float>(), 1.0f);
  ema.copy_to(net);
  EXPECT_FLOAT_EQ(net.fc->weight[0][0].item<float>(), 1.0f);
  EXPECT_EQ(net.steps.item<int64_t>(), 1);
}

TEST(ModelEma, SaveLoadRoundTrip) {
  torch::manual_seed(1);
  Net net;
  ModelEma ema(net);
  fill(net, 2.0f);
  ema.update(net, 0.75);
  std::stringstream buffer;
  {
    torch::serialize::OutputArchive out;
    ema.save(out);
    out.save_to(buffer);
  }
  torch::manual_seed(2);
  Net other;
  ModelEma restored(other);
  torch::serialize::InputArchive in;
  in.load_from(buffer);
  restored.load(in);
  ASSERT_EQ(restored.tensors().size(), ema.tensors().size());
  for (size_t i = 0; i < ema.tensors().size(); ++i) {
    EXPECT_TRUE(restored.tensors()[i].second.equal(ema.tensors()[i].second)) << ema.tensors()[i].first;
  }
  EXPECT_EQ(restored.num_updates(), 1);
}

TEST(ModelEma, MismatchedModelIsAClearError) {
  Net small(4), large(8);
  ModelEma ema(small);
  try {
    ema.update(large, 0.9);
    FAIL() << "expected RuntimeError";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("fc.weight"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ema.swap_into(large), RuntimeError);
  torch::nn::Linear unrelated(3, 4);
  EXPECT_THROW(ema.copy_to(*unrelated), RuntimeError);
}

TEST(EmaWarmup, DecayFollowsDiffusionPolicysSchedule) {
  const EmaWarmup w;  // Diffusion Policy's defaults
  EXPECT_DOUBLE_EQ(ema_warmup_decay(0, w), 0.0);
  EXPECT_DOUBLE_EQ(ema_warmup_decay(1, w), 0.0);  // s = max(0, step - 1) = 0
  EXPECT_NEAR(ema_warmup_decay(2, w), 1 - std::pow(2.0, -0.75), 1e-15);
  EXPECT_NEAR(ema_warmup_decay(10, w), 0.822172, 1e-6);     // 1 - 10^-0.75
  EXPECT_NEAR(ema_warmup_decay(1000, w), 0.994377, 1e-6);   // 1 - 1000^-0.75
  EXPECT_DOUBLE_EQ(ema_warmup_decay(100000000, w), 0.9999);  // capped at max_value
  EmaWarmup delayed;
  delayed.update_after_step = 5;
  EXPECT_DOUBLE_EQ(ema_warmup_decay(6, delayed), 0.0);
  EXPECT_NEAR(ema_warmup_decay(15, delayed), 1 - std::pow(10.0, -0.75), 1e-15);
}

}  // namespace
}  // namespace sparsevit::train
