// Crossway Diffusion's image state decoder (Li et al., ICRA 2024; LostXine/crossway_diffusion,
// model/diffusion/conditional_unet1d.py, ConditionalUnet1DwDecType{C,D}): reconstructs each
// observation image from a per-observation-step feature vector, as an auxiliary loss that makes
// the denoiser's representation carry the observed state.
//
// Per observation step the feature is projected to decode_dims.back() channels (`proj`), laid
// out as a decode_resolution x decode_resolution grid, tiled to H / 2^U x W / 2^U
// (U = decode_dims.size() - 1 upsamplings), then each of U levels concatenates a fixed
// sin/cos positional grid (decode_pe_dim channels) and runs ResidualBlock2D x 2 + Upsample2d
// (`blocks.i`); `final_conv` is Conv2dBlock (8 groups, as the original) + a 1x1 conv to the
// image channels. The positional grid is the same for every sample, so its part of the first
// convs is computed once per call, not concatenated per sample, and the first level's convs
// of the tiled grid run on a short tiling (ResidualBlock2D::forward_with_shared).
//
// Two inputs, both the original's:
//   kUnetMid      (type C, what the paper describes): the U-Net's features after its mid
//                 modules [B, mid_dim, T'], split 'b (t c) h -> (b t) c h' into the n_obs_steps
//                 observation steps, T' = decode_resolution^2 positions as the grid's pixels;
//                 proj = Linear(mid_dim / n_obs_steps, D) + Mish per pixel.
//   kObsFeatures  (type D, what the released configs select, `decode_ver: d`): the observation
//                 features (the U-Net's global_cond) [B, n_obs_steps * F];
//                 proj = Linear(F, D) + ReLU, one vector repeated over the grid.
// Parameter names vs a Crossway checkpoint: `decs.image.*` -> `blocks.*`,
// `decs.image_final.*` -> `final_conv.*`, `proj.image.*` (C) or `mid_proj.*` (D) -> `proj.*`.
#pragma once

#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/container/sequential.h>

#include <vector>

namespace sparsevit::policy {

enum class CrosswayInput { kUnetMid, kObsFeatures };

struct CrosswayDecoderOptions {
  CrosswayInput input = CrosswayInput::kUnetMid;
  // kUnetMid: the U-Net's mid_dim; kObsFeatures: global_cond_dim (n_obs_steps * F).
  int64_t feature_dim = 2048;
  int64_t n_obs_steps = 2;
  std::vector<int64_t> decode_dims = {128, 256};  // config/pusht/typed.yaml
  int64_t decode_pe_dim = 64;                     // a multiple of 4
  int64_t decode_resolution = 2;
  int64_t image_channels = 3, image_height = 96, image_width = 96;
  int64_t kernel_size = 5, n_groups = 8;
  double loss_weight = 0.1;  // `dec_loss_weight` of the released configs
};

// decode_dims scaled to the U-Net by the rule the original's constructor asserts of the mid
// features (ConditionalUnet1DwDecTypeA: down_dims[-1] // n_obs_steps // decode_resolution**2
// == decode_dims[-1], i.e. the projection keeps each grid pixel's share of the mid channels):
// the last entry is mid_dim / (n_obs_steps * decode_resolution^2), the others keep their ratio
// to it in `paper`. With paper = {128, 256} (config/pusht/typed.yaml): Crossway's down_dims
// 512,1024,2048 give {128, 256} itself, Diffusion Policy's 256,512,1024 {64, 128}, policy-demo's
// 64,128,256 {16, 32}. UsageError when a division is not exact.
std::vector<int64_t> crossway_decode_dims_for_unet(int64_t mid_dim, int64_t n_obs_steps, int64_t decode_resolution,
                                                   const std::vector<int64_t>& paper = {128, 256});

// The decoder's fixed positional grid: for i < dim / 4, sin and cos of 2^i * pi * y and
// 2^i * pi * x over linspace(-1, 1) rows / columns -> [batch, dim, height, width] (the
// original's generate_positional_embedding: all sines [y_0, x_0, y_1, x_1, ...], then cosines).
at::Tensor crossway_positional_grid(int64_t batch, int64_t dim, int64_t height, int64_t width,
                                    const at::TensorOptions& options);

class CrosswayDecoder : public torch::nn::Module {
 public:
  explicit CrosswayDecoder(CrosswayDecoderOptions options);

  // kUnetMid: features [B, feature_dim, decode_resolution^2]; kObsFeatures: [B, feature_dim].
  // -> reconstructions [B * n_obs_steps, image_channels, H', W'], batch-major
  // (b0 step0, b0 step1, ...), H' = image_height rounded down to a multiple of 2^U.
  at::Tensor forward(const at::Tensor& features);
  // forward's stages, public for timing (bench/policy_step_bench.cpp):
  // features -> the projected grid [B * n_obs_steps, D, r, r] (cropped to h0 x w0 if larger),
  // and that grid tiled to the first level [B * n_obs_steps, D, h0, w0];
  at::Tensor grid_tile(const at::Tensor& features);
  at::Tensor grid_features(const at::Tensor& features);
  // level i (0 first): positional grid + ResidualBlock2D x 2 + Upsample2d, level i's input
  // [N, C, h0 2^i, w0 2^i] (or, at level 0, grid_tile's tile of it) -> [N, C', h0 2^(i+1), w0 2^(i+1)];
  at::Tensor level_forward(std::size_t i, const at::Tensor& x);
  std::size_t num_levels() const { return levels_.size(); }
  // final_conv: [N, decode_dims[0], H', W'] -> [N, image_channels, H', W'].
  at::Tensor final_forward(const at::Tensor& x);
  // loss_weight * mean squared error against target images of the reconstruction's shape
  // (the observation images as the encoder sees them, [B * n_obs_steps, C, H', W']).
  at::Tensor loss(const at::Tensor& reconstruction, const at::Tensor& target) const;

  const CrosswayDecoderOptions& options() const { return options_; }

 private:
  CrosswayDecoderOptions options_;
  int64_t height0_, width0_;  // the grid before the first upsampling
  torch::nn::Sequential proj_{nullptr};
  torch::nn::ModuleList blocks_{nullptr};
  std::vector<torch::nn::Sequential> levels_;
  torch::nn::Sequential final_conv_{nullptr};
};

}  // namespace sparsevit::policy
