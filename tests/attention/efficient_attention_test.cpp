#include "attention/efficient_attention.h"

#include "attention/backend_test_util.h"

namespace sparsevit::attention {
namespace {

using namespace testing;

// Float64, head by head, in the N x N order: (rho_q(Q) rho_k(K)^T) V, softmaxes written out.
at::Tensor reference(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, int64_t key_dim) {
  at::Tensor out = torch::zeros_like(v);
  for (int64_t b = 0; b < q.size(0); ++b)
    for (int64_t h = 0; h < q.size(1); ++h) {
      const at::Tensor qe = q[b][h].narrow(1, 0, key_dim).exp(), ke = k[b][h].narrow(1, 0, key_dim).exp();
      const at::Tensor rho_q = qe / qe.sum(1, true);  // each query over its features
      const at::Tensor rho_k = ke / ke.sum(0, true);  // each key channel over the tokens
      out.select(0, b).select(0, h).copy_(rho_q.mm(rho_k.t()).mm(v[b][h]));
    }
  return out;
}

TEST(EfficientAttention, MatchesTheDenseFormulationAndItsGradients) {
  torch::manual_seed(0);
  auto opts = torch::TensorOptions().dtype(torch::kFloat64).requires_grad(true);
  for (int64_t key_dim : {8, 3}) {
    const at::Tensor q = torch::randn({2, 3, 13, 8}, opts), k = torch::randn({2, 3, 13, 8}, opts),
                     v = torch::randn({2, 3, 13, 8}, opts);
    const at::Tensor out = efficient_attention(q, k, v, key_dim), ref = reference(q, k, v, key_dim);
    EXPECT_TRUE(torch::allclose(out, ref, 1e-12, 1e-12)) << key_dim;
    const at::Tensor g = torch::randn_like(out);
    const auto grads = torch::autograd::grad({out}, {q, k, v}, {g});
    const auto ref_grads = torch::autograd::grad({ref}, {q, k, v}, {g});
    for (int i = 0; i < 3; ++i) EXPECT_TRUE(torch::allclose(grads[i], ref_grads[i], 1e-10, 1e-12)) << i;
  }
}

TEST(EfficientAttention, TrainsAndCostsNKeyDimPairs) {
  torch::manual_seed(1);
  EfficientAttention m(dims_of(16, 2, 10), spec_of("attention: {backend: efficient, backend_kwargs: {key_dim: 3}}").backend_kwargs);
  EXPECT_EQ(m.key_dim(), 3);
  expect_trainable(m, 10, 16, {"qkv.weight", "qkv.bias", "proj.weight", "proj.bias"});
  EXPECT_DOUBLE_EQ(m.computed_pairs_per_head(197), 197.0 * 3);
  EfficientAttention full(dims_of(16, 2, 10), {});
  EXPECT_EQ(full.key_dim(), 8);  // head_dim by default
}

TEST(EfficientAttention, BadKwargsAreOneLineUsageErrors) {
  expect_usage_error([] { spec_of("attention: {backend: efficient, backend_kwargs: {key_dim: 0}}"); }, "key_dim");
  expect_usage_error([] { spec_of("attention: {backend: efficient, backend_kwargs: {k: 3}}"); }, "backend 'efficient'");
  const auto kwargs = spec_of("attention: {backend: efficient, backend_kwargs: {key_dim: 9}}").backend_kwargs;
  expect_usage_error([&] { EfficientAttention(dims_of(16, 2, 10), kwargs); }, "head dim 8");
}

}  // namespace
}  // namespace sparsevit::attention
