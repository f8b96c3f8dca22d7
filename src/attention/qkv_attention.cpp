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

QkvAttention::QkvAttention(const LayerOptions& options)
    : geometry_(options.geometry),
      num_heads_(options.geometry.num_heads),
      head_dim_(options.geometry.head_dim),
      num_prefix_tokens_(options.geometry.num_prefix_tokens),
      layer_(options.layer) {
  if (num_heads_ < 1 || head_dim_ < 1)
    throw UsageError("attention: needs >= 1 head of >= 1 channels, got " + std::to_string(num_heads_) + " x " +
                     std::to_string(head_dim_));
  if (num_prefix_tokens_ < 0) throw UsageError("attention: negative number of prefix tokens");
  scale_ = 1.0 / std::sqrt(static_cast<double>(head_dim_));
  const int64_t dim = geometry_.embed_dim();
  qkv_ = register_module("qkv", torch::nn::Linear(torch::nn::LinearOptions(dim, 3 * dim).bias(options.qkv_bias)));
  proj_ = register_module("proj", torch::nn::Linear(dim, dim));
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
