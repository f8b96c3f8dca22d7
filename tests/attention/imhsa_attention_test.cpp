#include "attention/imhsa_attention.h"

#include <cmath>

#include "attention/backend_test_util.h"

namespace sparsevit::attention {
namespace {

using namespace testing;

at::Tensor row_softmax(const at::Tensor& s) { return s.exp() / s.exp().sum(-1, true); }

// out[g] = sum_h w[g][h] * x[h] over a list of per-head matrices.
std::vector<at::Tensor> mix(const at::Tensor& w, const std::vector<at::Tensor>& x) {
  std::vector<at::Tensor> out;
  for (int64_t g = 0; g < w.size(0); ++g) {
    at::Tensor sum = torch::zeros_like(x[0]);
    for (int64_t h = 0; h < w.size(1); ++h) sum = sum + w[g][h] * x[h];
    out.push_back(sum);
  }
  return out;
}

// Landmarks of one head's patch tokens [grid*grid, d]: means over the adaptive-pooling bins
// [floor(i*g/s), ceil((i+1)*g/s)) in each direction, row-major.
at::Tensor pooled(const at::Tensor& patches, int64_t grid, int64_t side) {
  std::vector<at::Tensor> rows;
  for (int64_t i = 0; i < side; ++i)
    for (int64_t j = 0; j < side; ++j) {
      const int64_t r0 = i * grid / side, r1 = ((i + 1) * grid + side - 1) / side;
      const int64_t c0 = j * grid / side, c1 = ((j + 1) * grid + side - 1) / side;
      at::Tensor sum = torch::zeros({patches.size(1)}, patches.options());
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t c = c0; c < c1; ++c) sum = sum + patches[r * grid + c];
      rows.push_back(sum / static_cast<double>((r1 - r0) * (c1 - c0)));
    }
  return torch::stack(rows);
}

// Float64 N x N formulation: (A_Q A_K) V per head, the class row dense.
at::Tensor reference(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const ImhsaMixing& m,
                     int64_t prefix, int64_t side, double scale) {
  const int64_t B = q.size(0), H = q.size(1), N = q.size(2), P = N - prefix;
  const auto grid = static_cast<int64_t>(std::llround(std::sqrt(static_cast<double>(P))));
  std::vector<at::Tensor> batches;
  for (int64_t b = 0; b < B; ++b) {
    std::vector<at::Tensor> s_q, s_k;
    for (int64_t h = 0; h < H; ++h) {
      const at::Tensor qh = q[b][h], kh = k[b][h];
      at::Tensor q_land = pooled(qh.narrow(0, prefix, P), grid, side), k_land = pooled(kh.narrow(0, prefix, P), grid, side);
      if (prefix) {
        q_land = torch::cat({qh.narrow(0, 0, 1), q_land});
        k_land = torch::cat({kh.narrow(0, 0, 1), k_land});
      }
      s_q.push_back(qh.narrow(0, prefix, P).mm(k_land.t()) * scale);
      s_k.push_back(q_land.mm(kh.t()) * scale);
    }
    std::vector<at::Tensor> p_q, p_k;
    for (const auto& s : mix(m.w1_q, s_q)) p_q.push_back(row_softmax(s));
    for (const auto& s : mix(m.w1_k, s_k)) p_k.push_back(row_softmax(s));
    const auto a_q = mix(m.w2_q, p_q), a_k = mix(m.w2_k, p_k);
    std::vector<at::Tensor> heads;
    for (int64_t h = 0; h < H; ++h) {
      at::Tensor out = a_q[h].mm(a_k[h]).mm(v[b][h]);  // the N x N order
      if (prefix) out = torch::cat({row_softmax(q[b][h].narrow(0, 0, 1).mm(k[b][h].t()) * scale).mm(v[b][h]), out});
      heads.push_back(out);
    }
    batches.push_back(torch::stack(heads));
  }
  return torch::stack(batches);
}

TEST(ImhsaAttention, MatchesTheDenseFormulationAndItsGradients) {
  torch::manual_seed(0);
  auto opts = torch::TensorOptions().dtype(torch::kFloat64).requires_grad(true);
  // (prefix, grid, side): exact bins, overlapping adaptive bins, one landmark, no class token.
  for (auto [prefix, grid, side] : std::vector<std::array<int64_t, 3>>{{1, 4, 2}, {1, 5, 3}, {1, 4, 1}, {0, 4, 2}}) {
    const int64_t n = prefix + grid * grid;
    const at::Tensor q = torch::randn({2, 3, n, 4}, opts), k = torch::randn({2, 3, n, 4}, opts),
                     v = torch::randn({2, 3, n, 4}, opts);
    const ImhsaMixing m{torch::randn({3, 3}, opts), torch::randn({3, 3}, opts), torch::randn({3, 3}, opts),
                        torch::randn({3, 3}, opts)};
    const at::Tensor out = imhsa_attention(q, k, v, m, prefix, side, 0.5);
    const at::Tensor ref = reference(q, k, v, m, prefix, side, 0.5);
    EXPECT_TRUE(torch::allclose(out, ref, 1e-11, 1e-11)) << prefix << " " << grid << " " << side;
    const at::Tensor g = torch::randn_like(out);
    const std::vector<at::Tensor> inputs = {q, k, v, m.w1_q, m.w2_q, m.w1_k, m.w2_k};
    const auto grads = torch::autograd::grad({out}, inputs, {g});
    const auto ref_grads = torch::autograd::grad({ref}, inputs, {g});
    for (std::size_t i = 0; i < inputs.size(); ++i)
      EXPECT_TRUE(torch::allclose(grads[i], ref_grads[i], 1e-9, 1e-11)) << i;
  }
}

TEST(ImhsaAttention, AllLandmarksWithIdentityMixingIsPerHeadTwoStepAttention) {
  // With W = I the heads are independent: a sanity check of the mixing's orientation.
  torch::manual_seed(3);
  const at::Tensor q = torch::randn({1, 2, 5, 4}, torch::kFloat64), k = torch::randn({1, 2, 5, 4}, torch::kFloat64),
                   v = torch::randn({1, 2, 5, 4}, torch::kFloat64);
  const at::Tensor eye = torch::eye(2, torch::kFloat64);
  const at::Tensor both = imhsa_attention(q, k, v, {eye, eye, eye, eye}, 1, 2, 0.5);
  const at::Tensor head1 = imhsa_attention(q.narrow(1, 1, 1), k.narrow(1, 1, 1), v.narrow(1, 1, 1),
                                           {eye.narrow(0, 0, 1).narrow(1, 0, 1), eye.narrow(0, 0, 1).narrow(1, 0, 1),
                                            eye.narrow(0, 0, 1).narrow(1, 0, 1), eye.narrow(0, 0, 1).narrow(1, 0, 1)},
                                           1, 2, 0.5);
  EXPECT_TRUE(torch::allclose(both.narrow(1, 1, 1), head1, 1e-12, 1e-12));
}

TEST(ImhsaAttention, TrainsEveryParameterAndCostsItsLandmarks) {
  torch::manual_seed(1);
  ImhsaAttention m(dims_of(16, 2, 17), spec_of("attention: {backend: imhsa, backend_kwargs: {landmarks: 4}}").backend_kwargs);
  EXPECT_EQ(m.params().side, 2);
  expect_trainable(m, 17, 16, {"qkv.weight", "qkv.bias", "proj.weight", "proj.bias", "w1_q", "w2_q", "w1_k", "w2_k"});
  // (P + N)(L + 1)(1 + h/d) + N with P 16, N 17, L 4, h 2, d 8.
  EXPECT_DOUBLE_EQ(m.computed_pairs_per_head(17), 33.0 * 5 * (1 + 2.0 / 8) + 17);
}

TEST(ImhsaAttention, BadKwargsAreOneLineUsageErrors) {
  expect_usage_error([] { spec_of("attention: {backend: imhsa, backend_kwargs: {landmarks: 5}}"); }, "square");
  expect_usage_error([] { spec_of("attention: {backend: imhsa, backend_kwargs: {landmarks: 0}}"); }, "landmarks");
  const auto big = spec_of("attention: {backend: imhsa, backend_kwargs: {landmarks: 64}}").backend_kwargs;
  expect_usage_error([&] { ImhsaAttention(dims_of(16, 2, 50), big); }, "do not fit the 7x7 patch grid");
  expect_usage_error([] { ImhsaAttention(dims_of(16, 2, 20), {}); }, "square patch grid");
  ImhsaAttention m(dims_of(16, 2, 50), {});  // 49 landmarks = the whole 7x7 grid
  expect_usage_error([&] { m.forward(torch::randn({1, 17, 16})); }, "17");
}

}  // namespace
}  // namespace sparsevit::attention
