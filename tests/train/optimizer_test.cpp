#include "train/optimizer.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "util/errors.h"

namespace sparsevit::train {
namespace {

// A ViT-shaped toy: top-level pos_embed / cls_token, a Linear (weight + bias), a LayerNorm,
// a nested block and a frozen parameter.
struct Toy : torch::nn::Module {
  Toy() {
    pos_embed = register_parameter("pos_embed", torch::zeros({1, 5, 4}));
    cls_token = register_parameter("cls_token", torch::zeros({1, 1, 4}));
    fc = register_module("fc", torch::nn::Linear(4, 3));
    norm = register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({4})));
    block = register_module("block", torch::nn::Sequential(torch::nn::Linear(4, 4)));
    frozen = register_parameter("frozen", torch::zeros({2, 2}), /*requires_grad=*/false);
  }
  torch::Tensor pos_embed, cls_token, frozen;
  torch::nn::Linear fc{nullptr};
  torch::nn::LayerNorm norm{nullptr};
  torch::nn::Sequential block{nullptr};
};

TEST(Optimizer, TimmDecaySplit) {
  Toy toy;
  const auto split = split_weight_decay(toy, OptimizerConfig{}.no_weight_decay_names);
  EXPECT_EQ(split.decay, (std::vector<std::string>{"fc.weight", "block.0.weight"}));
  EXPECT_EQ(split.no_decay,
            (std::vector<std::string>{"pos_embed", "cls_token", "fc.bias", "norm.weight", "norm.bias", "block.0.bias"}));
  // Without the skip list the 3-d embeddings are decayed like any weight.
  const auto plain = split_weight_decay(toy, {});
  EXPECT_EQ(plain.decay, (std::vector<std::string>{"pos_embed", "cls_token", "fc.weight", "block.0.weight"}));
  // A listed name also matches as the last component of a nested name.
  const auto nested = split_weight_decay(toy, {"weight"});
  EXPECT_EQ(nested.decay, (std::vector<std::string>{"pos_embed", "cls_token"}));
}

TEST(Optimizer, TwoGroupsWithRecipeDefaults) {
  Toy toy;
  OptimizerConfig config;
  config.lr = 2e-3;
  auto opt = make_adamw(toy, config);
  ASSERT_EQ(opt->param_groups().size(), 2u);
  const auto& decay = static_cast<const torch::optim::AdamWOptions&>(opt->param_groups()[0].options());
  const auto& no_decay = static_cast<const torch::optim::AdamWOptions&>(opt->param_groups()[1].options());
  EXPECT_EQ(opt->param_groups()[0].params().size(), 2u);
  EXPECT_EQ(opt->param_groups()[1].params().size(), 6u);
  EXPECT_DOUBLE_EQ(decay.weight_decay(), 0.05);
  EXPECT_DOUBLE_EQ(no_decay.weight_decay(), 0.0);
  EXPECT_DOUBLE_EQ(decay.eps(), 1e-6);
  EXPECT_DOUBLE_EQ(std::get<0>(decay.betas()), 0.9);
  EXPECT_DOUBLE_EQ(std::get<1>(no_decay.betas()), 0.999);
  EXPECT_DOUBLE_EQ(learning_rate(*opt), 2e-3);
  // The groups hold the module's own tensors.
  EXPECT_TRUE(opt->param_groups()[0].params()[0].is_same(toy.fc->weight));

  set_learning_rate(*opt, 5e-4);
  EXPECT_DOUBLE_EQ(opt->param_groups()[0].options().get_lr(), 5e-4);
  EXPECT_DOUBLE_EQ(opt->param_groups()[1].options().get_lr(), 5e-4);
}

TEST(Optimizer, FirstStepMatchesAdamWByHand) {
  torch::manual_seed(0);
  Toy toy;
  OptimizerConfig config;
  config.lr = 0.1;
  config.weight_decay = 0.5;
  auto opt = make_adamw(toy, config);
  const auto w0 = toy.fc->weight.detach().clone();
  const auto b0 = toy.fc->bias.detach().clone();
  toy.fc->weight.mutable_grad() = torch::full_like(w0, 0.25);
  toy.fc->bias.mutable_grad() = torch::full_like(b0, -2.0);
  opt->step();
  // Step 1: m_hat = g, v_hat = g^2  ->  p - lr*wd*p - lr * g / (|g| + eps).
  const auto w_expected = w0 - 0.1 * 0.5 * w0 - 0.1 * 0.25 / (0.25 + 1e-6);
  const auto b_expected = b0 - 0.1 * (-2.0) / (2.0 + 1e-6);  // no decay on the bias
  EXPECT_TRUE(torch::allclose(toy.fc->weight, w_expected, 1e-6, 1e-7));
  EXPECT_TRUE(torch::allclose(toy.fc->bias, b_expected, 1e-6, 1e-7));
}

TEST(Optimizer, RejectsBadHyperParameters) {
  Toy toy;
  OptimizerConfig c;
  c.eps = 0;
  EXPECT_THROW(make_adamw(toy, c), UsageError);
  c = OptimizerConfig{};
  c.weight_decay = -1;
  EXPECT_THROW(make_adamw(toy, c), UsageError);
  c = OptimizerConfig{};
  c.betas = {1.0, 0.999};
  EXPECT_THROW(make_adamw(toy, c), UsageError);
  torch::nn::Sequential empty;
  EXPECT_THROW(make_adamw(*empty, OptimizerConfig{}), UsageError);
}

