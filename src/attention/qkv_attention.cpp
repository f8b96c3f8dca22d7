// QkvAttention: the qkv / proj projections every attention backend shares.
#include <ATen/ATen.h>

#include <cmath>

#include "attention/attention.h"
#include "util/errors.h"
#include "util/linear.h"

namespace sparsevit::attention {

at::Tensor AttentionModule::attention_probs(const at::Tensor&) {
  throw UsageError("attention kernel '" + kernel_name() + "' does not expose attention probabilities");
}

at::Tensor AttentionModule::head_outputs(const at::Tensor&) {
  throw UsageError("attention kernel '" + kernel_name() + "' does not expose per-head outputs");
}

QkvAttention::QkvAttention(const LayerOptions& options)
    : geometry_(options.geometry), layer_(options.layer) {
  if (geometry_.num_heads < 1 || geometry_.head_dim < 1)
    throw UsageError("attention: needs >= 1 head of >= 1 channels, got " + std::to_string(geometry_.num_heads) +
                     " x " + std::to_string(geometry_.head_dim));
  if (geometry_.num_prefix_tokens < 0) throw UsageError("attention: negative number of prefix tokens");
  scale_ = 1.0 / std::sqrt(static_cast<double>(geometry_.head_dim));
  const int64_t dim = geometry_.embed_dim();
  qkv_ = register_module("qkv", torch::nn::Linear(torch::nn::LinearOptions(dim, 3 * dim).bias(options.qkv_bias)));
  proj_ = register_module("proj", torch::nn::Linear(dim, dim));
}

std::array<at::Tensor, 3> QkvAttention::project_qkv(const at::Tensor& x) {
  const int64_t B = x.size(0), N = x.size(1);
  // unbind, not qkv[0..2]: its backward stacks the three gradients into one buffer, where three
  // selects would each zero-fill a qkv-sized gradient and add them up.
  const std::vector<at::Tensor> qkv =
      linear(qkv_, x).reshape({B, N, 3, geometry_.num_heads, geometry_.head_dim}).permute({2, 0, 3, 1, 4}).unbind(0);
  return {qkv[0], qkv[1], qkv[2]};
}

at::Tensor QkvAttention::project_out(const at::Tensor& heads) {
  const int64_t B = heads.size(0), N = heads.size(2);
  return linear(proj_, heads.transpose(1, 2).reshape({B, N, geometry_.embed_dim()}));
}

}  // namespace sparsevit::attention
