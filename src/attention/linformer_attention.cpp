#include "attention/linformer_attention.h"

#include <ATen/ATen.h>
#include <torch/nn/init.h>

#include <cmath>

#include "util/errors.h"

namespace sparsevit::attention {

at::Tensor linformer_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& e,
                               const at::Tensor& f, double scale) {
  // [k, N] or [H, k, N] times [B, H, N, D] broadcasts to [B, H, k, D].
  const at::Tensor keys = at::matmul(e, k), values = at::matmul(f, v);
  return at::matmul(at::softmax(at::matmul(q, keys.transpose(-2, -1)) * scale, -1), values);
}

LinformerAttention::LinformerAttention(const LayerOptions& options, patterns::MaskKwargs kwargs)
    : QkvAttention(options), kwargs_(std::move(kwargs)), num_tokens_(geometry_.num_tokens) {
  params_ = config::linformer_params(kwargs_, geometry_);
  const int64_t k = params_.k, n = num_tokens_;
  const std::vector<int64_t> shape =
      params_.share == "none" ? std::vector<int64_t>{geometry_.num_heads, k, n} : std::vector<int64_t>{k, n};
  // Uniform +-1/sqrt(N): a projected key is a weighted sum of N keys of about the keys' scale.
  const double bound = 1.0 / std::sqrt(static_cast<double>(n));
  auto draw = [&] { return at::empty(shape).uniform_(-bound, bound); };
  if (params_.share == "layerwise" && options.shared) {
    // One E for the whole model: the model's holder owns (and registers) it; this layer only
    // computes with it, so it is neither a parameter of this module nor counted twice.
    e_ = options.shared->get_or_create("linformer_E", shape, draw);
    f_ = e_;
  } else {
    e_ = register_parameter("E", draw());
    const bool shared_kv = params_.share == "kv" || params_.share == "layerwise";
    f_ = shared_kv ? e_ : register_parameter("F", draw());
  }
  proj_drop_ = register_module("proj_drop", torch::nn::Dropout(options.proj_drop));
}

double LinformerAttention::computed_pairs_per_head(int64_t num_tokens) const {
  return *config::backend_pairs_per_head("linformer", kwargs_, with_tokens(num_tokens));
}

at::Tensor LinformerAttention::head_outputs(const at::Tensor& x) {
  if (x.size(1) != num_tokens_)
    throw UsageError("linformer: E, F were built for " + std::to_string(num_tokens_) + " tokens, the input has " +
                     std::to_string(x.size(1)));
  const auto [q, k, v] = project_qkv(x);
  return linformer_attention(q, k, v, e_, f_, scale_);
}

at::Tensor LinformerAttention::forward(const at::Tensor& x) { return proj_drop_->forward(project_out(head_outputs(x))); }

}  // namespace sparsevit::attention
