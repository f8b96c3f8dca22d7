#include "policy/conv1d_components.h"

#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/normalization.h>

#include <string>

#include "util/errors.h"

namespace sparsevit::policy {

void check_conv_block_options(int64_t out_channels, int64_t kernel_size, int64_t n_groups) {
  if (kernel_size < 1 || kernel_size % 2 == 0)
    throw UsageError("conv kernel size must be odd (same padding), got " + std::to_string(kernel_size));
  if (n_groups < 1 || out_channels % n_groups != 0)
    throw UsageError("GroupNorm: " + std::to_string(out_channels) + " channels are not divisible into " +
                     std::to_string(n_groups) + " groups");
}

Conv1dBlockImpl::Conv1dBlockImpl(int64_t in_channels, int64_t out_channels, int64_t kernel_size, int64_t n_groups)
    : in_channels_(in_channels), out_channels_(out_channels), kernel_size_(kernel_size), n_groups_(n_groups) {
  check_conv_block_options(out_channels, kernel_size, n_groups);
  reset();
}

void Conv1dBlockImpl::reset() {
  block_ = register_module(
      "block", torch::nn::Sequential(
                   torch::nn::Conv1d(torch::nn::Conv1dOptions(in_channels_, out_channels_, kernel_size_)
                                         .padding(kernel_size_ / 2)),
                   torch::nn::GroupNorm(torch::nn::GroupNormOptions(n_groups_, out_channels_)), torch::nn::Mish()));
}

at::Tensor Conv1dBlockImpl::forward(const at::Tensor& x) { return block_->forward(x); }

Downsample1dImpl::Downsample1dImpl(int64_t dim) : dim_(dim) { reset(); }

void Downsample1dImpl::reset() {
  conv_ = register_module("conv", torch::nn::Conv1d(torch::nn::Conv1dOptions(dim_, dim_, 3).stride(2).padding(1)));
}

at::Tensor Downsample1dImpl::forward(const at::Tensor& x) { return conv_->forward(x); }

Upsample1dImpl::Upsample1dImpl(int64_t dim) : dim_(dim) { reset(); }

void Upsample1dImpl::reset() {
  conv_ = register_module(
      "conv", torch::nn::ConvTranspose1d(torch::nn::ConvTranspose1dOptions(dim_, dim_, 4).stride(2).padding(1)));
}

at::Tensor Upsample1dImpl::forward(const at::Tensor& x) { return conv_->forward(x); }

}  // namespace sparsevit::policy
