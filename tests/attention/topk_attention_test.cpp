#include "attention/topk_attention.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "attention/backend_test_util.h"

namespace sparsevit::attention {
namespace {

// Float64 dense formulation: -inf outside each row's k best scores, then softmax.
at::Tensor dense_topk_reference(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, int64_t keys,
                                double scale) {
  const at::Tensor scores = at::matmul(q, k.transpose(-2, -1)) * scale;
  const at::Tensor order = std::get<1>(scores.sort(true, -1, true));
  const at::Tensor keep = at::zeros_like(scores, at::kBool).scatter_(-1, order.narrow(-1, 0, keys), true);
  return at::matmul(at::softmax(scores.masked_fill(keep.logical_not(), -INFINITY), -1), v);
}

TEST(TopkAttention, MatchesTheDenseFormulationAndItsGradients) {
  torch::manual_seed(0);
  for (int64_t chunk : {1, 7, 64}) {
    auto opts = torch::TensorOptions().dtype(torch::kFloat64).requires_grad(true);
    const at::Tensor q = torch::randn({2, 3, 19, 8}, opts), k = torch::randn({2, 3, 19, 8}, opts),
                     v = torch::randn({2, 3, 19, 8}, opts);
    const at::Tensor out = topk_attention(q, k, v, 4, 0.35, chunk);
    const at::Tensor ref = dense_topk_reference(q, k, v, 4, 0.35);
    EXPECT_TRUE(torch::allclose(out, ref, 1e-12, 1e-12)) << chunk;
    const at::Tensor g = torch::randn_like(out);
    const auto grads = torch::autograd::grad({out}, {q, k, v}, {g});
    const auto ref_grads = torch::autograd::grad({ref}, {q, k, v}, {g});
    for (int i = 0; i < 3; ++i) EXPECT_TRUE(torch::allclose(grads[i], ref_grads[i], 1e-10, 1e-12)) << i;
  }
}

TEST(TopkAttention, TiesGoToTheLowerKeyIndex) {
  // Every score equal: the first k keys are kept, so the output is the mean of v[0..k).
  const at::Tensor q = torch::zeros({1, 1, 3, 4}, torch::kFloat64), k = torch::zeros({1, 1, 5, 4}, torch::kFloat64);
  const at::Tensor v = torch::arange(20, torch::kFloat64).reshape({1, 1, 5, 4});
  const at::Tensor out = topk_attention(q, k, v, 2, 1.0, 2);
  EXPECT_TRUE(torch::allclose(out[0][0][1], (v[0][0][0] + v[0][0][1]) / 2));
}

TEST(TopkAttention, KAtLeastNIsDenseAttention) {
  torch::manual_seed(1);
  const at::Tensor q = torch::randn({1, 2, 9, 4}), k = torch::randn({1, 2, 9, 4}), v = torch::randn({1, 2, 9, 4});
  const at::Tensor dense = at::matmul(at::softmax(at::matmul(q, k.transpose(-2, -1)) * 0.5, -1), v);
  EXPECT_TRUE(torch::allclose(topk_attention(q, k, v, 50, 0.5, 4), dense, 1e-5, 1e-6));
}

TEST(TopkAttention, ScheduledKFollowsProgress) {
  patterns::MaskKwargs kw;
  kw.set_scalar("k_start", "100").set_scalar("k_end", "4");
  TopkAttention attn(attention::testing::dims_of(16, 2, 0), kw);
  attn.set_progress(0.0);
  EXPECT_EQ(attn.keys_per_query(197), 100);
  attn.set_progress(1.0);
  EXPECT_EQ(attn.keys_per_query(197), 4);
  attn.set_progress(0.5);
  EXPECT_EQ(attn.keys_per_query(197), 52);
  EXPECT_EQ(attn.forward(torch::randn({2, 197, 16})).sizes(), (at::IntArrayRef{2, 197, 16}));
}

}  // namespace
}  // namespace sparsevit::attention
