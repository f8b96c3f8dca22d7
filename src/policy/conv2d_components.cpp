#include "policy/conv2d_components.h"

#include "policy/conv1d_components.h"

#include <torch/nn/modules/activation.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/nn/modules/normalization.h>
#include <torch/version.h>

#include <algorithm>
#include <string>
#include <vector>

#include "util/errors.h"

namespace sparsevit::policy {
namespace {

// Mish with tanh(softplus(x)) = n / (n + 2), n = e^x (e^x + 2): one vectorised exp instead of
// LibTorch's CPU mish; x is capped at 20 inside the exp (there t = 1 in float already).
struct MishViaExp : public torch::autograd::Function<MishViaExp> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x) {
    const at::Tensor e = x.clamp_max(20).exp_();
    at::Tensor t = (e + 2).mul_(e);
    t.div_(t + 2);  // tanh(softplus(x))
    ctx->save_for_backward({x, t});
    return x * t;
  }
  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0], &t = saved[1];
    // d mish / dx = t + x sigmoid(x) (1 - t^2)
    at::Tensor d = t * t;
    d.neg_().add_(1).mul_(at::sigmoid(x)).mul_(x).add_(t).mul_(grads[0]);
    return {d};
  }
};

}  // namespace

at::Tensor mish_via_exp(const at::Tensor& x) { return MishViaExp::apply(x); }

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

at::Tensor Conv2dBlockImpl::forward(const at::Tensor& x) {
  return mish_via_exp(block_[1]->as<torch::nn::GroupNorm>()->forward(block_[0]->as<torch::nn::Conv2d>()->forward(x)));
}

at::Tensor tile_2d(const at::Tensor& tile, int64_t height, int64_t width) {
  const int64_t th = tile.size(-2), tw = tile.size(-1);
  if (th == height && tw == width) return tile;
  const at::Tensor tiled = tile.repeat({1, 1, (height + th - 1) / th, (width + tw - 1) / tw});
  return tiled.slice(2, 0, height).slice(3, 0, width);
}

namespace {

// A map periodic with `period` along an axis of `size`: a same-padded conv's output row i reads
// rows i - pad .. i + pad, so it is fixed by i's phase and by how far the padding reaches in.
// The output is therefore read off the conv of a shorter tiling of m = size (mod period) rows,
// m >= 2 pad + period: rows < pad from its top, rows >= size - pad from its bottom, the others
// from its middle by phase (spread_rows). m = size when that is no shorter.
int64_t reduced_size(int64_t size, int64_t period, int64_t pad) {
  int64_t m = 2 * pad + period;
  m += ((size - m) % period + period) % period;
  return std::min(m, size);
}

// The reduced tiling's conv output y (m along `dim`) spread to `size`: its first and last pad
// rows at the ends, its rows pad .. pad + period - 1 repeated between (phase by phase).
at::Tensor spread_rows(const at::Tensor& y, int64_t dim, int64_t size, int64_t period, int64_t pad) {
  const int64_t m = y.size(dim);
  if (m == size) return y;
  std::vector<int64_t> repeats(static_cast<std::size_t>(y.dim()), 1);
  repeats[static_cast<std::size_t>(dim)] = (size - 2 * pad + period - 1) / period;
  const at::Tensor middle = y.narrow(dim, pad, period).repeat(repeats).narrow(dim, 0, size - 2 * pad);
  return at::cat({y.narrow(dim, 0, pad), middle, y.narrow(dim, m - pad, pad)}, dim);
}

// conv(tile_2d(x, height, width); weight) + bias for a stride-1 same-padded conv, through the
// reduced tiling.
at::Tensor conv2d_of_tiling(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                            c10::IntArrayRef padding, int64_t height, int64_t width) {
  const int64_t mh = reduced_size(height, x.size(2), padding[0]), mw = reduced_size(width, x.size(3), padding[1]);
  const at::Tensor y = at::conv2d(tile_2d(x, mh, mw), weight, bias, /*stride=*/1, padding);
  return spread_rows(spread_rows(y, 2, height, x.size(2), padding[0]), 3, width, x.size(3), padding[1]);
}

}  // namespace

