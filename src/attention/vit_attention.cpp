#include "attention/vit_attention.h"

#include <ATen/ATen.h>

#include <cmath>
#include <limits>

#include "ops/masked_attention_reference.h"
#include "ops/sparse_attention.h"
#include "patterns/pattern_stats.h"
#include "util/errors.h"
#include "util/linear.h"

namespace sparsevit::attention {

using config::AttentionKernel;

VitAttention::VitAttention(const LayerOptions& options, std::optional<patterns::Pattern> pattern,
                           config::AttentionKernel kernel)
    : QkvAttention(options), pattern_(std::move(pattern)) {
  attn_drop_ = register_module("attn_drop", torch::nn::Dropout(options.attn_drop));
  proj_drop_ = register_module("proj_drop", torch::nn::Dropout(options.proj_drop));

  if (!pattern_ || kernel == AttentionKernel::kDense) {
    kernel_ = AttentionKernel::kDense;
    pattern_.reset();
    return;
  }
  if (pattern_->num_heads() != geometry_.num_heads)
    throw UsageError("attention: the pattern has " + std::to_string(pattern_->num_heads()) + " heads, the layer " +
                     std::to_string(geometry_.num_heads));
  kernel_ = kernel != AttentionKernel::kAuto ? kernel
            : patterns::density(*pattern_) < sparse_kernel_density_threshold() ? AttentionKernel::kSparse
                                                                                : AttentionKernel::kMasked;
  if (options.attn_drop > 0)
    throw UsageError("attention: attn_drop > 0 is supported only by dense attention (no mask)");
  const ops::PatternTensors tensors = ops::pattern_tensors(*pattern_);
  row_ptr_ = register_buffer("row_ptr", tensors.row_ptr.clone());
  col_idx_ = register_buffer("col_idx", tensors.col_idx.clone());
  if (kernel_ == AttentionKernel::kMasked) mask_ = ops::csr_to_dense_mask(row_ptr_, col_idx_, pattern_->num_tokens());
}

double VitAttention::computed_pairs_per_head(int64_t num_tokens) const {
  if (kernel_ != AttentionKernel::kSparse || !pattern_) return static_cast<double>(num_tokens) * num_tokens;
  return static_cast<double>(pattern_->total_edges()) / pattern_->num_heads();
}

void VitAttention::check_tokens(const at::Tensor& x) const {
  if (pattern_ && pattern_->num_tokens() != x.size(1))
    throw UsageError("attention: the pattern was built for " + std::to_string(pattern_->num_tokens()) +
                     " tokens, the input has " + std::to_string(x.size(1)));
}

at::Tensor VitAttention::head_outputs(const at::Tensor& x) {
  check_tokens(x);
  const auto [q, k, v] = project_qkv(x);
  if (kernel_ == AttentionKernel::kSparse) return ops::sparse_attention(q, k, v, row_ptr_.to(x.device()), col_idx_.to(x.device()), scale_);
  if (kernel_ == AttentionKernel::kMasked) return ops::masked_attention(q, k, v, mask_.to(x.device()), scale_);
  // Scaling q (N x D) instead of the scores (N x N) also makes the contiguous copy of the
  // permuted q that matmul would otherwise make itself.
  const at::Tensor scores = at::matmul(q * scale_, k.transpose(-2, -1));
  return at::matmul(attn_drop_->forward(at::softmax(scores, -1)), v);
}

at::Tensor VitAttention::forward(const at::Tensor& x) {
  if (kernel_ == AttentionKernel::kSparse) {
    // The packed op reads q, k, v straight from the qkv projection and writes the layout `proj`
    // takes: no permute/contiguous copies forward or backward.
    check_tokens(x);
    const at::Tensor heads = ops::sparse_attention_qkv(linear(qkv_, x), geometry_.num_heads, row_ptr_.to(x.device()),
                                                       col_idx_.to(x.device()), scale_);
    return proj_drop_->forward(linear(proj_, heads));
  }
  return proj_drop_->forward(project_out(head_outputs(x)));
}

at::Tensor VitAttention::attention_probs(const at::Tensor& x) {
  check_tokens(x);
  const auto [q, k, v] = project_qkv(x);
  at::Tensor scores = at::matmul(q, k.transpose(-2, -1)) * scale_;
  if (kernel_ == AttentionKernel::kDense) return at::softmax(scores, -1);
  const at::Tensor mask = kernel_ == AttentionKernel::kMasked ? mask_.to(x.device())
                                              : ops::csr_to_dense_mask(row_ptr_, col_idx_, pattern_->num_tokens()).to(x.device());
  // Rows without keys give zeros, as the kernels do (softmax of all -inf would be NaN).
  return at::softmax(scores.masked_fill(mask.logical_not(), -std::numeric_limits<double>::infinity()), -1)
      .nan_to_num(0.0)
      .masked_fill(mask.logical_not(), 0.0);
}

}  // namespace sparsevit::attention
