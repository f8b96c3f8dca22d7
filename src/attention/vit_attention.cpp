#include "attention/vit_attention.h"

#include <ATen/ATen.h>

#include <cmath>

#include "ops/masked_attention_reference.h"
#include "ops/sparse_attention.h"
#include "patterns/pattern_stats.h"
#include "util/errors.h"

namespace sparsevit::attention {

VitAttention::VitAttention(const AttentionDims& dims, std::optional<patterns::Pattern> pattern,
                           const std::string& kernel)
    : num_heads_(dims.num_heads), head_dim_(dims.dim / dims.num_heads), pattern_(std::move(pattern)) {
  if (dims.num_heads < 1 || dims.dim % dims.num_heads != 0)
    throw UsageError("attention: dim " + std::to_string(dims.dim) + " is not divisible by " +
                     std::to_string(dims.num_heads) + " heads");
  scale_ = 1.0 / std::sqrt(static_cast<double>(head_dim_));
  qkv_ = register_module("qkv", torch::nn::Linear(torch::nn::LinearOptions(dims.dim, 3 * dims.dim).bias(dims.qkv_bias)));
  proj_ = register_module("proj", torch::nn::Linear(dims.dim, dims.dim));
  attn_drop_ = register_module("attn_drop", torch::nn::Dropout(dims.attn_drop));
  proj_drop_ = register_module("proj_drop", torch::nn::Dropout(dims.proj_drop));

  if (!pattern_ || kernel == "dense") {
    kernel_ = "dense";
    pattern_.reset();
    return;
  }
  if (pattern_->num_heads() != num_heads_)
    throw UsageError("attention: the pattern has " + std::to_string(pattern_->num_heads()) + " heads, the layer " +
                     std::to_string(num_heads_));
  kernel_ = kernel == "auto" ? (patterns::density(*pattern_) < sparse_kernel_density_threshold() ? "sparse" : "masked")
                             : kernel;
  if (dims.attn_drop > 0)
    throw UsageError("attention: attn_drop > 0 is supported only by dense attention (no mask)");
  const ops::PatternTensors tensors = ops::pattern_tensors(*pattern_);
  row_ptr_ = register_buffer("row_ptr", tensors.row_ptr.clone());
  col_idx_ = register_buffer("col_idx", tensors.col_idx.clone());
  if (kernel_ == "masked") mask_ = ops::csr_to_dense_mask(row_ptr_, col_idx_, pattern_->num_tokens());
}

double VitAttention::computed_pairs_per_head(int64_t num_tokens) const {
  if (kernel_ == "dense" || kernel_ == "masked" || !pattern_) return static_cast<double>(num_tokens) * num_tokens;
  return static_cast<double>(pattern_->total_edges()) / pattern_->num_heads();
}

at::Tensor VitAttention::forward(const at::Tensor& x) {
  const int64_t B = x.size(0), N = x.size(1), C = x.size(2);
  if (pattern_ && pattern_->num_tokens() != N)
    throw UsageError("attention: the pattern was built for " + std::to_string(pattern_->num_tokens()) +
                     " tokens, the input has " + std::to_string(N));
  // [B, N, 3C] -> 3 x [B, H, N, D]
  const at::Tensor qkv = qkv_->forward(x).reshape({B, N, 3, num_heads_, head_dim_}).permute({2, 0, 3, 1, 4});
  const at::Tensor q = qkv[0], k = qkv[1], v = qkv[2];
  at::Tensor out;
  if (kernel_ == "sparse") {
    out = ops::sparse_attention(q, k, v, row_ptr_.to(x.device()), col_idx_.to(x.device()), scale_);
  } else if (kernel_ == "masked") {
    out = ops::masked_attention(q, k, v, mask_.to(x.device()), scale_);
  } else {
    const at::Tensor scores = at::matmul(q, k.transpose(-2, -1)) * scale_;
    out = at::matmul(attn_drop_->forward(at::softmax(scores, -1)), v);
  }
  out = out.transpose(1, 2).reshape({B, N, C});
  return proj_drop_->forward(proj_->forward(out));
}

}  // namespace sparsevit::attention
