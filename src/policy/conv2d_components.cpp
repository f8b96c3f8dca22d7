#include "policy/conv2d_components.h"

#include "policy/conv1d_components.h"

#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/normalization.h>

#include <string>

#include "util/errors.h"

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

namespace {

// conv(cat(x, shared.expand(B)); weight, bias) with the shared channels' part computed once.
at::Tensor conv2d_with_shared(const torch::nn::Conv2dImpl& conv, const at::Tensor& x, const at::Tensor& shared) {
  const int64_t cx = x.size(1), cs = shared.size(1);
  if (shared.dim() != 4 || shared.size(0) != 1 || cx + cs != conv.weight.size(1) || shared.size(2) != x.size(2) ||
      shared.size(3) != x.size(3))
    throw UsageError("Conv2d: shared channels " + c10::str(shared.sizes()) + " do not complete " +
                     c10::str(x.sizes()) + " to the " + std::to_string(conv.weight.size(1)) + " input channels");
  const auto& o = conv.options;
  const auto& padding = c10::get<torch::ExpandingArray<2>>(o.padding());
  return at::conv2d(x, conv.weight.narrow(1, 0, cx), conv.bias, o.stride(), padding, o.dilation()) +
         at::conv2d(shared, conv.weight.narrow(1, cx, cs), {}, o.stride(), padding, o.dilation());
}

}  // namespace

at::Tensor Conv2dBlockImpl::forward_with_shared(const at::Tensor& x, const at::Tensor& shared) {
  const at::Tensor y = conv2d_with_shared(block_->at<torch::nn::Conv2dImpl>(0), x, shared);
  return block_[2]->as<torch::nn::Mish>()->forward(block_[1]->as<torch::nn::GroupNorm>()->forward(y));
}

Upsample2dImpl::Upsample2dImpl(int64_t dim) : dim_(dim) { reset(); }

void Upsample2dImpl::reset() {
  conv_ = register_module(
      "conv", torch::nn::ConvTranspose2d(torch::nn::ConvTranspose2dOptions(dim_, dim_, 4).stride(2).padding(1)));
}

at::Tensor Upsample2dImpl::forward(const at::Tensor& x) {
  // Output row 2m + p of the transposed conv (kernel 4, stride 2, padding 1) reads input rows
  // m - 1, m, m + 1 with kernel rows (3, 1, -) for p = 0 and (-, 2, 0) for p = 1 (- : none), and
  // columns likewise: a 3 x 3 conv to C x 2 x 2 phase channels, then pixel_shuffle interleaves them.
  const at::Tensor& w = conv_->weight;  // [C_in, C_out, 4, 4]
  const at::Tensor taps = at::zeros({2, 3, 4}, w.options());  // [phase, tap, kernel row]: 0 or 1
  taps[0][0][3] = 1;
  taps[0][1][1] = 1;
  taps[1][1][2] = 1;
  taps[1][2][0] = 1;
  const at::Tensor phases = at::einsum("ptk,qul,cokl->opqctu", {taps, taps, w})
                                .reshape({w.size(1) * 4, w.size(0), 3, 3});
  const at::Tensor bias = conv_->bias.defined() ? conv_->bias.repeat_interleave(4) : at::Tensor();
  return at::pixel_shuffle(at::conv2d(x, phases, bias, /*stride=*/1, /*padding=*/1), 2);
}

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

at::Tensor ResidualBlock2DImpl::forward_with_shared(const at::Tensor& x, const at::Tensor& shared) {
  const at::Tensor out =
      blocks_[1]->as<Conv2dBlock>()->forward(blocks_[0]->as<Conv2dBlock>()->forward_with_shared(x, shared));
  if (residual_conv_) return out + conv2d_with_shared(*residual_conv_, x, shared);
  return out + at::cat({x, shared.expand({x.size(0), -1, -1, -1})}, 1);
}

}  // namespace sparsevit::policy
