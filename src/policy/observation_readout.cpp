#include "policy/observation_readout.h"

#include <ATen/ATen.h>

#include <cmath>

#include "util/errors.h"

namespace sparsevit::policy {
namespace {

struct ReadoutName {
  ObservationReadout readout;
  const char* name;
};
constexpr ReadoutName kReadouts[] = {{ObservationReadout::kClassToken, "cls"},
                                     {ObservationReadout::kSpatialSoftmax, "spatial_softmax"},
                                     {ObservationReadout::kAttentionPool, "attention_pool"},
                                     {ObservationReadout::kFlatten, "flatten"}};

}  // namespace

std::vector<std::string> observation_readout_names() {
  std::vector<std::string> names;
  for (const auto& r : kReadouts) names.emplace_back(r.name);
  return names;
}

ObservationReadout parse_observation_readout(const std::string& name) {
  for (const auto& r : kReadouts)
    if (name == r.name) return r.readout;
  throw UsageError("--obs_readout must be cls, spatial_softmax, attention_pool or flatten, got '" + name + "'");
}

std::string observation_readout_name(ObservationReadout readout) {
  for (const auto& r : kReadouts)
    if (readout == r.readout) return r.name;
  return "cls";
}

SpatialSoftmax::SpatialSoftmax(int64_t channels, int64_t height, int64_t width, int64_t num_kp, double temperature)
    : height_(height), width_(width), num_kp_(num_kp) {
  if (channels < 1 || height < 1 || width < 1 || num_kp < 1) throw UsageError("spatial softmax: empty shape");
  nets_ = register_module("nets", torch::nn::Conv2d(torch::nn::Conv2dOptions(channels, num_kp, 1)));
  temperature_ = register_buffer("temperature", at::full({1}, temperature, at::kFloat));
  // np.meshgrid(linspace(-1, 1, W), linspace(-1, 1, H)) flattened row-major, as robomimic.
  const at::Tensor xs = at::linspace(-1.0, 1.0, width, at::kFloat), ys = at::linspace(-1.0, 1.0, height, at::kFloat);
  pos_x_ = register_buffer("pos_x", xs.unsqueeze(0).expand({height, width}).reshape({1, height * width}).clone());
  pos_y_ = register_buffer("pos_y", ys.unsqueeze(1).expand({height, width}).reshape({1, height * width}).clone());
}

at::Tensor SpatialSoftmax::forward(const at::Tensor& feature_map) {
  const at::Tensor logits = nets_->forward(feature_map).reshape({-1, height_ * width_});
  const at::Tensor attention = at::softmax(logits / temperature_, -1);
  const at::Tensor expected_x = (pos_x_ * attention).sum(1, /*keepdim=*/true);
  const at::Tensor expected_y = (pos_y_ * attention).sum(1, /*keepdim=*/true);
  return at::cat({expected_x, expected_y}, 1).view({-1, num_kp_, 2});
}

AttentionPoolLatent::AttentionPoolLatent(int64_t embed_dim, int64_t num_heads, int64_t latent_len, double mlp_ratio)
    : embed_dim_(embed_dim), num_heads_(num_heads), latent_len_(latent_len) {
  if (num_heads < 1 || embed_dim % num_heads != 0 || latent_len < 1)
    throw UsageError("attention pool: embed_dim must be a multiple of num_heads, and at least one query");
  // timm: trunc_normal_(latent, std = dim^-0.5).
  latent_ = register_parameter("latent", at::randn({1, latent_len, embed_dim}).mul_(1.0 / std::sqrt(embed_dim))
                                              .clamp_(-2.0, 2.0));
  q_ = register_module("q", torch::nn::Linear(embed_dim, embed_dim));
  kv_ = register_module("kv", torch::nn::Linear(embed_dim, 2 * embed_dim));
  proj_ = register_module("proj", torch::nn::Linear(embed_dim, embed_dim));
  norm_ = register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({embed_dim}).eps(1e-6)));
  const auto hidden = static_cast<int64_t>(embed_dim * mlp_ratio);
  auto mlp = register_module("mlp", std::make_shared<torch::nn::Module>());
  fc1_ = mlp->register_module("fc1", torch::nn::Linear(embed_dim, hidden));
  fc2_ = mlp->register_module("fc2", torch::nn::Linear(hidden, embed_dim));
}

