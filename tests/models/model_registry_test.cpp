// The model registry: every registered model builds, runs forward and backward at a small
// input (timm's img_size override), and has the registered shape.
#include "models/model_registry.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "util/errors.h"

namespace sparsevit::models {
namespace {

TEST(ModelRegistry, EveryModelRunsForwardAndBackwardAtASmallInput) {
  torch::manual_seed(0);
  for (const ModelShape& shape : model_shapes()) {
    SCOPED_TRACE(shape.name);
    ModelOptions o;
    o.img_size = 2 * shape.patch_size;  // 4 patches + class token
    o.num_classes = 7;
    if (shape.depth * shape.embed_dim > 24 * 1024) {  // ViT-H: 2.5 GB of weights; its config only
      EXPECT_EQ(vit_config(shape, o).num_tokens(), 5);
      continue;
    }
    if (shape.is_video()) o.num_frames = 2;
    auto model = create_classifier(shape.name, o);  // a TimeSformer for the video shapes
    EXPECT_EQ(model->num_frames(), shape.is_video() ? 2 : 0);
    EXPECT_EQ(model->config().embed_dim, shape.embed_dim);
    EXPECT_EQ(model->config().depth, shape.depth);
    EXPECT_EQ(model->config().num_heads, shape.num_heads);
    EXPECT_EQ(model->config().num_tokens(), 5);
    std::vector<int64_t> input = model->input_shape();
    input.insert(input.begin(), 2);
    const at::Tensor x = torch::randn(input);
    const at::Tensor logits = model->forward(x);
    ASSERT_EQ(logits.sizes(), (at::IntArrayRef{2, 7}));
    logits.pow(2).sum().backward();
    for (const auto& p : model->named_parameters()) {
      ASSERT_TRUE(p.value().grad().defined()) << p.key();
      EXPECT_TRUE(p.value().grad().isfinite().all().item<bool>()) << p.key();
    }
    EXPECT_GT(model->named_parameters()["head.weight"].grad().abs().sum().item<double>(), 0.0);
    EXPECT_GT(model->named_parameters()["patch_embed.proj.weight"].grad().abs().sum().item<double>(), 0.0);
  }
}

TEST(ModelRegistry, NativeInputSizesGiveTheRegisteredTokenCounts) {
  EXPECT_EQ(vit_config(find_model_shape("vit_base_patch16_224"), {}).num_tokens(), 197);
  EXPECT_EQ(vit_config(find_model_shape("vit_tiny_patch2_28"), {}).num_tokens(), 197);
  EXPECT_EQ(vit_config(find_model_shape("vit_tiny_patch4_32"), {}).num_tokens(), 65);
  EXPECT_EQ(vit_config(find_model_shape("vit_nano_patch4_28"), {}).num_tokens(), 50);
}

TEST(ModelRegistry, ImageSizesThatDoNotFitThePatchAreUsageErrors) {
  ModelOptions o;
  o.img_size = 30;
  EXPECT_THROW(create_model("vit_nano_patch4_28", o), UsageError);
  o.img_size = 0;
  EXPECT_THROW(create_model("vit_nano_patch4_28", o), UsageError);
  EXPECT_THROW(create_model("vit_nano_patch4_29", {}), UsageError);
}

TEST(ModelRegistry, ShapeOverridesBuildThePapersOtherShapes) {
  ModelOptions o;  // ViT-T/8 at 64x64 (not registered): 64 patches + class token
  o.img_size = 64;
  o.patch_size = 8;
  o.depth = 2;
  o.num_heads = 4;
  o.embed_dim = 32;
  auto model = create_model("vit_tiny_patch16_224", o);
  EXPECT_EQ(model->config().num_tokens(), 65);
  EXPECT_EQ(model->blocks().size(), 2u);
  EXPECT_EQ(model->named_parameters()["blocks.1.attn.qkv.weight"].sizes(), (at::IntArrayRef{96, 32}));
  EXPECT_EQ(model->forward(torch::randn({1, 3, 64, 64})).sizes(), (at::IntArrayRef{1, 1000}));
  o.num_heads = 5;  // 32 is not a multiple of 5
  EXPECT_THROW(create_model("vit_tiny_patch16_224", o), UsageError);
  o.num_heads = 4;
  o.patch_size = 7;  // 64 is not a multiple of 7
  EXPECT_THROW(create_model("vit_tiny_patch16_224", o), UsageError);
}

// MAE's models_vit with global_pool: the head reads fc_norm(mean of the patch tokens); there is
// no `norm` (so MAE's finetuned checkpoints map one-to-one).
TEST(ModelRegistry, GlobalPoolReadsTheMeanOfThePatchTokensThroughFcNorm) {
  torch::manual_seed(3);
  ModelOptions o;
  o.global_pool = true;
  o.num_classes = 3;
  auto model = create_model("vit_nano_patch4_28", o);
  const auto params = model->named_parameters();
  EXPECT_TRUE(params.contains("fc_norm.weight"));
  EXPECT_FALSE(params.contains("norm.weight"));
  model->eval();
  const at::Tensor x = torch::randn({2, 1, 28, 28});
  const at::Tensor tokens = model->forward_features(x);
  const at::Tensor pooled = at::layer_norm(tokens.narrow(1, 1, 49).mean(1), {64}, params["fc_norm.weight"],
                                           params["fc_norm.bias"], 1e-6);
  const at::Tensor expected = at::linear(pooled, params["head.weight"], params["head.bias"]);
  EXPECT_TRUE(torch::allclose(model->forward(x), expected, 1e-5, 1e-6));
  // The class token does not reach the head through the pool, only through attention.
  EXPECT_FALSE(torch::allclose(model->forward_head(tokens, true), tokens.select(1, 0)));
}

TEST(ModelRegistry, MaesModelNamesAreAliases) {
  EXPECT_EQ(find_model_shape("vit_huge_patch14").name, "vit_huge_patch14_224");
  EXPECT_EQ(find_model_shape("vit_base_patch16").name, "vit_base_patch16_224");
  EXPECT_EQ(find_model_shape("vit_large_patch16").name, "vit_large_patch16_224");
  try {
    find_model_shape("vit_base_patch61");
    FAIL() << "expected UsageError";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("did you mean 'vit_base_patch16'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace sparsevit::models
