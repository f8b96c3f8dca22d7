// Backend `reformer`: LSH attention (Kitaev et al. 2020). Per hash round, every token gets the
// angular bucket argmax([x R, -x R]) of its normalised key under random rotations R [d, b/2];
// tokens are sorted by (bucket, position) and cut into chunks of c; each chunk's queries
// attend the keys of their chunk and of the previous chunk (cyclically, as the reference
// implementations do). Rounds are combined with the weights softmax_r(logsumexp_r), which is
// exactly softmax over the union of the rounds' key sets (a pair found twice counts twice).
// Shared QK (`qk: shared`, the default, as in the paper): the keys are the length-normalised
// queries k_j = q_j / |q_j| (timm's qkv still holds a K block, which then goes unused), so a
// query and its own key hash alike, and a token does not attend itself unless it has no other
// key in its chunks. `qk: separate` keeps timm's K; each token is then placed by its normalised
// key, so a query meets the keys that hash like its own token's key.
// R is a buffer drawn from (seed, layer) with the project's portable RNG.
#pragma once

#include <torch/nn/modules/dropout.h>

#include "attention/attention.h"
#include "config/attention_backends.h"

namespace sparsevit::attention {

class ReformerAttention : public QkvAttention {
 public:
  ReformerAttention(const LayerOptions& options, patterns::MaskKwargs kwargs);

  at::Tensor forward(const at::Tensor& x) override;
  at::Tensor head_outputs(const at::Tensor& x) override;
  at::Tensor attention_probs(const at::Tensor& x) override;
  std::string kernel_name() const override { return "reformer"; }
  double computed_pairs_per_head(int64_t num_tokens) const override;
  const at::Tensor& rotations() const { return rotations_; }  // [H, hashes, d, buckets/2]
  int64_t chunk(int64_t num_tokens) const;
  bool shared_qk() const { return params_.shared_qk; }

 private:
  // q, k, v [B, H, N, d] as the score step sees them (k = the normalised q when shared).
  std::array<at::Tensor, 3> queries_keys_values(const at::Tensor& x);

  patterns::MaskKwargs kwargs_;
  config::ReformerParams params_;
  at::Tensor rotations_;
  torch::nn::Dropout proj_drop_{nullptr};
};

// Buckets [B, H, hashes, N] of the keys k [B, H, N, d] under rotations [H, hashes, d, b/2].
at::Tensor lsh_buckets(const at::Tensor& k, const at::Tensor& rotations);
// Shared-QK keys: q / |q| per token (q [B, H, N, d]).
at::Tensor shared_qk_keys(const at::Tensor& q);
// LSH attention of q, k, v [B, H, N, d]; tokens are hashed by k. `exclude_self`: a query skips
// its own token's key unless it has no other valid key (shared QK, where it would dominate).
at::Tensor reformer_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                              const at::Tensor& rotations, int64_t chunk, double scale, bool exclude_self = false);

}  // namespace sparsevit::attention
