#include "attention/imhsa_attention.h"

#include <ATen/ATen.h>

#include <cmath>

#include "util/errors.h"

namespace sparsevit::attention {
namespace {

// [B, H, P, d] patch tokens on a g x g grid -> [B, H, side*side, d] landmark means.
at::Tensor pool_landmarks(const at::Tensor& x, int64_t side) {
  const int64_t B = x.size(0), H = x.size(1), P = x.size(2), d = x.size(3);
  const auto grid = static_cast<int64_t>(std::llround(std::sqrt(static_cast<double>(P))));
  const at::Tensor image = x.reshape({B * H, grid, grid, d}).permute({0, 3, 1, 2});  // [BH, d, g, g]
  return at::adaptive_avg_pool2d(image, {side, side}).reshape({B, H, d, side * side}).transpose(-2, -1);
}

// Mixes the heads of scores [B, H, ...]: out[:, g] = sum_h W[g, h] * s[:, h].
at::Tensor mix_heads(const at::Tensor& w, const at::Tensor& scores) {
  return at::einsum("gh,bhij->bgij", {w, scores});
}

}  // namespace

at::Tensor imhsa_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const ImhsaMixing& m,
                           int64_t prefix, int64_t side, double scale) {
  const int64_t N = q.size(2);
  const at::Tensor q_patch = q.narrow(2, prefix, N - prefix), k_patch = k.narrow(2, prefix, N - prefix);
  at::Tensor q_land = pool_landmarks(q_patch, side), k_land = pool_landmarks(k_patch, side);
  if (prefix > 0) {
    q_land = at::cat({q.narrow(2, 0, prefix), q_land}, 2);
    k_land = at::cat({k.narrow(2, 0, prefix), k_land}, 2);
  }
  const at::Tensor a_q = mix_heads(m.w2_q, at::softmax(mix_heads(m.w1_q, at::matmul(q_patch, k_land.transpose(-2, -1)) * scale), -1));
  const at::Tensor a_k = mix_heads(m.w2_k, at::softmax(mix_heads(m.w1_k, at::matmul(q_land, k.transpose(-2, -1)) * scale), -1));
  const at::Tensor patches = at::matmul(a_q, at::matmul(a_k, v));  // [B, H, P, d]
  if (prefix == 0) return patches;
  const at::Tensor q_cls = q.narrow(2, 0, prefix);
  const at::Tensor cls = at::matmul(at::softmax(at::matmul(q_cls, k.transpose(-2, -1)) * scale, -1), v);
  return at::cat({cls, patches}, 2);
}

ImhsaAttention::ImhsaAttention(const LayerOptions& options, patterns::MaskKwargs kwargs)
    : QkvAttention(options), kwargs_(std::move(kwargs)), num_tokens_(geometry_.num_tokens) {
  params_ = config::imhsa_params(kwargs_, geometry_);
  const at::Tensor eye = at::eye(geometry_.num_heads);
  w1_q_ = register_parameter("w1_q", eye.clone());
  w2_q_ = register_parameter("w2_q", eye.clone());
  w1_k_ = register_parameter("w1_k", eye.clone());
  w2_k_ = register_parameter("w2_k", eye.clone());
  proj_drop_ = register_module("proj_drop", torch::nn::Dropout(options.proj_drop));
}

double ImhsaAttention::computed_pairs_per_head(int64_t num_tokens) const {
  return *config::backend_pairs_per_head("imhsa", kwargs_, with_tokens(num_tokens));
}

at::Tensor ImhsaAttention::forward(const at::Tensor& x) { return proj_drop_->forward(project_out(head_outputs(x))); }

at::Tensor ImhsaAttention::head_outputs(const at::Tensor& x) {
  if (x.size(1) != num_tokens_)
    throw UsageError("imhsa: built for " + std::to_string(num_tokens_) + " tokens (a " +
                     std::to_string(params_.grid) + "x" + std::to_string(params_.grid) + " grid), the input has " +
                     std::to_string(x.size(1)));
  const auto [q, k, v] = project_qkv(x);
  const ImhsaMixing mixing{w1_q_, w2_q_, w1_k_, w2_k_};
  return imhsa_attention(q, k, v, mixing, geometry_.num_prefix_tokens, params_.side, scale_);
}

}  // namespace sparsevit::attention
