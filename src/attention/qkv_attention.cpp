// QkvAttention: the qkv / proj projections every attention backend shares.
#include <ATen/ATen.h>

#include <cmath>

#include "attention/attention.h"
#include "util/errors.h"

namespace sparsevit::attention {

at::Tensor AttentionModule::attention_probs(const at::Tensor&) {
  throw UsageError("attention kernel '" + kernel_name() + "' does not expose attention probabilities");
}

at::Tensor AttentionModule::head_outputs(const at::Tensor&) {
  throw UsageError("attention kernel '" + kernel_name() + "' does not expose per-head outputs");
}

QkvAttention::QkvAttention(const AttentionDims& dims)
    : num_heads_(dims.num_heads), num_prefix_tokens_(dims.num_prefix_tokens), layer_(dims.layer) {
  if (dims.num_heads < 1 || dims.dim % dims.num_heads != 0)
    throw UsageError("attention: dim " + std::to_string(dims.dim) + " is not divisible by " +
                     std::to_string(dims.num_heads) + " heads");
  head_dim_ = dims.dim / dims.num_heads;
  scale_ = 1.0 / std::sqrt(static_cast<double>(head_dim_));
  qkv_ = register_module("qkv", torch::nn::Linear(torch::nn::LinearOptions(dims.dim, 3 * dims.dim).bias(dims.qkv_bias)));
  proj_ = register_module("proj", torch::nn::Linear(dims.dim, dims.dim));
}

std::array<at::Tensor, 3> QkvAttention::project_qkv(const at::Tensor& x) {
  const int64_t B = x.size(0), N = x.size(1);
  const at::Tensor qkv = qkv_->forward(x).reshape({B, N, 3, num_heads_, head_dim_}).permute({2, 0, 3, 1, 4});
  return {qkv[0], qkv[1], qkv[2]};
}

at::Tensor QkvAttention::project_out(const at::Tensor& heads) {
  const int64_t B = heads.size(0), N = heads.size(2);
  return proj_->forward(heads.transpose(1, 2).reshape({B, N, num_heads_ * head_dim_}));
}

}  // namespace sparsevit::attention
