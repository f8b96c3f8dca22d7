#include "attention/linformer_attention.h"

#include "attention/backend_test_util.h"

namespace sparsevit::attention {
namespace {

using namespace testing;

// Float64, head by head: K' = E_h K_h, V' = F_h V_h, softmax(Q K'^T * scale) V'.
at::Tensor reference(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& e,
                     const at::Tensor& f, double scale) {
  at::Tensor out = torch::zeros_like(q);
  for (int64_t b = 0; b < q.size(0); ++b)
    for (int64_t h = 0; h < q.size(1); ++h) {
      const at::Tensor eh = e.dim() == 3 ? e[h] : e, fh = f.dim() == 3 ? f[h] : f;
      const at::Tensor keys = eh.mm(k[b][h]), values = fh.mm(v[b][h]);
      const at::Tensor scores = q[b][h].mm(keys.t()) * scale;
      const at::Tensor weights = scores.exp() / scores.exp().sum(1, true);
      out.select(0, b).select(0, h).copy_(weights.mm(values));
    }
  return out;
}

TEST(LinformerAttention, MatchesTheDenseFormulationAndItsGradients) {
  torch::manual_seed(0);
  auto opts = torch::TensorOptions().dtype(torch::kFloat64).requires_grad(true);
  for (bool per_head : {false, true}) {
    const at::Tensor q = torch::randn({2, 3, 11, 4}, opts), k = torch::randn({2, 3, 11, 4}, opts),
                     v = torch::randn({2, 3, 11, 4}, opts);
    const at::Tensor e = per_head ? torch::randn({3, 5, 11}, opts) : torch::randn({5, 11}, opts);
    const at::Tensor f = per_head ? torch::randn({3, 5, 11}, opts) : torch::randn({5, 11}, opts);
    const at::Tensor out = linformer_attention(q, k, v, e, f, 0.5), ref = reference(q, k, v, e, f, 0.5);
    EXPECT_TRUE(torch::allclose(out, ref, 1e-12, 1e-12)) << per_head;
    const at::Tensor g = torch::randn_like(out);
    const auto grads = torch::autograd::grad({out}, {q, k, v, e, f}, {g});
    const auto ref_grads = torch::autograd::grad({ref}, {q, k, v, e, f}, {g});
    for (int i = 0; i < 5; ++i) EXPECT_TRUE(torch::allclose(grads[i], ref_grads[i], 1e-10, 1e-12)) << i;
  }
}

TEST(LinformerAttention, SharingOptionsShapeTheProjections) {
  auto build = [](const std::string& share) {
    return LinformerAttention(dims_of(16, 2, 9), spec_of("attention: {backend: linformer, backend_kwargs: {k: 4, share: " +
                                                         share + "}}").backend_kwargs);
  };
  EXPECT_EQ(build("none").key_projection().sizes(), (at::IntArrayRef{2, 4, 9}));
  EXPECT_TRUE(build("none").named_parameters().contains("F"));
  EXPECT_EQ(build("headwise").key_projection().sizes(), (at::IntArrayRef{4, 9}));
  EXPECT_TRUE(build("headwise").named_parameters().contains("F"));
  for (const char* shared : {"kv", "layerwise"}) {
    auto m = build(shared);
    EXPECT_FALSE(m.named_parameters().contains("F")) << shared;
    EXPECT_TRUE(m.key_projection().is_same(m.value_projection())) << shared;
  }
}

TEST(LinformerAttention, TrainsEveryParameter) {
  torch::manual_seed(1);
  for (const char* share : {"none", "headwise", "kv"}) {
    LinformerAttention m(dims_of(16, 2, 10),
                         spec_of(std::string("attention: {backend: linformer, backend_kwargs: {k: 3, share: ") + share +
                                 "}}").backend_kwargs);
    std::vector<std::string> params = {"qkv.weight", "qkv.bias", "proj.weight", "proj.bias", "E"};
    if (std::string(share) != "kv") params.push_back("F");
    expect_trainable(m, 10, 16, params);
  }
}

TEST(LinformerAttention, CostIsTwoNkPairs) {
  LinformerAttention m(dims_of(16, 2, 197), spec_of("attention: {backend: linformer, backend_kwargs: {k: 3}}").backend_kwargs);
  EXPECT_DOUBLE_EQ(m.computed_pairs_per_head(197), 2.0 * 197 * 3);
}

TEST(LinformerAttention, BadKwargsAreOneLineUsageErrors) {
  expect_usage_error([] { spec_of("attention: {backend: linformer, backend_kwargs: {k: 0}}"); }, "backend_kwargs.k");
  expect_usage_error([] { spec_of("attention: {backend: linformer, backend_kwargs: {kk: 3}}"); }, "did you mean 'k'");
  expect_usage_error([] { spec_of("attention: {backend: linformer, backend_kwargs: {share: all}}"); }, "share");
  expect_usage_error([] { spec_of("attention: {backend: linformer, mask: fibo}"); }, "takes no mask");
  const auto kwargs = spec_of("attention: {backend: linformer, backend_kwargs: {k: 20}}").backend_kwargs;
  expect_usage_error([&] { LinformerAttention(dims_of(16, 2, 10), kwargs); }, "exceeds the sequence length 10");
  expect_usage_error([&] { LinformerAttention(dims_of(16, 2, 0), kwargs); }, "sequence length");
  LinformerAttention m(dims_of(16, 2, 30), kwargs);
  expect_usage_error([&] { m.forward(torch::randn({1, 29, 16})); }, "29");
}

}  // namespace
}  // namespace sparsevit::attention
