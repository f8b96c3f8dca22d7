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
    auto model = create_model(shape.name, o);
    EXPECT_EQ(model->config().embed_dim, shape.embed_dim);
    EXPECT_EQ(model->config().depth, shape.depth);
    EXPECT_EQ(model->config().num_heads, shape.num_heads);
    EXPECT_EQ(model->config().num_tokens(), 5);
    const at::Tensor x = torch::randn({2, shape.in_chans, o.img_size.value(), o.img_size.value()});
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

TEST(ModelRegistry, MaesModelNamesAreAliases) {
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
