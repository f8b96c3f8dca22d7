// How the policy reads a feature vector out of its ViT encoder (docs/policy.md, "Readouts").
// The class token alone (`cls`) loses where things are: on PushT it became the same for every
// frame and the policy went blind to its image (issue #32). The other readouts keep space, from
// the patch-token grid [B, H * W, C]:
//   spatial_softmax  Diffusion Policy's image encoder head (robomimic's SpatialSoftmax, then
//                    VisualCore's linear): per keypoint channel of a 1x1 projection, the
//                    softmax-weighted expected (x, y) over the grid, then Linear(2K, 64);
//   attention_pool   learned queries attending over the patch tokens (timm's
//                    AttentionPoolLatent), the queries' outputs concatenated;
//   flatten          a linear projection of the flattened tokens.
#pragma once

#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace sparsevit::policy {

enum class ObservationReadout { kClassToken, kSpatialSoftmax, kAttentionPool, kFlatten };

// "cls" | "spatial_softmax" | "attention_pool" | "flatten"; UsageError naming the choices otherwise.
ObservationReadout parse_observation_readout(const std::string& name);
std::string observation_readout_name(ObservationReadout readout);
std::vector<std::string> observation_readout_names();

struct ObservationReadoutOptions {
  ObservationReadout kind = ObservationReadout::kClassToken;
  int64_t num_kp = 32;        // spatial softmax keypoints (robomimic / Diffusion Policy: 32)
  int64_t feature_dim = 64;   // spatial_softmax / flatten output (DP's VisualCore feature_dimension)
  int64_t num_queries = 4;    // attention_pool's learned queries
};

// robomimic's SpatialSoftmax (models/base_nets.py) with its names: `nets` (the 1x1 conv to
// num_kp channels), buffers `temperature` (1, not learned: DP's setting), `pos_x`, `pos_y` (the
// grid's coordinates in [-1, 1], x along the width). [B, C, H, W] -> [B, num_kp, 2].
class SpatialSoftmax : public torch::nn::Module {
 public:
  SpatialSoftmax(int64_t channels, int64_t height, int64_t width, int64_t num_kp, double temperature = 1.0);
  at::Tensor forward(const at::Tensor& feature_map);

 private:
  int64_t height_, width_, num_kp_;
  torch::nn::Conv2d nets_{nullptr};
  at::Tensor temperature_, pos_x_, pos_y_;
};

// timm's AttentionPoolLatent with `latent_len` queries and no pooling over them: `latent`
// [1, L, C], `q`, `kv`, `proj`, then x + mlp(norm(x)) (`norm`, `mlp.fc1`, `mlp.fc2`, GELU).
// [B, N, C] -> [B, L * C].
class AttentionPoolLatent : public torch::nn::Module {
 public:
  AttentionPoolLatent(int64_t embed_dim, int64_t num_heads, int64_t latent_len, double mlp_ratio = 4.0);
  at::Tensor forward(const at::Tensor& tokens);

 private:
  int64_t embed_dim_, num_heads_, latent_len_;
  at::Tensor latent_;
  torch::nn::Linear q_{nullptr}, kv_{nullptr}, proj_{nullptr}, fc1_{nullptr}, fc2_{nullptr};
  torch::nn::LayerNorm norm_{nullptr};
};

// A spatial readout over the encoder's patch grid (grid_h x grid_w tokens of width embed_dim).
// Children: spatial_softmax: `pool` (SpatialSoftmax), `linear`; attention_pool: `pool`;
// flatten: `linear`. The class token needs no module (the policy reads it from the encoder).
class PatchReadout : public torch::nn::Module {
 public:
  PatchReadout(const ObservationReadoutOptions& options, int64_t embed_dim, int64_t grid_h, int64_t grid_w,
               int64_t num_heads);
  // patch tokens [B, grid_h * grid_w, C] (row-major grid) -> [B, feature_dim()].
  at::Tensor forward(const at::Tensor& patch_tokens);
  int64_t feature_dim() const { return feature_dim_; }

 private:
  ObservationReadoutOptions options_;
  int64_t embed_dim_, grid_h_, grid_w_, feature_dim_;
  std::shared_ptr<SpatialSoftmax> spatial_softmax_;
  std::shared_ptr<AttentionPoolLatent> attention_pool_;
  torch::nn::Linear linear_{nullptr};
};

}  // namespace sparsevit::policy
