// Dynamic top-k attention (mask: topk, or backend: topk): every query keeps its k largest
// scaled scores q.k/sqrt(d) (ties to the lower key index) and takes the softmax over those.
// Queries are processed in chunks, so beyond one chunk's scores memory is O(B*H*N*k).
#pragma once

#include "attention/attention.h"
#include "patterns/mask_kwargs.h"

namespace sparsevit::attention {

class TopkAttention : public QkvAttention {
 public:
  TopkAttention(const LayerOptions& options, patterns::MaskKwargs kwargs, int64_t query_chunk = 64);

  at::Tensor forward(const at::Tensor& x) override;
  at::Tensor head_outputs(const at::Tensor& x) override;
  at::Tensor attention_probs(const at::Tensor& x) override;
  std::string kernel_name() const override { return "topk"; }
  double computed_pairs_per_head(int64_t num_tokens) const override;
  // Training progress in [0, 1] for a scheduled k (k_start -> k_end).
  void set_progress(double progress) override { progress_ = progress; }
  int64_t keys_per_query(int64_t num_tokens) const;

 private:
  int64_t query_chunk_;
  double progress_ = 0.0;
  patterns::MaskKwargs kwargs_;
};

// The top-k attention of q, k, v [B, H, N, D] (exposed for tests).
at::Tensor topk_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, int64_t keys, double scale,
                          int64_t query_chunk);

}  // namespace sparsevit::attention
