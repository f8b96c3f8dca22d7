// Backend `linformer` (Wang et al. 2020): keys and values are projected along the sequence by
// learned E, F [k, N], so each query scores k projected keys: O(N k) instead of O(N^2).
// Sharing (`share`): none (E, F per head), headwise (E, F shared by the heads), kv (one E for
// keys and values and every head), layerwise (one E for keys, values, every head and every
// layer: the model passes every layer the same SharedAttentionParameters, which holds E once
// as `attn_shared.linformer_E`; a module built alone keeps it as its own `E`).
#pragma once

#include <torch/nn/modules/dropout.h>

#include "attention/attention.h"
#include "config/attention_backends.h"

namespace sparsevit::attention {

class LinformerAttention : public QkvAttention {
 public:
  LinformerAttention(const LayerOptions& options, patterns::MaskKwargs kwargs);

  at::Tensor forward(const at::Tensor& x) override;
  at::Tensor head_outputs(const at::Tensor& x) override;
  std::string kernel_name() const override { return "linformer"; }
  double computed_pairs_per_head(int64_t num_tokens) const override;

  const config::LinformerParams& params() const { return params_; }
  // [k, N] when shared by the heads, [H, k, N] per head; F aliases E when keys and values share
  // (and with `layerwise` in a model, E is the one tensor every layer holds).
  const at::Tensor& key_projection() const { return e_; }
  const at::Tensor& value_projection() const { return f_; }

 private:
  patterns::MaskKwargs kwargs_;
  config::LinformerParams params_;
  int64_t num_tokens_;
  at::Tensor e_, f_;
  torch::nn::Dropout proj_drop_{nullptr};
};

// softmax(q (E k)^T * scale) (F v) for q, k, v [B, H, N, D]; E, F [k, N] or [H, k, N].
at::Tensor linformer_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& e,
                               const at::Tensor& f, double scale);

}  // namespace sparsevit::attention
