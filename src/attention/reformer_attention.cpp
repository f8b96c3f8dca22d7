#include "attention/reformer_attention.h"

#include <ATen/ATen.h>

#include <cmath>
#include <limits>

#include "attention/seeded_gaussian.h"

namespace sparsevit::attention {
namespace {

// x [B, H, R, N, d] gathered along N by index [B, H, R, N].
at::Tensor gather_tokens(const at::Tensor& x, const at::Tensor& index) {
  return x.gather(3, index.unsqueeze(-1).expand({-1, -1, -1, -1, x.size(-1)}));
}

// [B, H, R, C, c, ...] -> the chunk itself followed by the previous chunk (cyclic).
at::Tensor with_previous_chunk(const at::Tensor& x) {
  return x.size(3) > 1 ? at::cat({x, at::roll(x, 1, 3)}, 4) : x;
}

}  // namespace

at::Tensor shared_qk_keys(const at::Tensor& q) { return q / q.norm(2, {-1}, true).clamp_min(1e-12); }

at::Tensor lsh_buckets(const at::Tensor& k, const at::Tensor& rotations) {
  const at::Tensor unit = k / k.norm(2, {-1}, true).clamp_min(1e-12);
  const at::Tensor rotated = at::einsum("bhnd,hrdc->bhrnc", {unit, rotations.to(k.scalar_type())});
  return at::cat({rotated, -rotated}, -1).argmax(-1);
}

at::Tensor reformer_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                              const at::Tensor& rotations, int64_t chunk, double scale, bool exclude_self) {
  // v's width may differ from q's (attention_probs passes the identity as v).
  const int64_t B = q.size(0), H = q.size(1), N = q.size(2), R = rotations.size(1), dv = v.size(3);
  at::Tensor order, inverse;
  {
    at::NoGradGuard no_grad;
    const at::Tensor buckets = lsh_buckets(k.detach(), rotations);  // [B, H, R, N]
    const at::Tensor position = at::arange(N, buckets.options()).expand_as(buckets);
    order = (buckets * N + position).argsort(int64_t{-1}, false);  // by bucket, then position
    inverse = order.argsort(int64_t{-1}, false);
  }
  const int64_t chunks = (N + chunk - 1) / chunk, padded = chunks * chunk;
  auto sorted = [&](const at::Tensor& x) {
    at::Tensor s = gather_tokens(x.unsqueeze(2).expand({B, H, R, N, x.size(-1)}), order);
    if (padded > N) s = at::constant_pad_nd(s, {0, 0, 0, padded - N});
    return s.reshape({B, H, R, chunks, chunk, x.size(-1)});
  };
  const at::Tensor qs = sorted(q), ks = with_previous_chunk(sorted(k)), vs = with_previous_chunk(sorted(v));
  const at::Tensor valid = with_previous_chunk(
      (at::arange(padded, q.options().dtype(at::kLong)) < N).reshape({1, 1, 1, chunks, chunk}));
  at::Tensor excluded = valid.logical_not().unsqueeze(-2);  // [.., 1 or c, keys]
  if (exclude_self) {
    // Which token sits at each sorted position (-1: padding), for queries and their keys.
    const at::Tensor token = at::constant_pad_nd(order, {0, padded - N}, -1).reshape({B, H, R, chunks, chunk});
    const at::Tensor self = token.unsqueeze(-1) == with_previous_chunk(token).unsqueeze(-2);  // [.., c, keys]
    // A query skips its own key unless it has no other one (Kitaev et al. 2020, section 2).
    const at::Tensor others = (self.logical_not() & excluded.logical_not()).any(-1, true);
    excluded = excluded | (self & others);
  }
  const at::Tensor scores =
      (at::matmul(qs, ks.transpose(-2, -1)) * scale).masked_fill(excluded, -std::numeric_limits<double>::infinity());
  const at::Tensor lse = at::logsumexp(scores, {-1}, true);                         // [B, H, R, C, c, 1]
  const at::Tensor out = at::matmul(at::exp(scores - lse), vs);                    // [B, H, R, C, c, d]
  // Back to token order, dropping the padding.
  const at::Tensor out_tokens = gather_tokens(out.reshape({B, H, R, padded, dv}).narrow(3, 0, N), inverse);
  const at::Tensor lse_tokens = gather_tokens(lse.reshape({B, H, R, padded, 1}).narrow(3, 0, N), inverse);
  const at::Tensor weights = at::softmax(lse_tokens, 2);                           // over the rounds
  return (out_tokens * weights).sum(2);
}

ReformerAttention::ReformerAttention(const LayerOptions& options, patterns::MaskKwargs kwargs)
    : QkvAttention(options), kwargs_(std::move(kwargs)) {
  params_ = config::reformer_params(kwargs_, geometry_);
  const at::Tensor rotations =
      seeded_gaussian(params_.seed, layer_, 0,
                      {geometry_.num_heads, params_.hashes, geometry_.head_dim, params_.buckets / 2});
  rotations_ = register_buffer("rotations", rotations.to(at::kFloat));
  proj_drop_ = register_module("proj_drop", torch::nn::Dropout(options.proj_drop));
}

int64_t ReformerAttention::chunk(int64_t num_tokens) const {
  return config::reformer_params(kwargs_, with_tokens(num_tokens))
      .chunk;
}

double ReformerAttention::computed_pairs_per_head(int64_t num_tokens) const {
  return *config::backend_pairs_per_head("reformer", kwargs_, with_tokens(num_tokens));
}

at::Tensor ReformerAttention::forward(const at::Tensor& x) { return proj_drop_->forward(project_out(head_outputs(x))); }

std::array<at::Tensor, 3> ReformerAttention::queries_keys_values(const at::Tensor& x) {
  auto [q, k, v] = project_qkv(x);
  if (params_.shared_qk) k = shared_qk_keys(q);
  return {q, k, v};
}

at::Tensor ReformerAttention::head_outputs(const at::Tensor& x) {
  const auto [q, k, v] = queries_keys_values(x);
  return reformer_attention(q, k, v, rotations_, chunk(x.size(1)), scale_, params_.shared_qk);
}

// The output is linear in v, so v = I gives each query's effective weights over all keys: the
// rounds' softmaxes combined (a key found by two rounds gets both shares), zero elsewhere.
at::Tensor ReformerAttention::attention_probs(const at::Tensor& x) {
  const auto [q, k, v] = queries_keys_values(x);
  const int64_t B = x.size(0), N = x.size(1);
  const at::Tensor eye = at::eye(N, v.options()).expand({B, geometry_.num_heads, N, N});
  return reformer_attention(q, k, eye, rotations_, chunk(N), scale_, params_.shared_qk);
}

}  // namespace sparsevit::attention