at::Tensor conv2d_with_shared(const torch::nn::Conv2dImpl& conv, const at::Tensor& x, const at::Tensor& shared) {
  const int64_t cx = x.size(1), cs = shared.size(1);
  const int64_t height = shared.size(2), width = shared.size(3);
  if (x.dim() != 4 || shared.dim() != 4 || shared.size(0) != 1 || cx + cs != conv.weight.size(1) ||
      x.size(2) > height || x.size(3) > width)
    throw UsageError("Conv2d: shared channels " + c10::str(shared.sizes()) + " do not complete " +
                     c10::str(x.sizes()) + " to the " + std::to_string(conv.weight.size(1)) + " input channels");
  const auto& o = conv.options;
  // Conv2dOptions::padding is a c10::variant in LibTorch 1.13, a std::variant from 2.x on.
#if TORCH_VERSION_MAJOR >= 2
  const auto& padding = std::get<torch::ExpandingArray<2>>(o.padding());
#else
  const auto& padding = c10::get<torch::ExpandingArray<2>>(o.padding());
#endif
  const at::Tensor weight_x = conv.weight.narrow(1, 0, cx), weight_shared = conv.weight.narrow(1, cx, cs);
  const bool same = (*o.stride())[0] == 1 && (*o.stride())[1] == 1 && (*o.dilation())[0] == 1 &&
                    (*o.dilation())[1] == 1 && 2 * (*padding)[0] + 1 == (*o.kernel_size())[0] &&
                    2 * (*padding)[1] + 1 == (*o.kernel_size())[1];
  const at::Tensor per_sample =
      same ? conv2d_of_tiling(x, weight_x, conv.bias, *padding, height, width)
           : at::conv2d(tile_2d(x, height, width), weight_x, conv.bias, o.stride(), padding, o.dilation());
  return per_sample + at::conv2d(shared, weight_shared, {}, o.stride(), padding, o.dilation());
}

at::Tensor Conv2dBlockImpl::forward_with_shared(const at::Tensor& x, const at::Tensor& shared) {
  const at::Tensor y = conv2d_with_shared(block_->at<torch::nn::Conv2dImpl>(0), x, shared);
  return mish_via_exp(block_[1]->as<torch::nn::GroupNorm>()->forward(y));
}

Upsample2dImpl::Upsample2dImpl(int64_t dim) : dim_(dim) { reset(); }

void Upsample2dImpl::reset() {
  conv_ = register_module(
      "conv", torch::nn::ConvTranspose2d(torch::nn::ConvTranspose2dOptions(dim_, dim_, 4).stride(2).padding(1)));
}

at::Tensor Upsample2dImpl::forward(const at::Tensor& x) {
  // Output row 2m + p of the transposed conv (kernel 4, stride 2, padding 1) reads input rows
  // m - 1, m with kernel rows 3, 1 (p = 0) and rows m, m + 1 with kernel rows 2, 0 (p = 1);
  // columns likewise. So output phase (p_y, p_x) is a 2 x 2 conv with padding 1 (an
  // (H + 1) x (W + 1) map) read from offset (p_y, p_x), and the four phases interleave.
  const at::Tensor& w = conv_->weight;  // [C_in, C_out, 4, 4]
  const int64_t n = x.size(0), h = x.size(2), wd = x.size(3), c_out = w.size(1);
  const at::Tensor kernel_rows[2] = {at::tensor({int64_t{3}, int64_t{1}}), at::tensor({int64_t{2}, int64_t{0}})};
  std::vector<at::Tensor> rows;  // per p_y: [N, C, H, 2W], columns 2j + p_x
  for (int64_t py = 0; py < 2; ++py) {
    std::vector<at::Tensor> phases;
    for (int64_t px = 0; px < 2; ++px) {
      const at::Tensor k = w.index_select(2, kernel_rows[py]).index_select(3, kernel_rows[px]).transpose(0, 1);
      phases.push_back(at::conv2d(x, k, conv_->bias, /*stride=*/1, /*padding=*/1).narrow(2, py, h).narrow(3, px, wd));
    }
    rows.push_back(at::stack(phases, -1).view({n, c_out, h, 2 * wd}));
  }
  return at::stack(rows, 3).view({n, c_out, 2 * h, 2 * wd});  // rows 2i + p_y
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
  return out + at::cat({tile_2d(x, shared.size(2), shared.size(3)), shared.expand({x.size(0), -1, -1, -1})}, 1);
}

}  // namespace sparsevit::policy
