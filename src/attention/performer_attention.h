// Backend `performer`: FAVOR+ (Choromanski et al. 2021). softmax(q.k/sqrt(d)) is estimated
// with m positive orthogonal random features phi(x) = exp(w.x' - |x'|^2/2) / sqrt(m),
// x' = x / d^(1/4), and attention becomes phi(Q) (phi(K)^T V) / phi(Q) (phi(K)^T 1): linear in N.
// As in the reference implementation the exponent subtracts its maximum (per query; over all
// keys of a head) and a small constant (kFavorEpsilon) is added, which keeps the features
// finite and the denominators positive.
// The features W [m, d] are a buffer (checkpoints carry them), drawn from (seed, layer, draw)
// with the project's portable RNG, never the global one; in training they are redrawn every
// `redraw_interval` forward passes (0 = never).
#pragma once

#include <torch/nn/modules/dropout.h>

#include "attention/attention.h"
#include "config/attention_backends.h"

namespace sparsevit::attention {

class PerformerAttention : public QkvAttention {
 public:
  PerformerAttention(const LayerOptions& options, patterns::MaskKwargs kwargs);

  at::Tensor forward(const at::Tensor& x) override;
  at::Tensor head_outputs(const at::Tensor& x) override;
  std::string kernel_name() const override { return "performer"; }
  double computed_pairs_per_head(int64_t num_tokens) const override;

  const config::PerformerParams& params() const { return params_; }
  const at::Tensor& features() const { return features_; }
  int64_t draws() const;  // feature draws so far (1 after construction)

 private:
  void redraw();

  patterns::MaskKwargs kwargs_;
  config::PerformerParams params_;
  at::Tensor features_;  // [m, d]
  at::Tensor draws_;     // int64 scalar: the index of the current draw
  at::Tensor steps_;     // int64 scalar: training forwards since the last draw
  torch::nn::Dropout proj_drop_{nullptr};
};

extern const double kFavorEpsilon;  // 1e-6

// Orthogonal Gaussian features [m, d] (float64): blocks of d orthonormal rows (QR of a Gaussian
// matrix), each row scaled by the norm of an independent Gaussian d-vector.
at::Tensor orthogonal_random_features(uint64_t seed, uint64_t layer, uint64_t draw, int64_t m, int64_t d);
// FAVOR+ positive features of x [..., N, d] for the features W [m, d].
at::Tensor favor_features(const at::Tensor& x, const at::Tensor& features, bool is_query);
// The FAVOR+ estimate of softmax attention for q, k, v [B, H, N, d].
at::Tensor favor_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& features);

}  // namespace sparsevit::attention
