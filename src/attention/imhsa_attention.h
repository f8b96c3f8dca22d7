// Backend `imhsa`: interactive multi-head self-attention (Kang, Yang, Ryu 2024). Query and key
// landmarks Q~, K~ [L, d] average-pool the patch-token grid (s x s, adaptive bins), and learned
// h x h matrices mix the heads before and after each softmax:
//   A_Q = W2q softmax(W1q Q K~^T/sqrt(d))   [N x L per head]
//   A_K = W2k softmax(W1k Q~ K^T/sqrt(d))   [L x N per head]
//   out = A_Q (A_K V)                       (never N x N)
// The class token (and any other prefix token, alike): it joins the landmarks on both sides
// (K~ and Q~ get its own unpooled key and query, so patches see it exactly), and its own row is
// exact dense softmax attention over all N tokens (one query row, 2 N d multiply-adds): the
// classifier reads that token. W1, W2 start as identities, i.e. as independent heads.
#pragma once

#include <torch/nn/modules/dropout.h>

#include "attention/attention.h"
#include "config/attention_backends.h"

namespace sparsevit::attention {

class ImhsaAttention : public QkvAttention {
 public:
  ImhsaAttention(const LayerOptions& options, patterns::MaskKwargs kwargs);

  at::Tensor forward(const at::Tensor& x) override;
  at::Tensor head_outputs(const at::Tensor& x) override;
  std::string kernel_name() const override { return "imhsa"; }
  double computed_pairs_per_head(int64_t num_tokens) const override;
  const config::ImhsaParams& params() const { return params_; }

 private:
  patterns::MaskKwargs kwargs_;
  config::ImhsaParams params_;
  int64_t num_tokens_;
  at::Tensor w1_q_, w2_q_, w1_k_, w2_k_;  // [H, H]
  torch::nn::Dropout proj_drop_{nullptr};
};

struct ImhsaMixing {
  at::Tensor w1_q, w2_q, w1_k, w2_k;  // [H, H]: out head g = sum_h W[g, h] * head h
};

// q, k, v [B, H, N, d] with `prefix` prefix tokens (class token, registers) before a square
// patch grid, pooled to side x side landmarks; every prefix token is handled as the class token.
at::Tensor imhsa_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const ImhsaMixing& mixing,
                           int64_t prefix, int64_t side, double scale);

}  // namespace sparsevit::attention