TEST(Optimizer, BiasFreeModelGetsOneGroup) {
  torch::nn::Linear fc(torch::nn::LinearOptions(3, 2).bias(false));
  auto opt = make_adamw(*fc, OptimizerConfig{});
  EXPECT_EQ(opt->param_groups().size(), 1u);
}

TEST(Optimizer, ClipGradNorm) {
  auto a = torch::zeros({2}, torch::requires_grad());
  auto b = torch::zeros({1}, torch::requires_grad());
  auto c = torch::zeros({3}, torch::requires_grad());  // no gradient: skipped
  a.mutable_grad() = torch::tensor({3.0f, 4.0f});
  b.mutable_grad() = torch::tensor({12.0f});
  // Measuring only.
  EXPECT_NEAR(clip_grad_norm({a, b, c}, 0.0), 13.0, 1e-5);
  EXPECT_FLOAT_EQ(a.grad()[1].item<float>(), 4.0f);
  // Clipping to half the norm halves every gradient and returns the norm before clipping.
  EXPECT_NEAR(clip_grad_norm({a, b, c}, 6.5), 13.0, 1e-5);
  EXPECT_NEAR(a.grad()[0].item<float>(), 1.5f, 1e-5);
  EXPECT_NEAR(b.grad()[0].item<float>(), 6.0f, 1e-5);
  // Below the threshold nothing changes.
  EXPECT_NEAR(clip_grad_norm({a, b}, 100.0), 6.5, 1e-5);
  EXPECT_NEAR(b.grad()[0].item<float>(), 6.0f, 1e-5);
}


// ViT parameter names for the layer-decay rule: cls_token, pos_embed, patch_embed.*, blocks.<i>.*, norm, head.
struct ToyVit : torch::nn::Module {
  ToyVit() {
    cls_token = register_parameter("cls_token", torch::zeros({1, 1, 4}));
    pos_embed = register_parameter("pos_embed", torch::zeros({1, 5, 4}));
    register_module("patch_embed", torch::nn::Linear(4, 4));
    auto blocks = register_module("blocks", torch::nn::ModuleList());
    for (int i = 0; i < 2; ++i) blocks->push_back(torch::nn::Linear(4, 4));
    register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({4})));
    register_module("head", torch::nn::Linear(4, 3));
  }
  torch::Tensor cls_token, pos_embed;
};

TEST(Optimizer, LayerIdsFollowMaesRule) {
  EXPECT_EQ(vit_layer_id("cls_token", 13), 0);
  EXPECT_EQ(vit_layer_id("pos_embed", 13), 0);
  EXPECT_EQ(vit_layer_id("patch_embed.proj.weight", 13), 0);
  EXPECT_EQ(vit_layer_id("blocks.0.attn.qkv.weight", 13), 1);
  EXPECT_EQ(vit_layer_id("blocks.11.mlp.fc2.bias", 13), 12);
  EXPECT_EQ(vit_layer_id("fc_norm.weight", 13), 13);
  EXPECT_EQ(vit_layer_id("head.weight", 13), 13);
}

// MAE's lr_decay.param_groups_lrd: one group per (layer id, decay), lr_scale = decay^(L - id),
// in order of first appearance; the schedule's lr is multiplied by each group's scale.
TEST(Optimizer, LayerDecayGroupsAndScalesAsMae) {
  ToyVit toy;
  OptimizerConfig config;
  config.layer_decay = 0.5;
  config.num_layers = 3;  // 2 blocks + 1
  const auto groups = parameter_groups(toy, config);
  ASSERT_EQ(groups.size(), 8u);
  EXPECT_EQ(groups[0].names, (std::vector<std::string>{"cls_token", "pos_embed", "patch_embed.bias"}));
  EXPECT_EQ(groups[1].names, (std::vector<std::string>{"patch_embed.weight"}));
  EXPECT_EQ(groups[2].names, (std::vector<std::string>{"blocks.0.weight"}));
  EXPECT_EQ(groups[3].names, (std::vector<std::string>{"blocks.0.bias"}));
  EXPECT_EQ(groups[6].names, (std::vector<std::string>{"norm.weight", "norm.bias", "head.bias"}));
  EXPECT_EQ(groups[7].names, (std::vector<std::string>{"head.weight"}));
  const std::vector<double> scales = {0.125, 0.125, 0.25, 0.25, 0.5, 0.5, 1.0, 1.0};
  const std::vector<double> decays = {0, 0.05, 0.05, 0, 0.05, 0, 0, 0.05};
  for (std::size_t i = 0; i < groups.size(); ++i) {
    EXPECT_DOUBLE_EQ(groups[i].lr_scale, scales[i]) << i;
    EXPECT_DOUBLE_EQ(groups[i].weight_decay, decays[i]) << i;
  }
  auto opt = make_adamw(toy, config);
  ASSERT_EQ(opt->param_groups().size(), 8u);
  std::vector<double> lr_scales;
  for (const auto& g : groups) lr_scales.push_back(g.lr_scale);
  set_learning_rate(*opt, 1e-3, lr_scales);
  EXPECT_DOUBLE_EQ(opt->param_groups()[0].options().get_lr(), 1.25e-4);
  EXPECT_DOUBLE_EQ(opt->param_groups()[7].options().get_lr(), 1e-3);
  config.layer_decay = 0;
  EXPECT_THROW(make_adamw(toy, config), UsageError);
}

}  // namespace
}  // namespace sparsevit::train
