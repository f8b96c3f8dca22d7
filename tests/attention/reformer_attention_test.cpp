#include "attention/reformer_attention.h"

#include <algorithm>
#include <numeric>

#include "attention/backend_test_util.h"

namespace sparsevit::attention {
namespace {

using namespace testing;

// Float64, query by query: the union over hash rounds of the keys in the query's sorted chunk
// and the previous one (cyclic), a pair found in two rounds counted twice, then one softmax.
// `exclude_self`: a round drops the query's own token when it offers another key.
at::Tensor reference(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& rotations,
                     int64_t chunk, double scale, bool exclude_self = false) {
  const int64_t B = q.size(0), H = q.size(1), N = q.size(2), R = rotations.size(1);
  const int64_t chunks = (N + chunk - 1) / chunk;
  at::Tensor out = torch::zeros_like(q);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      const at::Tensor unit = k[b][h] / k[b][h].norm(2, {1}, true);
      std::vector<std::vector<int64_t>> keys(N);
      for (int64_t r = 0; r < R; ++r) {
        const at::Tensor rotated = unit.mm(rotations[h][r].to(torch::kFloat64));
        const at::Tensor buckets = torch::cat({rotated, -rotated}, 1).argmax(1);
        std::vector<int64_t> order(N);
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t c) {
          return buckets[a].item<int64_t>() < buckets[c].item<int64_t>();
        });
        std::vector<int64_t> chunk_of(N);
        for (int64_t s = 0; s < N; ++s) chunk_of[order[s]] = s / chunk;
        for (int64_t i = 0; i < N; ++i) {
          std::vector<int64_t> round;
          for (int64_t j = 0; j < N; ++j) {
            const int64_t previous = (chunk_of[i] + chunks - 1) % chunks;
            if (chunk_of[j] == chunk_of[i] || (chunks > 1 && chunk_of[j] == previous)) round.push_back(j);
          }
          const bool others = std::any_of(round.begin(), round.end(), [&](int64_t j) { return j != i; });
          for (int64_t j : round)
            if (!(exclude_self && others && j == i)) keys[i].push_back(j);
        }
      }
      for (int64_t i = 0; i < N; ++i) {
        const at::Tensor index = torch::tensor(keys[i], torch::kLong);
        const at::Tensor scores = k[b][h].index_select(0, index).mv(q[b][h][i]) * scale;
        const at::Tensor weights = scores.exp() / scores.exp().sum();
        out.select(0, b).select(0, h).select(0, i).copy_(weights.matmul(v[b][h].index_select(0, index)));
      }
    }
  return out;
}

TEST(ReformerAttention, MatchesTheDenseFormulationAndItsGradients) {
  torch::manual_seed(0);
  auto opts = torch::TensorOptions().dtype(torch::kFloat64).requires_grad(true);
  // (hashes, buckets, chunk): N = 13 is not a multiple of the chunks, so padding is exercised.
  for (auto [hashes, buckets, chunk] : std::vector<std::array<int64_t, 3>>{{1, 4, 3}, {3, 6, 2}, {2, 4, 7}, {2, 2, 13}}) {
    const at::Tensor q = torch::randn({2, 3, 13, 4}, opts), k = torch::randn({2, 3, 13, 4}, opts),
                     v = torch::randn({2, 3, 13, 4}, opts);
    const at::Tensor rotations = torch::randn({3, hashes, 4, buckets / 2});
    const at::Tensor out = reformer_attention(q, k, v, rotations, chunk, 0.5);
    const at::Tensor ref = reference(q, k, v, rotations, chunk, 0.5);
    EXPECT_TRUE(torch::allclose(out, ref, 1e-11, 1e-12)) << hashes << " " << buckets << " " << chunk;
    const at::Tensor g = torch::randn_like(out);
    const auto grads = torch::autograd::grad({out}, {q, k, v}, {g});
    const auto ref_grads = torch::autograd::grad({ref}, {q, k, v}, {g});
    for (int i = 0; i < 3; ++i) EXPECT_TRUE(torch::allclose(grads[i], ref_grads[i], 1e-9, 1e-11)) << i;
  }
}

