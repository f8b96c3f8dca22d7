// Shared checks for the attention backend suites: config parsing, trainability, one-line errors.
#pragma once

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <functional>
#include <string>
#include <vector>

#include "attention/attention.h"
#include "config/attention_spec.h"
#include "util/errors.h"

namespace sparsevit::attention::testing {

inline config::AttentionSpec spec_of(const std::string& yaml) {
  return config::parse_attention_spec(yaml, "test.yaml");
}

// One layer of width `dim` split into `heads` heads, on `tokens` tokens (0: unknown).
inline LayerOptions dims_of(int64_t dim, int64_t heads, int64_t tokens, int64_t prefix = 1, int64_t layer = 0) {
  LayerOptions o;
  o.geometry = AttentionGeometry{tokens, prefix, heads, dim / heads, 1};
  o.layer = layer;
  return o;
}

// Forward + backward on random input: the output keeps [B, N, C] and every named parameter
// (qkv, proj and the backend's own) receives a finite, nonzero gradient.
inline void expect_trainable(AttentionModule& module, int64_t tokens, int64_t dim,
                             const std::vector<std::string>& params) {
  module.train();
  const at::Tensor x = torch::randn({2, tokens, dim});
  const at::Tensor out = module.forward(x);
  ASSERT_EQ(out.sizes(), (at::IntArrayRef{2, tokens, dim}));
  ASSERT_TRUE(torch::isfinite(out).all().item<bool>());
  (out * torch::randn_like(out)).sum().backward();
  const auto named = module.named_parameters();
  for (const auto& name : params) {
    ASSERT_TRUE(named.contains(name)) << name;
    const at::Tensor g = named[name].grad();
    ASSERT_TRUE(g.defined()) << name;
    EXPECT_TRUE(torch::isfinite(g).all().item<bool>()) << name;
    EXPECT_GT(g.abs().sum().item<double>(), 0.0) << name;
  }
}

// `make` throws a UsageError whose message is one line and contains `needle`.
inline void expect_usage_error(const std::function<void()>& make, const std::string& needle) {
  try {
    make();
    ADD_FAILURE() << "no UsageError (expected one mentioning '" << needle << "')";
  } catch (const UsageError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(needle), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
}

}  // namespace sparsevit::attention::testing
