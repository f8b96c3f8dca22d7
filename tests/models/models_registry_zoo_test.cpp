// Every shipped attention config builds into a small ViT that runs forward and backward.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <filesystem>

#include "config/attention_backends.h"
#include "models/model_registry.h"

namespace sparsevit::models {
namespace {

TEST(AttentionZoo, EveryShippedConfigTrainsInASmallVit) {
  // vit_nano_patch4_28 (N = 50, a 7x7 grid) with 12 blocks: the shipped configs are written
  // for ViT-B's 12 layers (per-layer window lists).
  std::vector<std::filesystem::path> configs;
  for (const auto& entry : std::filesystem::directory_iterator(SPARSEVIT_SOURCE_DIR "/configs/attention"))
    if (entry.path().extension() == ".yaml") configs.push_back(entry.path());
  std::sort(configs.begin(), configs.end());
  ASSERT_GE(configs.size(), 16u);
  int built = 0;
  for (const auto& path : configs) {
    SCOPED_TRACE(path.filename().string());
    ModelOptions o;
    o.attention = config::load_attention_spec(path.string());
    if (o.attention.mask_kwargs.has("scores_file")) continue;  // needs a calibration file
    VitConfig c = vit_config(find_model_shape("vit_nano_patch4_28"), o);
    c.depth = 12;
    torch::manual_seed(0);
    VisionTransformer model(c);
    model.train();
    const at::Tensor logits = model.forward(torch::randn({2, 1, 28, 28}));
    ASSERT_EQ(logits.sizes(), (at::IntArrayRef{2, 10}));
    const at::Tensor loss = torch::nn::functional::cross_entropy(logits, torch::tensor({1, 7}));
    ASSERT_TRUE(std::isfinite(loss.item<double>()));
    loss.backward();
    for (const auto& p : model.named_parameters()) {
      ASSERT_TRUE(p.value().grad().defined()) << p.key();
      ASSERT_TRUE(torch::isfinite(p.value().grad()).all().item<bool>()) << p.key();
    }
    EXPECT_GT(model.named_parameters()["blocks.0.attn.qkv.weight"].grad().abs().sum().item<double>(), 0.0);
    const auto& attn = model.blocks()[0]->attn();
    if (const auto pairs = config::backend_pairs_per_head(o.attention.backend, o.attention.backend_kwargs,
                                                         AttentionGeometry{50, 1, 4, 16, 1})) {
      EXPECT_DOUBLE_EQ(attn.computed_pairs_per_head(50), *pairs);
    }
    ++built;
  }
  EXPECT_GE(built, 15);
}

}  // namespace
}  // namespace sparsevit::models
