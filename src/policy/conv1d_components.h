// Diffusion Policy's 1-D building blocks (model/diffusion/conv1d_components.py), with its
// parameter names: Conv1dBlock (`block.0` conv, `block.1` GroupNorm, Mish), Downsample1d and
// Upsample1d (`conv`: stride-2 conv / transposed conv, so a horizon T goes to ceil(T/2) / 2T).
#pragma once

#include <ATen/ATen.h>
#include <torch/nn/cloneable.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/pimpl.h>

namespace sparsevit::policy {

// The checks every conv block (1-d and 2-d) makes: an odd kernel (same padding) and channels
// divisible into the GroupNorm groups. UsageError otherwise.
void check_conv_block_options(int64_t out_channels, int64_t kernel_size, int64_t n_groups);

// Conv1d (same padding) -> GroupNorm -> Mish; x [B, C_in, T] -> [B, C_out, T].
class Conv1dBlockImpl : public torch::nn::Cloneable<Conv1dBlockImpl> {
 public:
  Conv1dBlockImpl(int64_t in_channels, int64_t out_channels, int64_t kernel_size, int64_t n_groups = 8);
  void reset() override;
  at::Tensor forward(const at::Tensor& x);

 private:
  int64_t in_channels_, out_channels_, kernel_size_, n_groups_;
  torch::nn::Sequential block_{nullptr};
};
TORCH_MODULE(Conv1dBlock);

// x [B, C, T] -> [B, C, (T + 1) / 2] (kernel 3, stride 2, padding 1).
class Downsample1dImpl : public torch::nn::Cloneable<Downsample1dImpl> {
 public:
  explicit Downsample1dImpl(int64_t dim);
  void reset() override;
  at::Tensor forward(const at::Tensor& x);

 private:
  int64_t dim_;
  torch::nn::Conv1d conv_{nullptr};
};
TORCH_MODULE(Downsample1d);

// x [B, C, T] -> [B, C, 2T] (transposed conv, kernel 4, stride 2, padding 1).
class Upsample1dImpl : public torch::nn::Cloneable<Upsample1dImpl> {
 public:
  explicit Upsample1dImpl(int64_t dim);
  void reset() override;
  at::Tensor forward(const at::Tensor& x);

 private:
  int64_t dim_;
  torch::nn::ConvTranspose1d conv_{nullptr};
};
TORCH_MODULE(Upsample1d);

}  // namespace sparsevit::policy