TEST(ReformerAttention, SharedQkSkipsTheQuerysOwnTokenWithGradients) {
  torch::manual_seed(2);
  auto opts = torch::TensorOptions().dtype(torch::kFloat64).requires_grad(true);
  for (auto [hashes, buckets, chunk] : std::vector<std::array<int64_t, 3>>{{1, 4, 3}, {3, 6, 2}, {2, 2, 13}}) {
    const at::Tensor q = torch::randn({2, 3, 13, 4}, opts), v = torch::randn({2, 3, 13, 4}, opts);
    const at::Tensor rotations = torch::randn({3, hashes, 4, buckets / 2});
    // Keys are the normalised queries, so the gradient reaches q through both sides.
    const at::Tensor out = reformer_attention(q, shared_qk_keys(q), v, rotations, chunk, 0.5, true);
    const at::Tensor unit = q / q.norm(2, {-1}, true);
    const at::Tensor ref = reference(q, unit, v, rotations, chunk, 0.5, true);
    EXPECT_TRUE(torch::allclose(out, ref, 1e-11, 1e-12)) << hashes << " " << buckets << " " << chunk;
    EXPECT_FALSE(torch::allclose(out, reference(q, unit, v, rotations, chunk, 0.5, false), 1e-6, 1e-6));
    const at::Tensor g = torch::randn_like(out);
    const auto grads = torch::autograd::grad({out}, {q, v}, {g});
    const auto ref_grads = torch::autograd::grad({ref}, {q, v}, {g});
    for (int i = 0; i < 2; ++i) EXPECT_TRUE(torch::allclose(grads[i], ref_grads[i], 1e-9, 1e-11)) << i;
  }
}

TEST(ReformerAttention, OneChunkAndOneRoundIsDenseAttention) {
  torch::manual_seed(4);
  const at::Tensor q = torch::randn({1, 2, 9, 4}, torch::kFloat64), k = torch::randn({1, 2, 9, 4}, torch::kFloat64),
                   v = torch::randn({1, 2, 9, 4}, torch::kFloat64);
  const at::Tensor dense = torch::softmax(q.matmul(k.transpose(-2, -1)) * 0.5, -1).matmul(v);
  EXPECT_TRUE(torch::allclose(reformer_attention(q, k, v, torch::randn({2, 1, 4, 3}), 9, 0.5), dense, 1e-12, 1e-12));
}

TEST(ReformerAttention, DeterministicUnderTheSeed) {
  const auto kwargs = spec_of("attention: {backend: reformer, backend_kwargs: {buckets: 4, hashes: 2, seed: 9}}").backend_kwargs;
  torch::manual_seed(0);
  ReformerAttention a(dims_of(16, 2, 12, 1, 2), kwargs);
  torch::manual_seed(0);
  ReformerAttention b(dims_of(16, 2, 12, 1, 2), kwargs);
  EXPECT_EQ(a.rotations().sizes(), (at::IntArrayRef{2, 2, 8, 2}));
  EXPECT_TRUE(torch::equal(a.rotations(), b.rotations()));
  EXPECT_FALSE(torch::equal(a.rotations(), ReformerAttention(dims_of(16, 2, 12, 1, 3), kwargs).rotations()));
  const auto other_seed = spec_of("attention: {backend: reformer, backend_kwargs: {buckets: 4, hashes: 2, seed: 8}}");
  EXPECT_FALSE(torch::equal(a.rotations(), ReformerAttention(dims_of(16, 2, 12, 1, 2), other_seed.backend_kwargs).rotations()));
  const at::Tensor x = torch::randn({2, 12, 16});
  EXPECT_TRUE(torch::equal(a.forward(x), b.forward(x)));
  EXPECT_EQ(a.chunk(12), 3);  // ceil(12 / 4) by default
}

TEST(ReformerAttention, TrainsAndCostsItsChunks) {
  torch::manual_seed(1);
  ReformerAttention m(dims_of(16, 2, 13), spec_of("attention: {backend: reformer, backend_kwargs: {buckets: 4, chunk: 3, hashes: 2}}").backend_kwargs);
  expect_trainable(m, 13, 16, {"qkv.weight", "qkv.bias", "proj.weight", "proj.bias"});
  // Per round: N b/4 (hashing) + 2 c N_pad (2c keys per query, padded to 15).
  EXPECT_DOUBLE_EQ(m.computed_pairs_per_head(13), 2 * (13.0 * 4 / 4 + 15.0 * 6));
}

TEST(ReformerAttention, BadKwargsAreOneLineUsageErrors) {
  expect_usage_error([] { spec_of("attention: {backend: reformer, backend_kwargs: {buckets: 3}}"); }, "even");
  expect_usage_error([] { spec_of("attention: {backend: reformer, backend_kwargs: {hashes: 0}}"); }, "hashes");
  expect_usage_error([] { spec_of("attention: {backend: reformer, backend_kwargs: {chunk: 0}}"); }, "chunk");
  expect_usage_error([] { spec_of("attention: {backend: reformer, backend_kwargs: {bucket: 4}}"); }, "did you mean 'buckets'");
}

}  // namespace
}  // namespace sparsevit::attention
