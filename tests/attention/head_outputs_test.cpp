// Every zoo backend exposes its per-head outputs (what head diversity reads) and its forward is
// exactly those outputs through `proj`; top-k and Reformer also give dense probabilities whose
// product with V is those outputs.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>

#include "attention/attention.h"
#include "attention/backend_test_util.h"
#include "config/attention_spec.h"
#include "util/errors.h"

namespace sparsevit::attention {
namespace {

std::shared_ptr<AttentionModule> build_from_config_file(const std::string& name) {
  const config::AttentionSpec spec =
      config::load_attention_spec(std::string(SPARSEVIT_SOURCE_DIR) + "/configs/attention/" + name + ".yaml");
  return make_attention(spec, testing::dims_of(64, 4, 50), std::nullopt);
}

at::Tensor values_of(AttentionModule& m, const at::Tensor& x) {
  const auto params = m.named_parameters();
  const at::Tensor qkv = at::linear(x, params["qkv.weight"], params["qkv.bias"]);
  return qkv.reshape({x.size(0), x.size(1), 3, 4, 16}).permute({2, 0, 3, 1, 4})[2];
}

class HeadOutputs : public ::testing::TestWithParam<std::string> {};

TEST_P(HeadOutputs, ForwardIsHeadOutputsThroughProj) {
  torch::manual_seed(3);
  auto m = build_from_config_file(GetParam());
  m->eval();
  torch::NoGradGuard no_grad;
  const at::Tensor x = torch::randn({2, 50, 64});
  const at::Tensor heads = m->head_outputs(x);
  ASSERT_EQ(heads.sizes(), (at::IntArrayRef{2, 4, 50, 16}));
  const auto params = m->named_parameters();
  const at::Tensor expected =
      at::linear(heads.transpose(1, 2).reshape({2, 50, 64}), params["proj.weight"], params["proj.bias"]);
  EXPECT_TRUE(at::allclose(m->forward(x), expected, 1e-5, 1e-6)) << GetParam();
}

INSTANTIATE_TEST_SUITE_P(Zoo, HeadOutputs,
                         ::testing::Values("vit_topk", "vit_linformer", "vit_efficient", "vit_performer", "vit_imhsa",
                                           "vit_reformer"));

TEST(AttentionProbs, TopkAndReformerProbabilitiesReproduceTheOutputs) {
  for (const std::string name : {"vit_topk", "vit_reformer"}) {
    torch::manual_seed(4);
    auto m = build_from_config_file(name);
    m->eval();
    torch::NoGradGuard no_grad;
    const at::Tensor x = torch::randn({2, 50, 64});
    const at::Tensor probs = m->attention_probs(x);
    ASSERT_EQ(probs.sizes(), (at::IntArrayRef{2, 4, 50, 50})) << name;
    EXPECT_TRUE(at::allclose(probs.sum(-1), at::ones({2, 4, 50}), 1e-5, 1e-5)) << name;
    EXPECT_TRUE((probs >= 0).all().item<bool>()) << name;
    EXPECT_TRUE(at::allclose(at::matmul(probs, values_of(*m, x)), m->head_outputs(x), 1e-4, 1e-5)) << name;
    // Sparse: most pairs get no weight.
    EXPECT_GT((probs == 0).to(at::kDouble).mean().item<double>(), 0.3) << name;
  }
}

TEST(AttentionProbs, LinearBackendsRefuseWithAUsageError) {
  for (const std::string name : {"vit_linformer", "vit_efficient", "vit_performer", "vit_imhsa"}) {
    auto m = build_from_config_file(name);
    EXPECT_THROW(m->attention_probs(torch::randn({1, 50, 64})), UsageError) << name;
  }
}

}  // namespace
}  // namespace sparsevit::attention
