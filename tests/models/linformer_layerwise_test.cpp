// Linformer `share: layerwise` (Wang et al. 2020): one projection E for keys, values, every head
// and every layer of the model: one tensor, held once by the model (`attn_shared.linformer_E`),
// seen once by the optimizer, trained by every layer, and restored by a checkpoint load.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <set>
#include <sstream>

#include "attention/linformer_attention.h"
#include "models/model_registry.h"

namespace sparsevit::models {
namespace {

std::shared_ptr<VisionTransformer> linformer_model(const std::string& share, uint64_t seed) {
  torch::manual_seed(seed);
  ModelOptions o;
  o.attention = config::parse_attention_spec(
      "attention: {backend: linformer, backend_kwargs: {k: 8, share: " + share + "}}", "test.yaml");
  return create_model("vit_nano_patch4_28", o);  // 6 layers, N = 50
}

const at::Tensor& key_projection(const Block& block) {
  return dynamic_cast<const attention::LinformerAttention&>(block.attn()).key_projection();
}

TEST(LinformerLayerwise, EveryLayerComputesWithTheOneSharedTensor) {
  auto model = linformer_model("layerwise", 0);
  const auto params = model->named_parameters();
  ASSERT_TRUE(params.contains("attn_shared.linformer_E"));
  const at::Tensor e = params["attn_shared.linformer_E"];
  EXPECT_EQ(e.sizes(), (at::IntArrayRef{8, 50}));
  for (const auto& block : model->blocks()) {
    EXPECT_TRUE(key_projection(*block).is_same(e));
    EXPECT_TRUE(dynamic_cast<const attention::LinformerAttention&>(block->attn()).value_projection().is_same(e));
  }
  // Held once: no per-layer E or F, and no parameter appears twice (the optimizer sees it once).
  for (const auto& item : params) {
    EXPECT_EQ(item.key().find("attn.E"), std::string::npos) << item.key();
    EXPECT_EQ(item.key().find("attn.F"), std::string::npos) << item.key();
  }
  std::set<const void*> storages;
  for (const auto& p : model->parameters()) EXPECT_TRUE(storages.insert(p.unsafeGetTensorImpl()).second);
  // Per-layer `kv` has one E per layer: 6 * 8 * 50 more parameters than layerwise's one.
  auto per_layer = linformer_model("kv", 0);
  int64_t shared_count = 0, per_layer_count = 0;
  for (const auto& p : model->parameters()) shared_count += p.numel();
  for (const auto& p : per_layer->parameters()) per_layer_count += p.numel();
  EXPECT_EQ(per_layer_count - shared_count, 5 * 8 * 50);
  EXPECT_FALSE(key_projection(*per_layer->blocks()[0]).is_same(key_projection(*per_layer->blocks()[1])));
}

TEST(LinformerLayerwise, GradientIsTheSumOfEveryLayersGradient) {
  // The same model with one E per layer (`kv`), every E set to the shared one and every other
  // weight copied: same outputs, and the shared E's gradient is the sum of the layers' E gradients.
  auto shared = linformer_model("layerwise", 1);
  auto per_layer = linformer_model("kv", 2);
  const at::Tensor e = shared->named_parameters()["attn_shared.linformer_E"];
  {
    torch::NoGradGuard no_grad;
    const auto source = shared->named_parameters();
    for (auto& item : per_layer->named_parameters()) {
      const bool is_e = item.key().size() > 7 && item.key().compare(item.key().size() - 7, 7, ".attn.E") == 0;
      item.value().copy_(is_e ? e : source[item.key()]);
    }
  }
  shared->eval();
  per_layer->eval();
  torch::manual_seed(5);
  const at::Tensor images = torch::randn({2, 1, 28, 28});
  const at::Tensor out_shared = shared->forward(images), out_per_layer = per_layer->forward(images);
  ASSERT_TRUE(torch::allclose(out_shared, out_per_layer, 1e-5, 1e-6));
  const at::Tensor weights = torch::randn_like(out_shared);
  (out_shared * weights).sum().backward();
  (out_per_layer * weights).sum().backward();
  at::Tensor sum = torch::zeros_like(e);
  const auto per_layer_params = per_layer->named_parameters();
  for (size_t l = 0; l < per_layer->blocks().size(); ++l) {
    const at::Tensor g = per_layer_params["blocks." + std::to_string(l) + ".attn.E"].grad();
    EXPECT_GT(g.abs().sum().item<double>(), 0.0) << "layer " << l;
    sum += g;
  }
  ASSERT_TRUE(e.grad().defined());
  EXPECT_TRUE(torch::allclose(e.grad(), sum, 1e-4, 1e-6)) << (e.grad() - sum).abs().max().item<double>();
}

TEST(LinformerLayerwise, CheckpointsRoundTripIntoTheSharedTensor) {
  auto trained = linformer_model("layerwise", 2);
  {
    torch::NoGradGuard no_grad;
    trained->named_parameters()["attn_shared.linformer_E"].add_(1.0);
  }
  std::stringstream buffer;
  torch::save(trained, buffer);
  auto restored = linformer_model("layerwise", 3);
  torch::load(restored, buffer);
  const at::Tensor e = restored->named_parameters()["attn_shared.linformer_E"];
  EXPECT_TRUE(torch::equal(e, trained->named_parameters()["attn_shared.linformer_E"]));
  for (const auto& block : restored->blocks()) EXPECT_TRUE(key_projection(*block).is_same(e));
  restored->eval();
  trained->eval();
  const at::Tensor images = torch::randn({2, 1, 28, 28});
  EXPECT_TRUE(torch::allclose(restored->forward(images), trained->forward(images)));
}

}  // namespace
}  // namespace sparsevit::models
