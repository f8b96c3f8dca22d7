// Crossway Diffusion's 2-D building blocks (LostXine/crossway_diffusion,
// model/diffusion/conv2d_components.py and ResidualBlock2D in conditional_unet1d.py), with its
// parameter names: Conv2dBlock (`block.0` conv, `block.1` GroupNorm, Mish), Upsample2d (`conv`,
// a stride-2 transposed conv: H x W -> 2H x 2W) and ResidualBlock2D (`blocks.0`, `blocks.1`,
// `residual_conv` when the channel count changes).
//
// Two computations differ from the original's layer calls, with the same result and parameters
// (both for speed on CPU, docs/results/crossway_speed/):
// - Upsample2d runs its transposed conv as one 3 x 3 conv to the four output phases followed by
//   a pixel shuffle; LibTorch's CPU transposed conv (and its backward) is 10-30x slower.
// - forward_with_shared(x, shared) takes apart the input channels that are the same for every
//   sample (the decoder's positional grid, [1, C_s, H, W]): conv(cat(x, shared)) = conv(x; W_x)
//   + conv(shared; W_s), the second computed once instead of once per sample.
#pragma once

#include <ATen/ATen.h>
#include <torch/nn/cloneable.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/pimpl.h>

namespace sparsevit::policy {

// Conv2d (same padding) -> GroupNorm -> Mish; x [B, C_in, H, W] -> [B, C_out, H, W].
class Conv2dBlockImpl : public torch::nn::Cloneable<Conv2dBlockImpl> {
 public:
  Conv2dBlockImpl(int64_t in_channels, int64_t out_channels, int64_t kernel_size, int64_t n_groups = 8);
  void reset() override;
  at::Tensor forward(const at::Tensor& x);
  // forward(cat(x, shared.expand(B))) for shared [1, C_s, H, W], C_in = x's channels + C_s.
  at::Tensor forward_with_shared(const at::Tensor& x, const at::Tensor& shared);

 private:
  int64_t in_channels_, out_channels_, kernel_size_, n_groups_;
  torch::nn::Sequential block_{nullptr};
};
TORCH_MODULE(Conv2dBlock);

// x [B, C, H, W] -> [B, C, 2H, 2W] (transposed conv, kernel 4, stride 2, padding 1; `conv`
// holds its parameters, computed as a 3 x 3 conv + pixel shuffle).
class Upsample2dImpl : public torch::nn::Cloneable<Upsample2dImpl> {
 public:
  explicit Upsample2dImpl(int64_t dim);
  void reset() override;
  at::Tensor forward(const at::Tensor& x);

 private:
  int64_t dim_;
  torch::nn::ConvTranspose2d conv_{nullptr};
};
TORCH_MODULE(Upsample2d);

// Two Conv2dBlocks plus a residual path (1x1 conv when the channel count changes).
class ResidualBlock2DImpl : public torch::nn::Cloneable<ResidualBlock2DImpl> {
 public:
  ResidualBlock2DImpl(int64_t in_channels, int64_t out_channels, int64_t kernel_size = 3, int64_t n_groups = 8);
  void reset() override;
  at::Tensor forward(const at::Tensor& x);
  // forward(cat(x, shared.expand(B))) for shared [1, C_s, H, W], C_in = x's channels + C_s.
  at::Tensor forward_with_shared(const at::Tensor& x, const at::Tensor& shared);

 private:
  int64_t in_channels_, out_channels_, kernel_size_, n_groups_;
  torch::nn::Sequential blocks_{nullptr};
  torch::nn::Conv2d residual_conv_{nullptr};  // null: identity
};
TORCH_MODULE(ResidualBlock2D);

}  // namespace sparsevit::policy
