// Crossway Diffusion's 2-D building blocks (LostXine/crossway_diffusion,
// model/diffusion/conv2d_components.py and ResidualBlock2D in conditional_unet1d.py), with its
// parameter names: Conv2dBlock (`block.0` conv, `block.1` GroupNorm, Mish), Upsample2d (`conv`,
// a stride-2 transposed conv: H x W -> 2H x 2W) and ResidualBlock2D (`blocks.0`, `blocks.1`,
// `residual_conv` when the channel count changes).
//
// Three computations differ from the original's layer calls, with the same function and
// parameters (for speed on CPU, docs/results/crossway_speed/):
// - Upsample2d runs its transposed conv as four 2 x 2 convs, one per output phase; LibTorch's
//   CPU transposed conv (slow_conv_transpose2d) and its backward take 1.8-2.5x as long on one
//   thread and far longer on a loaded machine.
// - Conv2dBlock's Mish is mish_via_exp (LibTorch 1.13's CPU mish runs at ~10 ns per element).
// - forward_with_shared(x, shared) takes apart the input channels that are the same for every
//   sample (the decoder's positional grid, [1, C_s, H, W]): conv(cat(x, shared)) = conv(x; W_x)
//   + conv(shared; W_s), the second computed once instead of once per sample. x may be a tile
//   that repeats over H x W (the decoder's first level): its conv is computed on a tiling just
//   long enough to hold every distinct output row and column (2 pad + period), then gathered.
#pragma once

#include <ATen/ATen.h>
#include <torch/nn/cloneable.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/pimpl.h>

namespace sparsevit::policy {

// Mish, x tanh(softplus(x)), as x n / (n + 2) with n = e^x (e^x + 2), and its derivative
// t + x sigmoid(x) (1 - t^2), t = n / (n + 2): within float rounding of at::mish (tested).
at::Tensor mish_via_exp(const at::Tensor& x);

// tile [N, C, t_h, t_w] repeated over height x width, from its top-left corner (pixel (i, j) is
// tile[i mod t_h][j mod t_w]; the original's `repeat` then crop). The tile itself when its size.
at::Tensor tile_2d(const at::Tensor& tile, int64_t height, int64_t width);

// conv(cat(tile_2d(x, H, W), shared.expand(N)), the conv's weight and bias) for shared
// [1, C_s, H, W]: per-sample channels x [N, C_x, t_h <= H, t_w <= W] and channels the same for
// every sample, C_x + C_s = the conv's input channels. The shared part is computed once; a tiled
// x (t_h < H) through a short tiling when the conv is stride-1 same-padded.
at::Tensor conv2d_with_shared(const torch::nn::Conv2dImpl& conv, const at::Tensor& x, const at::Tensor& shared);

// Conv2d (same padding) -> GroupNorm -> Mish; x [B, C_in, H, W] -> [B, C_out, H, W]. `block.2`
// is the Mish module (no parameters) that forward computes with mish_via_exp.
class Conv2dBlockImpl : public torch::nn::Cloneable<Conv2dBlockImpl> {
 public:
  Conv2dBlockImpl(int64_t in_channels, int64_t out_channels, int64_t kernel_size, int64_t n_groups = 8);
  void reset() override;
  at::Tensor forward(const at::Tensor& x);
  // forward(cat(tile_2d(x, H, W), shared.expand(N))), as conv2d_with_shared; -> [N, C_out, H, W].
  at::Tensor forward_with_shared(const at::Tensor& x, const at::Tensor& shared);

 private:
  int64_t in_channels_, out_channels_, kernel_size_, n_groups_;
  torch::nn::Sequential block_{nullptr};
};
TORCH_MODULE(Conv2dBlock);

// x [B, C, H, W] -> [B, C, 2H, 2W] (transposed conv, kernel 4, stride 2, padding 1; `conv`
// holds its parameters, computed as four 2 x 2 convs).
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
  // forward(cat(tile_2d(x, H, W), shared.expand(N))), as conv2d_with_shared; -> [N, C_out, H, W].
  at::Tensor forward_with_shared(const at::Tensor& x, const at::Tensor& shared);

 private:
  int64_t in_channels_, out_channels_, kernel_size_, n_groups_;
  torch::nn::Sequential blocks_{nullptr};
  torch::nn::Conv2d residual_conv_{nullptr};  // null: identity
};
TORCH_MODULE(ResidualBlock2D);

}  // namespace sparsevit::policy
