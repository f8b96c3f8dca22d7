#include "policy/conv2d_components.h"

#include "policy/conv1d_components.h"

#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/normalization.h>


namespace sparsevit::policy {

Conv2dBlockImpl::Conv2dBlockImpl(int64_t in_channels, int64_t out_channels, int64_t kernel_size, int64_t n_groups)
    : in_channels_(in_channels), out_channels_(out_channels), kernel_size_(kernel_size), n_groups_(n_groups) {
  check_conv_block_options(out_channels, kernel_size, n_groups);
  reset();
}

void Conv2dBlockImpl::reset() {
  block_ = register_module(
      "block", torch::nn::Sequential(
                   torch::nn::Conv2d(torch::nn::Conv2dOptions(in_channels_, out_channels_, kernel_size_)
                                         .padding(kernel_size_ / 2)),
                   torch::nn::GroupNorm(torch::nn::GroupNormOptions(n_groups_, out_channels_)), torch::nn::Mish()));
}

at::Tensor Conv2dBlockImpl::forward(const at::Tensor& x) { return block_->forward(x); }

Upsample2dImpl::Upsample2dImpl(int64_t dim) : dim_(dim) { reset(); }

void Upsample2dImpl::reset() {
  conv_ = register_module(
      "conv", torch::nn::ConvTranspose2d(torch::nn::ConvTranspose2dOptions(dim_, dim_, 4).stride(2).padding(1)));
}

at::Tensor Upsample2dImpl::forward(const at::Tensor& x) { return conv_->forward(x); }

ResidualBlock2DImpl::ResidualBlock2DImpl(int64_t in_channels, int64_t out_channels, int64_t kernel_size,
                                         int64_t n_groups)
    : in_channels_(in_channels), out_channels_(out_channels), kernel_size_(kernel_size), n_groups_(n_groups) {
  reset();
}

void ResidualBlock2DImpl::reset() {
  blocks_ = register_module("blocks", torch::nn::Sequential(Conv2dBlock(in_channels_, out_channels_, kernel_size_, n_groups_),
                                                            Conv2dBlock(out_channels_, out_channels_, kernel_size_, n_groups_)));
  if (in_channels_ != out_channels_)
    residual_conv_ = register_module("residual_conv",
                                     torch::nn::Conv2d(torch::nn::Conv2dOptions(in_channels_, out_channels_, 1)));
}

at::Tensor ResidualBlock2DImpl::forward(const at::Tensor& x) {
  return blocks_->forward(x) + (residual_conv_ ? residual_conv_->forward(x) : x);
}

}  // namespace sparsevit::policy