at::Tensor AttentionPoolLatent::forward(const at::Tensor& x) {
  const int64_t b = x.size(0), n = x.size(1), h = num_heads_, d = embed_dim_ / num_heads_;
  const at::Tensor q = q_->forward(latent_.expand({b, -1, -1})).reshape({b, latent_len_, h, d}).transpose(1, 2);
  const at::Tensor kv = kv_->forward(x).reshape({b, n, 2, h, d}).permute({2, 0, 3, 1, 4});
  const at::Tensor attn = at::softmax(at::matmul(q, kv[0].transpose(-2, -1)) / std::sqrt(static_cast<double>(d)), -1);
  at::Tensor out = at::matmul(attn, kv[1]).transpose(1, 2).reshape({b, latent_len_, embed_dim_});
  out = proj_->forward(out);
  out = out + fc2_->forward(at::gelu(fc1_->forward(norm_->forward(out))));
  return out.reshape({b, latent_len_ * embed_dim_});
}

PatchReadout::PatchReadout(const ObservationReadoutOptions& options, int64_t embed_dim, int64_t grid_h, int64_t grid_w,
                           int64_t num_heads)
    : options_(options), embed_dim_(embed_dim), grid_h_(grid_h), grid_w_(grid_w) {
  switch (options_.kind) {
    case ObservationReadout::kSpatialSoftmax:
      spatial_softmax_ =
          register_module("pool", std::make_shared<SpatialSoftmax>(embed_dim, grid_h, grid_w, options_.num_kp));
      linear_ = register_module("linear", torch::nn::Linear(2 * options_.num_kp, options_.feature_dim));
      feature_dim_ = options_.feature_dim;
      break;
    case ObservationReadout::kAttentionPool:
      attention_pool_ =
          register_module("pool", std::make_shared<AttentionPoolLatent>(embed_dim, num_heads, options_.num_queries));
      feature_dim_ = options_.num_queries * embed_dim;
      break;
    case ObservationReadout::kFlatten:
      linear_ = register_module("linear", torch::nn::Linear(grid_h * grid_w * embed_dim, options_.feature_dim));
      feature_dim_ = options_.feature_dim;
      break;
    case ObservationReadout::kClassToken:
      throw UsageError("the class-token readout has no patch readout module");
  }
}

at::Tensor PatchReadout::forward(const at::Tensor& tokens) {
  const int64_t b = tokens.size(0);
  if (tokens.dim() != 3 || tokens.size(1) != grid_h_ * grid_w_ || tokens.size(2) != embed_dim_)
    throw UsageError("patch readout: tokens must be [B, " + std::to_string(grid_h_ * grid_w_) + ", " +
                     std::to_string(embed_dim_) + "], got " + c10::str(tokens.sizes()));
  switch (options_.kind) {
    case ObservationReadout::kSpatialSoftmax: {
      const at::Tensor grid = tokens.transpose(1, 2).reshape({b, embed_dim_, grid_h_, grid_w_});
      return linear_->forward(spatial_softmax_->forward(grid).reshape({b, -1}));
    }
    case ObservationReadout::kAttentionPool:
      return attention_pool_->forward(tokens);
    case ObservationReadout::kFlatten:
      return linear_->forward(tokens.reshape({b, -1}));
    case ObservationReadout::kClassToken:
      break;
  }
  return tokens.mean(1);  // unreachable: the constructor refuses the class token
}

}  // namespace sparsevit::policy
