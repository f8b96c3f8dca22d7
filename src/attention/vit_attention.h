// Backend `vit` / `dense`: softmax attention, optionally restricted to a static pattern that
// runs through the sparse operator (kernel sparse), a dense N x N mask (kernel masked, what
// reference implementations do), or no mask at all (kernel dense).
#pragma once

#include <torch/nn/modules/dropout.h>

#include "attention/attention.h"

namespace sparsevit::attention {

class VitAttention : public QkvAttention {
 public:
  // `kernel` auto resolves here, once: sparse below sparse_kernel_density_threshold(), else masked.
  VitAttention(const LayerOptions& options, std::optional<patterns::Pattern> pattern, config::AttentionKernel kernel);

  at::Tensor forward(const at::Tensor& x) override;
  std::string kernel_name() const override { return config::kernel_name(kernel_); }
  config::AttentionKernel kernel() const { return kernel_; }  // resolved: dense | masked | sparse
  double computed_pairs_per_head(int64_t num_tokens) const override;
  at::Tensor attention_probs(const at::Tensor& x) override;
  at::Tensor head_outputs(const at::Tensor& x) override;
  const std::optional<patterns::Pattern>& pattern() const { return pattern_; }
  std::optional<patterns::Pattern> static_pattern() const override { return pattern_; }

 private:
  void check_tokens(const at::Tensor& x) const;

  config::AttentionKernel kernel_;  // resolved: dense | masked | sparse
  std::optional<patterns::Pattern> pattern_;
  torch::nn::Dropout attn_drop_{nullptr};
  torch::nn::Dropout proj_drop_{nullptr};
  // The pattern as buffers, so checkpoints carry the exact pattern the model trained with.
  at::Tensor row_ptr_;
  at::Tensor col_idx_;
  at::Tensor mask_;  // bool [H, N, N], kernel masked only
};

}  // namespace sparsevit::attention
