#include "models/vision_transformer.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "attention/vit_attention.h"
#include "models/model_registry.h"
#include "models_test_util.h"
#include "util/errors.h"

namespace sparsevit::models {
namespace {

int64_t count_parameters(torch::nn::Module& m) {
  int64_t n = 0;
  for (const auto& p : m.parameters()) n += p.numel();
  return n;
}

using test_util::spec_of;

TEST(VisionTransformer, ParameterCountsMatchTimm) {
  // timm: vit_base_patch16_224 86,567,656; vit_tiny_patch16_224 5,717,416; vit_small 22,050,664.
  EXPECT_EQ(count_parameters(*create_model("vit_base_patch16_224", {})), 86567656);
  EXPECT_EQ(count_parameters(*create_model("vit_tiny_patch16_224", {})), 5717416);
  EXPECT_EQ(count_parameters(*create_model("vit_small_patch16_224", {})), 22050664);
}

TEST(VisionTransformer, TimmParameterNames) {
  auto model = create_model("vit_nano_patch2_28", {});
  const auto params = model->named_parameters();
  for (const char* name : {"cls_token", "pos_embed", "patch_embed.proj.weight", "blocks.0.norm1.weight",
                           "blocks.0.attn.qkv.weight", "blocks.0.attn.qkv.bias", "blocks.0.attn.proj.weight",
                           "blocks.3.mlp.fc1.weight", "blocks.3.mlp.fc2.bias", "norm.weight", "head.weight"})
    EXPECT_TRUE(params.contains(name)) << name;
}

TEST(VisionTransformer, ForwardShapesAndPatterns) {
  ModelOptions o;
  o.attention = config::default_attention_spec();
  auto model = create_model("vit_nano_patch2_28", o);
  const at::Tensor x = torch::randn({3, 1, 28, 28});
  EXPECT_EQ(model->forward_features(x).sizes(), (at::IntArrayRef{3, 197, 64}));
  EXPECT_EQ(model->forward(x).sizes(), (at::IntArrayRef{3, 10}));
  const auto patterns = model->layer_patterns();
  ASSERT_EQ(patterns.size(), 4u);
  for (const auto& p : patterns) ASSERT_TRUE(p.has_value());
  EXPECT_EQ(model->blocks()[0]->attn().kernel_name(), "sparse");  // auto picks sparse at ~3% density
  EXPECT_TRUE(model->named_buffers().contains("blocks.0.attn.row_ptr"));
  EXPECT_THROW(model->forward(torch::randn({1, 1, 32, 32})), UsageError);
}

TEST(VisionTransformer, SparseMaskedAndDenseKernelsAgree) {
  // The same weights through the sparse operator, the dense masked path, and (for a pattern
  // that allows every pair) plain dense attention.
  torch::manual_seed(0);
  const at::Tensor x = torch::randn({2, 1, 28, 28});
  auto run = [&](const std::string& yaml) {
    ModelOptions o;
    o.attention = spec_of(yaml);
    torch::manual_seed(1);
    auto model = create_model("vit_nano_patch2_28", o);
    model->eval();
    return model->forward(x);
  };
  const std::string fibo = "attention: {mask: fibo, mask_kwargs: {w_min: 5, w_max: 65}, kernel: ";
  EXPECT_TRUE(torch::allclose(run(fibo + "sparse}"), run(fibo + "masked}"), 1e-4, 1e-5));
  const std::string full = "attention: {mask: local, mask_kwargs: {window: 196}, kernel: ";
  EXPECT_TRUE(torch::allclose(run(full + "sparse}"), run("attention: {backend: vit}"), 1e-4, 1e-5));
  EXPECT_FALSE(torch::allclose(run(fibo + "sparse}"), run("attention: {backend: vit}"), 1e-4, 1e-5));
}

TEST(VisionTransformer, GradientsReachEveryParameter) {
  ModelOptions o;
  o.attention = config::default_attention_spec();
  auto model = create_model("vit_nano_patch2_28", o);
  const at::Tensor loss = model->forward(torch::randn({2, 1, 28, 28})).logsumexp(1).sum();
  loss.backward();
  for (const auto& p : model->named_parameters()) {
    ASSERT_TRUE(p.value().grad().defined()) << p.key();
    EXPECT_GT(p.value().grad().abs().sum().item<double>(), 0.0) << p.key();
  }
}

TEST(VisionTransformer, BadShapesAreUsageErrors) {
  EXPECT_THROW(create_model("vit_bse_patch16_224", {}), UsageError);
  ModelOptions o;
  o.num_classes = -1;
  EXPECT_THROW(create_model("vit_nano_patch2_28", o), UsageError);
  VitConfig c;
  c.img_size = 30;
  c.patch_size = 4;
  EXPECT_THROW(VisionTransformer{c}, UsageError);
}

TEST(VisionTransformer, NoClassesMeansAFeatureExtractorWithoutHead) {
  ModelOptions o;
  o.num_classes = 0;  // timm's num_classes=0: the pooled features (the policy's encoder)
  const auto model = create_model("vit_nano_patch4_28", o);
  for (const auto& p : model->named_parameters()) EXPECT_EQ(p.key().rfind("head.", 0), std::string::npos) << p.key();
  EXPECT_EQ(model->forward(torch::randn({2, 1, 28, 28})).sizes(), (at::IntArrayRef{2, 64}));
}

TEST(VisionTransformer, AttentionGeometryComesFromTheConfig) {
  const VitConfig base = vit_config(find_model_shape("vit_base_patch16_224"), {});
  const AttentionGeometry g = base.attention_geometry();
  EXPECT_EQ(g.num_tokens, 197);
  EXPECT_EQ(g.num_prefix_tokens, 1);
  EXPECT_EQ(g.num_patches(), 196);
  EXPECT_EQ(g.num_heads, 12);
  EXPECT_EQ(g.head_dim, 64);
  EXPECT_EQ(g.num_layers, 12);
  // The prefix count is a field: N follows it (the ViT itself builds one class token only).
  VitConfig registers = base;
  registers.num_prefix_tokens = 5;
  EXPECT_EQ(registers.num_tokens(), 201);
  EXPECT_EQ(registers.attention_geometry().num_patches(), 196);
  registers.img_size = 32;
  registers.patch_size = 16;
  EXPECT_THROW(VisionTransformer{registers}, UsageError);
  // Every block's attention is built for the model's geometry.
  ModelOptions o;
  o.attention = spec_of("attention: {backend: linformer, backend_kwargs: {k: 4}}");
  auto model = create_model("vit_nano_patch4_28", o);
  EXPECT_EQ(model->named_parameters()["blocks.0.attn.E"].size(1), model->config().attention_geometry().num_tokens);
}

}  // namespace
}  // namespace sparsevit::models
