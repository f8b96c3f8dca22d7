#include "attention/topk_attention.h"

#include <ATen/ATen.h>

#include <cmath>

#include "patterns/topk_mask.h"
#include "util/errors.h"

namespace sparsevit::attention {

at::Tensor topk_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, int64_t keys, double scale,
                          int64_t query_chunk) {
  const int64_t n = q.size(2);
  keys = std::min(keys, k.size(2));
  std::vector<at::Tensor> chunks;
  for (int64_t start = 0; start < n; start += query_chunk) {
    const at::Tensor qc = q.narrow(2, start, std::min(query_chunk, n - start));  // [B, H, c, D]
    const at::Tensor scores = at::matmul(qc, k.transpose(-2, -1)) * scale;     // [B, H, c, N]
    // A stable descending sort keeps the lower key first among equal scores.
    const at::Tensor order = std::get<1>(scores.detach().sort(/*stable=*/true, /*dim=*/-1, /*descending=*/true));
    const at::Tensor index = order.narrow(-1, 0, keys);                        // [B, H, c, k]
    const at::Tensor probs = at::softmax(scores.gather(-1, index), -1);        // [B, H, c, k]
    // Gather the kept values: [B, H, c, k, D].
    const auto sizes = index.sizes();
    const at::Tensor flat = index.reshape({sizes[0], sizes[1], -1, 1}).expand({-1, -1, -1, v.size(3)});
    const at::Tensor values = v.gather(2, flat).reshape({sizes[0], sizes[1], sizes[2], keys, v.size(3)});
    chunks.push_back((probs.unsqueeze(-1) * values).sum(-2));
  }
  return at::cat(chunks, 2);
}

TopkAttention::TopkAttention(const LayerOptions& options, patterns::MaskKwargs kwargs, int64_t query_chunk)
    : QkvAttention(options), query_chunk_(query_chunk), kwargs_(std::move(kwargs)) {}

int64_t TopkAttention::keys_per_query(int64_t num_tokens) const {
  return patterns::topk_keys_per_query(patterns::MaskContext{with_tokens(num_tokens), layer_}, kwargs_, progress_);
}

double TopkAttention::computed_pairs_per_head(int64_t num_tokens) const {
  // Every pair is scored to choose; k pairs per query are used for P.V. Reported as the mean.
  return 0.5 * (static_cast<double>(num_tokens) * num_tokens + static_cast<double>(num_tokens) * keys_per_query(num_tokens));
}

at::Tensor TopkAttention::forward(const at::Tensor& x) { return project_out(head_outputs(x)); }

at::Tensor TopkAttention::head_outputs(const at::Tensor& x) {
  const auto [q, k, v] = project_qkv(x);
  return topk_attention(q, k, v, keys_per_query(x.size(1)), scale_, query_chunk_);
}

// With v = I the output rows are the kept keys' softmax weights, zero elsewhere: [B, H, N, N].
at::Tensor TopkAttention::attention_probs(const at::Tensor& x) {
  const auto [q, k, v] = project_qkv(x);
  const int64_t B = x.size(0), N = x.size(1);
  const at::Tensor eye = at::eye(N, v.options()).expand({B, geometry_.num_heads, N, N});
  return topk_attention(q, k, eye, keys_per_query(N), scale_, query_chunk_);
}

}  // namespace sparsevit::attention
