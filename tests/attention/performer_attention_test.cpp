#include "attention/performer_attention.h"

#include "attention/backend_test_util.h"

namespace sparsevit::attention {
namespace {

using namespace testing;

// Float64 features written out: ratio * (exp(w.x' - |x'|^2/2 - max) + eps), the max a constant.
at::Tensor reference_features(const at::Tensor& x, const at::Tensor& w, bool is_query) {
  const double c = std::pow(static_cast<double>(x.size(-1)), -0.25);
  const at::Tensor dash = (x * c).matmul(w.t());
  const at::Tensor half = (x * x).sum(-1, true) * (c * c / 2);
  const at::Tensor max = (is_query ? std::get<0>(dash.max(-1, true)) : dash.amax({-2, -1}, true)).detach();
  return (dash - half - max).exp().add(kFavorEpsilon).div(std::sqrt(static_cast<double>(w.size(0))));
}

// The same estimate in the N x N order: (phi(Q) phi(K)^T) V normalised by its row sums.
at::Tensor reference(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& w) {
  const at::Tensor a = reference_features(q, w, true).matmul(reference_features(k, w, false).transpose(-2, -1));
  return a.matmul(v) / a.sum(-1, true);
}

at::Tensor softmax_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  return torch::softmax(q.matmul(k.transpose(-2, -1)) * scale, -1).matmul(v);
}

TEST(PerformerAttention, MatchesTheDenseFormulationOfTheEstimate) {
  torch::manual_seed(0);
  auto opts = torch::TensorOptions().dtype(torch::kFloat64).requires_grad(true);
  const at::Tensor q = torch::randn({2, 3, 13, 8}, opts), k = torch::randn({2, 3, 13, 8}, opts),
                   v = torch::randn({2, 3, 13, 8}, opts);
  const at::Tensor w = orthogonal_random_features(7, 0, 0, 20, 8);
  const at::Tensor out = favor_attention(q, k, v, w), ref = reference(q, k, v, w);
  EXPECT_TRUE(torch::allclose(out, ref, 1e-12, 1e-12));
  const at::Tensor g = torch::randn_like(out);
  const auto grads = torch::autograd::grad({out}, {q, k, v}, {g});
  const auto ref_grads = torch::autograd::grad({ref}, {q, k, v}, {g});
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(torch::allclose(grads[i], ref_grads[i], 1e-9, 1e-11)) << i;
}

TEST(PerformerAttention, EstimateApproachesSoftmaxAttentionAsFeaturesGrow) {
  torch::manual_seed(2);
  const at::Tensor q = torch::randn({1, 4, 24, 8}, torch::kFloat64) * 0.7,
                   k = torch::randn({1, 4, 24, 8}, torch::kFloat64) * 0.7, v = torch::randn({1, 4, 24, 8}, torch::kFloat64);
  const at::Tensor exact = softmax_attention(q, k, v);
  // Mean over seeds of the relative error, for growing m: it falls like 1/sqrt(m) (measured
  // ~3.5/sqrt(m) on these inputs: 0.31 at m = 128, 0.09 at 4096, 0.03 at 65536).
  auto error = [&](int64_t m) {
    double sum = 0;
    for (uint64_t seed = 0; seed < 8; ++seed) {
      const at::Tensor est = favor_attention(q, k, v, orthogonal_random_features(seed, 0, 0, m, 8));
      sum += ((est - exact).norm() / exact.norm()).item<double>();
    }
    return sum / 8;
  };
  const double e16 = error(16), e256 = error(256), e4096 = error(4096), e32768 = error(32768);
  EXPECT_LT(e256, e16);
  EXPECT_LT(e4096, 0.5 * e256);
  EXPECT_LT(e32768, 0.5 * e4096);
  EXPECT_LT(e32768, 0.07);
}

TEST(PerformerAttention, FeaturesArePositiveAndOrthogonalWithinABlock) {
  const at::Tensor w = orthogonal_random_features(3, 1, 0, 8, 8);
  const at::Tensor directions = w / w.norm(2, {1}, true);
  EXPECT_TRUE(torch::allclose(directions.mm(directions.t()), torch::eye(8, torch::kFloat64), 1e-10, 1e-10));
  // Large inputs: the stabiliser keeps every feature finite and positive.
  const at::Tensor x = torch::randn({2, 3, 50, 8}, torch::kFloat64) * 30;
  for (bool is_query : {true, false}) {
    const at::Tensor phi = favor_features(x, w, is_query);
    EXPECT_TRUE(torch::isfinite(phi).all().item<bool>());
    EXPECT_GT(phi.min().item<double>(), 0.0);
  }
  EXPECT_TRUE(torch::isfinite(favor_attention(x, x, x, w)).all().item<bool>());
}

TEST(PerformerAttention, DeterministicUnderTheSeedAndRedrawnOnSchedule) {
  const auto kwargs = spec_of("attention: {backend: performer, backend_kwargs: {num_features: 16, seed: 5, "
                              "redraw_interval: 2}}").backend_kwargs;
  PerformerAttention a(dims_of(16, 2, 10, 1, 3), kwargs), b(dims_of(16, 2, 10, 1, 3), kwargs);
  EXPECT_TRUE(torch::equal(a.features(), b.features()));
  EXPECT_EQ(a.features().sizes(), (at::IntArrayRef{16, 8}));
  PerformerAttention other_layer(dims_of(16, 2, 10, 1, 4), kwargs);
  EXPECT_FALSE(torch::equal(a.features(), other_layer.features()));
  const auto other_seed = spec_of("attention: {backend: performer, backend_kwargs: {num_features: 16, seed: 6}}");
  EXPECT_FALSE(torch::equal(a.features(), PerformerAttention(dims_of(16, 2, 10, 1, 3), other_seed.backend_kwargs).features()));

  // Two training forwards on the first draw, then a redraw; evaluation never redraws.
  const at::Tensor first = a.features().clone();
  a.train();
  const at::Tensor x = torch::randn({1, 10, 16});
  a.forward(x);
  a.forward(x);
  EXPECT_TRUE(torch::equal(a.features(), first));
  a.forward(x);
  EXPECT_EQ(a.draws(), 2);
  EXPECT_FALSE(torch::equal(a.features(), first));
  EXPECT_TRUE(torch::allclose(a.features(), orthogonal_random_features(5, 3, 1, 16, 8).to(torch::kFloat)));
  a.eval();
  const at::Tensor second = a.features().clone();
  for (int i = 0; i < 5; ++i) a.forward(x);
  EXPECT_TRUE(torch::equal(a.features(), second));
}

TEST(PerformerAttention, TrainsAndCostsItsFeatures) {
  torch::manual_seed(1);
  PerformerAttention m(dims_of(16, 2, 10), spec_of("attention: {backend: performer, backend_kwargs: {num_features: 3}}").backend_kwargs);
  expect_trainable(m, 10, 16, {"qkv.weight", "qkv.bias", "proj.weight", "proj.bias"});
  EXPECT_DOUBLE_EQ(m.computed_pairs_per_head(197), (4.0 * 197 * 3 * 8 + 2.0 * 197 * 3) / 16);
}

TEST(PerformerAttention, BadKwargsAreOneLineUsageErrors) {
  expect_usage_error([] { spec_of("attention: {backend: performer, backend_kwargs: {num_features: 0}}"); },
                     "backend_kwargs.num_features");
  expect_usage_error([] { spec_of("attention: {backend: performer, backend_kwargs: {redraw_interval: -1}}"); },
                     "redraw_interval");
  expect_usage_error([] { spec_of("attention: {backend: performer, backend_kwargs: {num_feature: 8}}"); },
                     "did you mean 'num_features'");
}

}  // namespace
}  // namespace sparsevit::attention
