// Backend `efficient`: Efficient Attention (Shen et al. 2021). Per head,
// out = rho_q(Q) (rho_k(K)^T V), rho_q a softmax over each query's features, rho_k a softmax
// of each key channel over the tokens; no 1/sqrt(d) scale (the softmaxes normalise). The
// d_k x d context is formed first, so the cost is 2 N d_k d: linear in N. `key_dim` narrows
// the query/key channels to the first d_k of each head (the paper's key channels), keeping
// timm's qkv shape so checkpoints interchange.
#pragma once

#include <torch/nn/modules/dropout.h>

#include "attention/attention.h"
#include "config/attention_backends.h"

namespace sparsevit::attention {

class EfficientAttention : public QkvAttention {
 public:
  EfficientAttention(const LayerOptions& options, patterns::MaskKwargs kwargs);

  at::Tensor forward(const at::Tensor& x) override;
  at::Tensor head_outputs(const at::Tensor& x) override;
  std::string kernel_name() const override { return "efficient"; }
  double computed_pairs_per_head(int64_t num_tokens) const override;
  int64_t key_dim() const { return key_dim_; }

 private:
  patterns::MaskKwargs kwargs_;
  int64_t key_dim_;
  torch::nn::Dropout proj_drop_{nullptr};
};

// rho_q(q[..., :key_dim]) (rho_k(k[..., :key_dim])^T v) for q, k, v [B, H, N, D].
at::Tensor efficient_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, int64_t key_dim);

}  // namespace sparsevit::attention
