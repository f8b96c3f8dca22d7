#include "attention/performer_attention.h"

#include <ATen/ATen.h>

#include <cmath>

#include "attention/seeded_gaussian.h"

namespace sparsevit::attention {

// Keeps every feature, hence every denominator, positive. The reference implementation adds
// 1e-4, but the key stabiliser is a maximum over all keys and features, which grows with m,
// so 1e-4 becomes a visible bias for large m (relative error 0.13 instead of 0.09 at m = 4096,
// d = 8, in the statistical test); 1e-6 does not.
const double kFavorEpsilon = 1e-6;

at::Tensor orthogonal_random_features(uint64_t seed, uint64_t layer, uint64_t draw, int64_t m, int64_t d) {
  const int64_t blocks = (m + d - 1) / d;
  const at::Tensor gaussian = seeded_gaussian(seed, layer, draw, {blocks * d * d + m * d});
  std::vector<at::Tensor> rows;
  for (int64_t b = 0; b < blocks; ++b) {
    const at::Tensor block = gaussian.narrow(0, b * d * d, d * d).reshape({d, d});
    // Q * sign(diag R) is Haar-distributed; LAPACK's Householder signs alone are not (the first
    // row would always have a negative first coordinate), which biases the estimate.
    const auto [q, r] = at::linalg_qr(block);
    rows.push_back((q * r.diagonal().sign()).transpose(0, 1));  // d orthonormal rows
  }
  const at::Tensor orthogonal = at::cat(rows, 0).narrow(0, 0, m);
  const at::Tensor norms = gaussian.narrow(0, blocks * d * d, m * d).reshape({m, d}).norm(2, {1}, true);
  return orthogonal * norms;
}

at::Tensor favor_features(const at::Tensor& x, const at::Tensor& features, bool is_query) {
  const double normalizer = std::pow(static_cast<double>(x.size(-1)), -0.25);
  const double ratio = 1.0 / std::sqrt(static_cast<double>(features.size(0)));
  const at::Tensor projected = at::matmul(x * normalizer, features.transpose(0, 1));          // [..., N, m]
  const at::Tensor half_norm = (x * x).sum(-1, true) * (0.5 * normalizer * normalizer);      // [..., N, 1]
  // The maximum only rescales numerator and denominator alike: keep it out of the gradient.
  const at::Tensor stabilizer = is_query ? std::get<0>(projected.detach().max(-1, true))
                                         : projected.detach().amax({-2, -1}, true);
  return ratio * (at::exp(projected - half_norm - stabilizer) + kFavorEpsilon);
}

at::Tensor favor_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& features) {
  const at::Tensor phi_q = favor_features(q, features, true), phi_k = favor_features(k, features, false);
  const at::Tensor context = at::matmul(phi_k.transpose(-2, -1), v);                   // [B, H, m, d]
  const at::Tensor denominator = at::matmul(phi_q, phi_k.sum(-2).unsqueeze(-1));       // [B, H, N, 1]
  return at::matmul(phi_q, context) / denominator;
}

PerformerAttention::PerformerAttention(const LayerOptions& options, patterns::MaskKwargs kwargs)
    : QkvAttention(options), kwargs_(std::move(kwargs)), params_(config::performer_params(kwargs_)) {
  const at::Tensor features =
      orthogonal_random_features(params_.seed, layer_, 0, params_.num_features, geometry_.head_dim);
  features_ = register_buffer("features", features.to(at::kFloat));
  draws_ = register_buffer("feature_draw", at::zeros({}, at::kLong));
  steps_ = register_buffer("steps_since_draw", at::zeros({}, at::kLong));
  proj_drop_ = register_module("proj_drop", torch::nn::Dropout(options.proj_drop));
}

int64_t PerformerAttention::draws() const { return draws_.item<int64_t>() + 1; }

void PerformerAttention::redraw() {
  const int64_t draw = draws_.item<int64_t>() + 1;
  const at::Tensor fresh = orthogonal_random_features(params_.seed, layer_, static_cast<uint64_t>(draw),
                                                      params_.num_features, geometry_.head_dim);
  features_.copy_(fresh);
  draws_.fill_(draw);
  steps_.zero_();
}

double PerformerAttention::computed_pairs_per_head(int64_t num_tokens) const {
  return *config::backend_pairs_per_head("performer", kwargs_, with_tokens(num_tokens));
}

at::Tensor PerformerAttention::forward(const at::Tensor& x) {
  if (is_training() && params_.redraw_interval > 0) {
    at::NoGradGuard no_grad;
    if (steps_.item<int64_t>() >= params_.redraw_interval) redraw();
    steps_.add_(1);
  }
  return proj_drop_->forward(project_out(head_outputs(x)));
}

// Analysis reads the current features; only training forwards advance the redraw counter.
at::Tensor PerformerAttention::head_outputs(const at::Tensor& x) {
  const auto [q, k, v] = project_qkv(x);
  return favor_attention(q, k, v, features_.to(q.scalar_type()));
}

}  // namespace sparsevit::attention
