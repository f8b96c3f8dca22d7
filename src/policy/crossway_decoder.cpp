#include "policy/crossway_decoder.h"

#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "policy/conv2d_components.h"
#include "util/errors.h"

namespace sparsevit::policy {
namespace {

}  // namespace

std::vector<int64_t> crossway_decode_dims_for_unet(int64_t mid_dim, int64_t n_obs_steps, int64_t decode_resolution,
                                                   const std::vector<int64_t>& paper) {
  if (mid_dim < 1 || n_obs_steps < 1 || decode_resolution < 1 || paper.empty())
    throw UsageError("Crossway decode_dims: mid_dim, n_obs_steps, decode_resolution and the paper's dims must be positive");
  const int64_t per_pixel = n_obs_steps * decode_resolution * decode_resolution;
  if (mid_dim % per_pixel != 0)
    throw UsageError("Crossway decode_dims for the U-Net: mid_dim " + std::to_string(mid_dim) +
                     " is not divisible by n_obs_steps * decode_resolution^2 = " + std::to_string(per_pixel));
  const int64_t top = mid_dim / per_pixel, paper_top = paper.back();
  std::vector<int64_t> dims;
  for (int64_t p : paper) {
    if (p < 1 || (p * top) % paper_top != 0)
      throw UsageError("Crossway decode_dims for the U-Net: " + std::to_string(p) + " * " + std::to_string(top) +
                       " is not divisible by " + std::to_string(paper_top));
    dims.push_back(p * top / paper_top);
  }
  return dims;
}

at::Tensor crossway_positional_grid(int64_t batch, int64_t dim, int64_t height, int64_t width,
                                    const at::TensorOptions& options) {
  if (dim < 4 || dim % 4 != 0) throw UsageError("Crossway positional grid: dim must be a positive multiple of 4");
  // float64 here, cast at the end: the frequencies reach 2^(dim/4 - 1) * pi.
  const auto f64 = options.dtype(at::kDouble);
  const at::Tensor ys = at::linspace(-1, 1, height, f64), xs = at::linspace(-1, 1, width, f64);
  std::vector<at::Tensor> phases;
  for (int64_t i = 0; i < dim / 4; ++i) {
    const double scale = std::ldexp(M_PI, static_cast<int>(i));
    phases.push_back((ys * scale).unsqueeze(1).expand({height, width}));
    phases.push_back((xs * scale).unsqueeze(0).expand({height, width}));
  }
  const at::Tensor phase = at::stack(phases, 0);  // [dim / 2, H, W]
  const at::Tensor grid = at::cat({phase.sin(), phase.cos()}, 0).to(options.dtype());
  return grid.unsqueeze(0).expand({batch, dim, height, width});
}

CrosswayDecoder::CrosswayDecoder(CrosswayDecoderOptions options) : options_(std::move(options)) {
  const auto& o = options_;
  if (o.decode_dims.size() < 2)
    throw UsageError("CrosswayDecoder: decode_dims needs at least two entries (one upsampling level)");
  if (o.n_obs_steps < 1) throw UsageError("CrosswayDecoder: n_obs_steps must be positive");
  if (o.feature_dim % o.n_obs_steps != 0)
    throw UsageError("CrosswayDecoder: feature_dim " + std::to_string(o.feature_dim) +
                     " is not divisible by n_obs_steps " + std::to_string(o.n_obs_steps));
  if (o.decode_resolution < 1) throw UsageError("CrosswayDecoder: decode_resolution must be positive");
  const int64_t upsamplings = static_cast<int64_t>(o.decode_dims.size()) - 1;
  height0_ = o.image_height >> upsamplings;
  width0_ = o.image_width >> upsamplings;
  if (height0_ < 1 || width0_ < 1)
    throw UsageError("CrosswayDecoder: image " + std::to_string(o.image_height) + "x" + std::to_string(o.image_width) +
                     " is too small for " + std::to_string(upsamplings) + " upsamplings");

  const int64_t per_step = o.feature_dim / o.n_obs_steps;
  const int64_t top = o.decode_dims.back();
  if (o.input == CrosswayInput::kUnetMid) {
    proj_ = register_module("proj", torch::nn::Sequential(torch::nn::Linear(per_step, top), torch::nn::Mish()));
  } else {
    proj_ = register_module("proj", torch::nn::Sequential(torch::nn::Linear(per_step, top), torch::nn::ReLU()));
  }

  // reversed(zip(decode_dims[:-1], decode_dims[1:])): every level upsamples (the original's
  // is_last is never true here).
  blocks_ = register_module("blocks", torch::nn::ModuleList());
  for (int64_t i = upsamplings - 1; i >= 0; --i) {
    const int64_t dim_in = o.decode_dims[i], dim_out = o.decode_dims[i + 1];
    torch::nn::Sequential level(ResidualBlock2D(dim_out + o.decode_pe_dim, dim_in, o.kernel_size, o.n_groups),
                                ResidualBlock2D(dim_in, dim_in, o.kernel_size, o.n_groups), Upsample2d(dim_in));
    blocks_->push_back(level);
    levels_.push_back(level);
  }
  const int64_t start = o.decode_dims.front();
  // The original builds this Conv2dBlock without n_groups: always 8 groups.
  final_conv_ = register_module(
      "final_conv", torch::nn::Sequential(Conv2dBlock(start, start, o.kernel_size, /*n_groups=*/8),
                                          torch::nn::Conv2d(torch::nn::Conv2dOptions(start, o.image_channels, 1))));
}

at::Tensor CrosswayDecoder::grid_tile(const at::Tensor& features) {
  const auto& o = options_;
  const int64_t r = o.decode_resolution;
  const int64_t per_step = o.feature_dim / o.n_obs_steps;
  at::Tensor grid;  // [B * n_obs_steps, D, r, r]
  if (o.input == CrosswayInput::kUnetMid) {
    if (features.dim() != 3 || features.size(1) != o.feature_dim || features.size(2) != r * r)
      throw UsageError("CrosswayDecoder: U-Net features must be [B, " + std::to_string(o.feature_dim) + ", " +
                       std::to_string(r * r) + "] (decode_resolution^2 positions), got " + c10::str(features.sizes()));
    // 'b (t c) h -> (b t) h c': the projection acts on each position's channels.
    const at::Tensor steps = features.reshape({-1, per_step, r * r}).transpose(1, 2);
    grid = proj_->forward(steps).transpose(1, 2).reshape({-1, o.decode_dims.back(), r, r});
  } else {
    if (features.dim() != 2 || features.size(1) != o.feature_dim)
      throw UsageError("CrosswayDecoder: observation features must be [B, " + std::to_string(o.feature_dim) +
                       "], got " + c10::str(features.sizes()));
    grid = proj_->forward(features.reshape({-1, per_step})).unsqueeze(-1).unsqueeze(-1).repeat({1, 1, r, r});
  }
  // The original crops the repeated grid: a grid larger than the first level is cropped here.
  return grid.slice(2, 0, std::min(r, height0_)).slice(3, 0, std::min(r, width0_));
}

at::Tensor CrosswayDecoder::grid_features(const at::Tensor& features) {
  // Tiling and the per-pixel projection commute: project the r x r grid, then tile it.
  return tile_2d(grid_tile(features), height0_, width0_);
}

at::Tensor CrosswayDecoder::level_forward(std::size_t i, const at::Tensor& x) {
  torch::nn::Sequential& level = levels_.at(i);
  const int64_t height = height0_ << i, width = width0_ << i;
  // One grid for the batch: the blocks take it as channels shared by every sample (and x, at
  // the first level, as the tile that repeats over the level).
  const at::Tensor pe = crossway_positional_grid(1, options_.decode_pe_dim, height, width, x.options());
  const at::Tensor y = level->at<ResidualBlock2DImpl>(0).forward_with_shared(x, pe);
  return level->at<Upsample2dImpl>(2).forward(level->at<ResidualBlock2DImpl>(1).forward(y));
}

at::Tensor CrosswayDecoder::final_forward(const at::Tensor& x) { return final_conv_->forward(x); }

at::Tensor CrosswayDecoder::forward(const at::Tensor& features) {
  at::Tensor x = grid_tile(features);
  for (std::size_t i = 0; i < levels_.size(); ++i) x = level_forward(i, x);
  return final_forward(x);
}

at::Tensor CrosswayDecoder::loss(const at::Tensor& reconstruction, const at::Tensor& target) const {
  if (reconstruction.sizes() != target.sizes())
    throw UsageError("CrosswayDecoder: target images " + c10::str(target.sizes()) + " differ from the reconstruction " +
                     c10::str(reconstruction.sizes()));
  return options_.loss_weight * (reconstruction - target).pow(2).mean();
}

}  // namespace sparsevit::policy
