#include "attention/efficient_attention.h"

#include <ATen/ATen.h>

namespace sparsevit::attention {

at::Tensor efficient_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, int64_t key_dim) {
  const at::Tensor rho_q = at::softmax(q.narrow(-1, 0, key_dim), -1);  // over features
  const at::Tensor rho_k = at::softmax(k.narrow(-1, 0, key_dim), -2);  // over tokens
  return at::matmul(rho_q, at::matmul(rho_k.transpose(-2, -1), v));
}

EfficientAttention::EfficientAttention(const LayerOptions& options, patterns::MaskKwargs kwargs)
    : QkvAttention(options), kwargs_(std::move(kwargs)) {
  key_dim_ = config::efficient_params(kwargs_, geometry_)
                 .key_dim;
  proj_drop_ = register_module("proj_drop", torch::nn::Dropout(options.proj_drop));
}

double EfficientAttention::computed_pairs_per_head(int64_t num_tokens) const {
  return *config::backend_pairs_per_head("efficient", kwargs_, with_tokens(num_tokens));
}

at::Tensor EfficientAttention::head_outputs(const at::Tensor& x) {
  const auto [q, k, v] = project_qkv(x);
  return efficient_attention(q, k, v, key_dim_);
}

at::Tensor EfficientAttention::forward(const at::Tensor& x) { return proj_drop_->forward(project_out(head_outputs(x))); }

}  // namespace sparsevit::attention
