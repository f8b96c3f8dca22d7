// Golden tests for every attention backend MODULE, built from a config as the model builds it:
// the module's forward (run in float64) against an independent, straightforward float64
// reference computed here from the module's own named parameters and buffers (qkv.weight,
// qkv.bias, proj.*, E/F, features, w1/w2, rotations, the static pattern). The reference splits
// qkv explicitly into its q, k, v row blocks and loops over heads, so a q/k swap, a missing
// 1/sqrt(d) scale, a dropped bias or a wrong head layout fails here.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "attention/backend_test_util.h"
#include "attention/reformer_attention.h"
#include "attention/vit_attention.h"

namespace sparsevit::attention {
namespace {

using namespace testing;

constexpr int64_t kBatch = 2, kTokens = 17, kHeads = 3, kHeadDim = 8, kDim = kHeads * kHeadDim;  // 4x4 patches + class

// The module's float tensors in float64, in place (Module::to would convert the integer CSR
// buffers too), with every bias and mixing matrix made far from its default so a dropped or
// transposed one shows.
void prepare(torch::nn::Module& module) {
  torch::NoGradGuard no_grad;
  for (auto& item : module.named_parameters()) {
    at::Tensor t = item.value();
    t.set_data(t.to(at::kDouble));
    if (item.key().size() >= 4 && item.key().compare(item.key().size() - 4, 4, "bias") == 0) t.normal_(0.0, 0.5);
    if (item.key().rfind("w", 0) == 0 && t.dim() == 2 && t.size(0) == kHeads) t.add_(at::randn_like(t) * 0.3);
  }
  for (auto& item : module.named_buffers()) {
    at::Tensor t = item.value();
    if (t.is_floating_point()) t.set_data(t.to(at::kDouble));
  }
}

std::shared_ptr<AttentionModule> build(const std::string& yaml, int64_t prefix = 1) {
  torch::manual_seed(0);
  const config::AttentionSpec spec = spec_of(yaml);
  const AttentionGeometry geometry{kTokens - 1 + prefix, prefix, kHeads, kHeadDim, 1};
  std::optional<patterns::Pattern> pattern;
  if (spec.has_mask() && !spec.has_dynamic_mask()) pattern = config::build_layer_patterns(spec, geometry)[0];
  LayerOptions options;
  options.geometry = geometry;
  auto module = make_attention(spec, options, std::move(pattern));
  prepare(*module);
  module->eval();
  return module;
}

at::Tensor param(const torch::nn::Module& m, const std::string& name) {
  const auto params = m.named_parameters();
  if (params.contains(name)) return params[name].detach();
  const auto buffers = m.named_buffers();
  EXPECT_TRUE(buffers.contains(name)) << name;
  return buffers[name].detach();
}

// Per head h: q[h], k[h], v[h] [B, N, D] from qkv's three row blocks (q first, then k, then v),
// each head its D consecutive output channels.
struct HeadQkv {
  std::vector<at::Tensor> q, k, v;
};

HeadQkv reference_qkv(const torch::nn::Module& m, const at::Tensor& x) {
  const at::Tensor w = param(m, "qkv.weight"), b = param(m, "qkv.bias");
  HeadQkv out;
  for (int64_t h = 0; h < kHeads; ++h) {
    auto block = [&](int64_t which) {
      const int64_t rows = which * kDim + h * kHeadDim;
      return at::matmul(x, w.narrow(0, rows, kHeadDim).t()) + b.narrow(0, rows, kHeadDim);
    };
    out.q.push_back(block(0));
    out.k.push_back(block(1));
    out.v.push_back(block(2));
  }
  return out;
}

// Heads [B, N, D] each -> concatenated channels -> proj.
at::Tensor reference_out(const torch::nn::Module& m, const std::vector<at::Tensor>& heads) {
  return at::matmul(at::cat(heads, -1), param(m, "proj.weight").t()) + param(m, "proj.bias");
}

const double kScale = 1.0 / std::sqrt(static_cast<double>(kHeadDim));

at::Tensor input(int64_t tokens = kTokens) {
  torch::manual_seed(7);
  return torch::randn({kBatch, tokens, kDim}, torch::kFloat64);
}

void expect_matches(AttentionModule& module, const at::Tensor& x, const at::Tensor& reference) {
  torch::NoGradGuard no_grad;
  const at::Tensor out = module.forward(x);
  ASSERT_EQ(out.scalar_type(), at::kDouble);
  ASSERT_EQ(out.sizes(), reference.sizes());
  const double err = (out - reference).abs().max().item<double>(), size = reference.abs().max().item<double>();
  EXPECT_LT(err, 1e-10 * std::max(1.0, size)) << "max |module - reference| = " << err;
}

// Softmax attention with a dense key mask keep[h] [N, N] (nullopt: every key).
at::Tensor masked_softmax_reference(const torch::nn::Module& m, const at::Tensor& x,
                                    const std::function<bool(int64_t, int64_t, int64_t)>& keep) {
  const HeadQkv qkv = reference_qkv(m, x);
  std::vector<at::Tensor> heads;
  for (int64_t h = 0; h < kHeads; ++h) {
    at::Tensor scores = at::matmul(qkv.q[h], qkv.k[h].transpose(1, 2)) * kScale;  // [B, N, N]
    at::Tensor allowed = torch::zeros({kTokens, kTokens}, torch::kBool);
    for (int64_t i = 0; i < kTokens; ++i)
      for (int64_t j = 0; j < kTokens; ++j) allowed[i][j] = keep(h, i, j);
    scores = scores.masked_fill(allowed.logical_not(), -INFINITY);
    heads.push_back(at::matmul(at::softmax(scores, -1), qkv.v[h]));
  }
  return reference_out(m, heads);
}

TEST(BackendModulesGolden, VitDense) {
  for (const char* yaml : {"attention: {backend: vit}", "attention: {backend: dense}",
                           "attention: {backend: vit, mask: local, mask_kwargs: {window: 2}, kernel: dense}"}) {
    SCOPED_TRACE(yaml);
    auto m = build(yaml);
    EXPECT_EQ(m->kernel_name(), "dense");
    const at::Tensor x = input();
    expect_matches(*m, x, masked_softmax_reference(*m, x, [](int64_t, int64_t, int64_t) { return true; }));
  }
}

TEST(BackendModulesGolden, VitMaskedAndSparseKernels) {
  for (const char* kernel : {"masked", "sparse"}) {
    for (const char* mask : {"local, mask_kwargs: {window: 2}", "fibo, mask_kwargs: {w_min: 2, w_max: 6}",
                             "random, mask_kwargs: {keys_per_query: 4, seed: 3}"}) {
      const std::string yaml = std::string("attention: {backend: vit, mask: ") + mask + ", kernel: " + kernel + "}";
      SCOPED_TRACE(yaml);
      auto m = build(yaml);
      EXPECT_EQ(m->kernel_name(), kernel);
      const patterns::Pattern pattern = *m->static_pattern();
      const at::Tensor x = input();
      expect_matches(*m, x, masked_softmax_reference(*m, x, [&](int64_t h, int64_t i, int64_t j) {
                       return pattern.contains(static_cast<int32_t>(h), static_cast<int32_t>(i), static_cast<int32_t>(j));
                     }));
    }
  }
  // kernel: auto picks one of them; the numbers are the same.
  auto m = build("attention: {backend: vit, mask: local, mask_kwargs: {window: 1}}");
  EXPECT_EQ(m->kernel_name(), "sparse");
}

TEST(BackendModulesGolden, Topk) {
  for (const char* yaml : {"attention: {backend: vit, mask: topk, mask_kwargs: {k: 5}}",
                           "attention: {backend: topk, mask: topk, mask_kwargs: {k: 5}}"}) {
    SCOPED_TRACE(yaml);
    auto m = build(yaml);
    const at::Tensor x = input();
    const HeadQkv qkv = reference_qkv(*m, x);
    std::vector<at::Tensor> heads;
    for (int64_t h = 0; h < kHeads; ++h) {
      const at::Tensor scores = at::matmul(qkv.q[h], qkv.k[h].transpose(1, 2)) * kScale;
      at::Tensor out = torch::zeros({kBatch, kTokens, kHeadDim}, torch::kFloat64);
      for (int64_t b = 0; b < kBatch; ++b)
        for (int64_t i = 0; i < kTokens; ++i) {
          std::vector<int64_t> order(kTokens);
          std::iota(order.begin(), order.end(), 0);
          const at::Tensor row = scores[b][i];
          std::stable_sort(order.begin(), order.end(),
                           [&](int64_t a, int64_t c) { return row[a].item<double>() > row[c].item<double>(); });
          const at::Tensor kept = torch::tensor(std::vector<int64_t>(order.begin(), order.begin() + 5));
          const at::Tensor p = at::softmax(row.index_select(0, kept), 0);
          out[b][i] = at::matmul(p, qkv.v[h][b].index_select(0, kept));
        }
      heads.push_back(out);
    }
    expect_matches(*m, x, reference_out(*m, heads));
  }
}

TEST(BackendModulesGolden, Linformer) {
  for (const char* share : {"none", "headwise", "kv", "layerwise"}) {
    SCOPED_TRACE(share);
    auto m = build(std::string("attention: {backend: linformer, backend_kwargs: {k: 5, share: ") + share + "}}");
    const at::Tensor x = input();
    const HeadQkv qkv = reference_qkv(*m, x);
    const at::Tensor e = param(*m, "E");
    const bool own_f = std::string(share) == "none" || std::string(share) == "headwise";
    const at::Tensor f = own_f ? param(*m, "F") : e;
    std::vector<at::Tensor> heads;
    for (int64_t h = 0; h < kHeads; ++h) {
      const at::Tensor eh = e.dim() == 3 ? e[h] : e, fh = f.dim() == 3 ? f[h] : f;  // [k, N]
      const at::Tensor keys = at::matmul(eh, qkv.k[h]), values = at::matmul(fh, qkv.v[h]);  // [B, k, D]
      const at::Tensor p = at::softmax(at::matmul(qkv.q[h], keys.transpose(1, 2)) * kScale, -1);
      heads.push_back(at::matmul(p, values));
    }
    expect_matches(*m, x, reference_out(*m, heads));
  }
}

TEST(BackendModulesGolden, Efficient) {
  for (int64_t key_dim : {kHeadDim, int64_t{3}}) {
    SCOPED_TRACE(key_dim);
    auto m = build("attention: {backend: efficient, backend_kwargs: {key_dim: " + std::to_string(key_dim) + "}}");
    const at::Tensor x = input();
    const HeadQkv qkv = reference_qkv(*m, x);
    std::vector<at::Tensor> heads;
    for (int64_t h = 0; h < kHeads; ++h) {
      // rho_q: softmax of each query over its key_dim channels; rho_k: of each channel over the tokens.
      const at::Tensor rho_q = at::softmax(qkv.q[h].narrow(-1, 0, key_dim), -1);
      const at::Tensor rho_k = at::softmax(qkv.k[h].narrow(-1, 0, key_dim), 1);
      heads.push_back(at::matmul(rho_q, at::matmul(rho_k.transpose(1, 2), qkv.v[h])));
    }
    expect_matches(*m, x, reference_out(*m, heads));
  }
}

TEST(BackendModulesGolden, Performer) {
  auto m = build("attention: {backend: performer, backend_kwargs: {num_features: 12, seed: 5}}");
  const at::Tensor x = input();
  const HeadQkv qkv = reference_qkv(*m, x);
  const at::Tensor w = param(*m, "features");  // [m, d]
  const double c = std::pow(static_cast<double>(kHeadDim), -0.25), ratio = 1.0 / std::sqrt(12.0);
  std::vector<at::Tensor> heads;
  for (int64_t h = 0; h < kHeads; ++h) {
    // phi(x) = exp(w.x' - |x'|^2/2 - stabiliser) / sqrt(m) + eps, x' = x / d^(1/4); the stabiliser
    // is each query's own maximum and, for keys, the maximum over the head's keys and features.
    auto features = [&](const at::Tensor& t, bool query) {
      const at::Tensor proj = at::matmul(t * c, w.t());  // [B, N, m]
      const at::Tensor half = (t * t).sum(-1, true) * (c * c / 2);
      at::Tensor top = query ? std::get<0>(proj.max(-1, true)) : proj.amax({1, 2}, true);
      return ratio * (at::exp(proj - half - top) + 1e-6);
    };
    const at::Tensor pq = features(qkv.q[h], true), pk = features(qkv.k[h], false);
    const at::Tensor numerator = at::matmul(pq, at::matmul(pk.transpose(1, 2), qkv.v[h]));
    const at::Tensor denominator = at::matmul(pq, pk.sum(1).unsqueeze(-1));
    heads.push_back(numerator / denominator);
  }
  expect_matches(*m, x, reference_out(*m, heads));
}

// Means over the adaptive-pooling bins [floor(i g/s), ceil((i+1) g/s)) of a g x g grid [B, g*g, d].
at::Tensor pool(const at::Tensor& patches, int64_t grid, int64_t side) {
  std::vector<at::Tensor> rows;
  for (int64_t i = 0; i < side; ++i)
    for (int64_t j = 0; j < side; ++j) {
      const int64_t r0 = i * grid / side, r1 = ((i + 1) * grid + side - 1) / side;
      const int64_t c0 = j * grid / side, c1 = ((j + 1) * grid + side - 1) / side;
      at::Tensor sum = torch::zeros({patches.size(0), patches.size(2)}, patches.options());
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t col = c0; col < c1; ++col) sum = sum + patches.select(1, r * grid + col);
      rows.push_back(sum / static_cast<double>((r1 - r0) * (c1 - c0)));
    }
  return torch::stack(rows, 1);
}

TEST(BackendModulesGolden, Imhsa) {
  for (int64_t prefix : {1, 2, 0}) {  // the class token; two prefix tokens (class + register); none
    SCOPED_TRACE(prefix);
    auto m = build("attention: {backend: imhsa, backend_kwargs: {landmarks: 4}}", prefix);
    const int64_t grid = 4, side = 2, P = grid * grid, N = P + prefix;
    const at::Tensor x = input(N);
    const HeadQkv qkv = reference_qkv(*m, x);
    // Per head: landmarks = [prefix tokens; pooled patches], for queries and keys alike.
    std::vector<at::Tensor> q_land, k_land, s_q, s_k;
    for (int64_t h = 0; h < kHeads; ++h) {
      q_land.push_back(torch::cat({qkv.q[h].narrow(1, 0, prefix), pool(qkv.q[h].narrow(1, prefix, P), grid, side)}, 1));
      k_land.push_back(torch::cat({qkv.k[h].narrow(1, 0, prefix), pool(qkv.k[h].narrow(1, prefix, P), grid, side)}, 1));
      s_q.push_back(at::matmul(qkv.q[h].narrow(1, prefix, P), k_land[h].transpose(1, 2)) * kScale);  // [B, P, L']
      s_k.push_back(at::matmul(q_land[h], qkv.k[h].transpose(1, 2)) * kScale);                       // [B, L', N]
    }
    // Head mixing: head g gets sum_h W[g][h] * head h, before (W1) and after (W2) each softmax.
    auto mix = [](const at::Tensor& w, const std::vector<at::Tensor>& per_head) {
      std::vector<at::Tensor> out;
      for (int64_t g = 0; g < kHeads; ++g) {
        at::Tensor sum = torch::zeros_like(per_head[0]);
        for (int64_t h = 0; h < kHeads; ++h) sum = sum + w[g][h] * per_head[h];
        out.push_back(sum);
      }
      return out;
    };
    auto softmax_all = [](std::vector<at::Tensor> t) {
      for (auto& s : t) s = at::softmax(s, -1);
      return t;
    };
    const auto a_q = mix(param(*m, "w2_q"), softmax_all(mix(param(*m, "w1_q"), s_q)));
    const auto a_k = mix(param(*m, "w2_k"), softmax_all(mix(param(*m, "w1_k"), s_k)));
    std::vector<at::Tensor> heads;
    for (int64_t h = 0; h < kHeads; ++h) {
      // The prefix tokens' rows: exact softmax attention over every token.
      const at::Tensor cls = at::matmul(
          at::softmax(at::matmul(qkv.q[h].narrow(1, 0, prefix), qkv.k[h].transpose(1, 2)) * kScale, -1), qkv.v[h]);
      heads.push_back(torch::cat({cls, at::matmul(a_q[h], at::matmul(a_k[h], qkv.v[h]))}, 1));
    }
    expect_matches(*m, x, reference_out(*m, heads));
  }
}

// Reformer, query by query: per hash round, tokens sorted by (bucket of the normalised key,
// position) and cut into chunks of c; a query's keys are its chunk's and the previous chunk's
// (cyclic); with shared QK the keys are the normalised queries and a query drops its own
// token while the round offers it another key. One softmax over the rounds' keys (with repeats).
at::Tensor reformer_reference(const torch::nn::Module& m, const at::Tensor& x, bool shared_qk, int64_t chunk) {
  const HeadQkv qkv = reference_qkv(m, x);
  const at::Tensor rotations = param(m, "rotations");  // [H, R, d, b/2]
  const int64_t R = rotations.size(1), chunks = (kTokens + chunk - 1) / chunk;
  std::vector<at::Tensor> heads;
  for (int64_t h = 0; h < kHeads; ++h) {
    at::Tensor out = torch::zeros({kBatch, kTokens, kHeadDim}, torch::kFloat64);
    for (int64_t b = 0; b < kBatch; ++b) {
      const at::Tensor q = qkv.q[h][b];
      const at::Tensor k = shared_qk ? q / q.norm(2, {1}, true) : qkv.k[h][b];
      std::vector<std::vector<int64_t>> keys(kTokens);
      for (int64_t r = 0; r < R; ++r) {
        const at::Tensor rotated = at::matmul(k / k.norm(2, {1}, true), rotations[h][r]);
        const at::Tensor bucket = torch::cat({rotated, -rotated}, 1).argmax(1);
        std::vector<int64_t> order(kTokens);
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t c) {
          return bucket[a].item<int64_t>() < bucket[c].item<int64_t>();
        });
        std::vector<int64_t> chunk_of(kTokens);
        for (int64_t s = 0; s < kTokens; ++s) chunk_of[order[s]] = s / chunk;
        for (int64_t i = 0; i < kTokens; ++i) {
          std::vector<int64_t> round;
          const int64_t previous = (chunk_of[i] + chunks - 1) % chunks;
          for (int64_t c = 0; c < (chunks > 1 ? 2 : 1); ++c)
            for (int64_t j = 0; j < kTokens; ++j)
              if (chunk_of[j] == (c == 0 ? chunk_of[i] : previous)) round.push_back(j);
          const bool others = std::any_of(round.begin(), round.end(), [&](int64_t j) { return j != i; });
          for (int64_t j : round)
            if (!(shared_qk && others && j == i)) keys[i].push_back(j);
        }
      }
      for (int64_t i = 0; i < kTokens; ++i) {
        const at::Tensor index = torch::tensor(keys[i]);
        const at::Tensor p = at::softmax(at::matmul(k.index_select(0, index), q[i]) * kScale, 0);
        out[b][i] = at::matmul(p, qkv.v[h][b].index_select(0, index));
      }
    }
    heads.push_back(out);
  }
  return reference_out(m, heads);
}

TEST(BackendModulesGolden, ReformerSharedQkIsTheDefault) {
  // 17 tokens in chunks of 4: padding, several chunks, two rounds.
  auto m = build("attention: {backend: reformer, backend_kwargs: {buckets: 4, hashes: 2, chunk: 4, seed: 1}}");
  ASSERT_TRUE(dynamic_cast<ReformerAttention&>(*m).shared_qk());
  const at::Tensor x = input();
  expect_matches(*m, x, reformer_reference(*m, x, /*shared_qk=*/true, 4));
  // timm's K block is not used: changing it changes nothing.
  {
    torch::NoGradGuard no_grad;
    param(*m, "qkv.weight").narrow(0, kDim, kDim).normal_();
  }
  expect_matches(*m, x, reformer_reference(*m, x, true, 4));
}

TEST(BackendModulesGolden, ReformerSeparateQk) {
  auto m = build("attention: {backend: reformer, backend_kwargs: {buckets: 4, hashes: 2, chunk: 4, qk: separate}}");
  ASSERT_FALSE(dynamic_cast<ReformerAttention&>(*m).shared_qk());
  const at::Tensor x = input();
  expect_matches(*m, x, reformer_reference(*m, x, /*shared_qk=*/false, 4));
}

TEST(BackendModulesGolden, ReformerTokenAloneAttendsItself) {
  // One token per chunk and one chunk: a query's only key is its own, which it then keeps.
  const at::Tensor q = torch::randn({1, 1, 1, 4}, torch::kFloat64), v = torch::randn({1, 1, 1, 4}, torch::kFloat64);
  const at::Tensor out = reformer_attention(q, shared_qk_keys(q), v, torch::randn({1, 1, 4, 1}), 1, 0.5, true);
  EXPECT_TRUE(torch::allclose(out, v, 1e-12, 1e-12));
}

}  // namespace
}  // namespace sparsevit::attention
