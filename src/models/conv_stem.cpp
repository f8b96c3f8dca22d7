#include "models/conv_stem.h"

#include <ATen/ATen.h>

#include <string>

#include "util/errors.h"

namespace sparsevit::models {

std::vector<int64_t> conv_stem_channels(int64_t patch_size, int64_t embed_dim) {
  if (patch_size < 2 || (patch_size & (patch_size - 1)) != 0)
    throw UsageError("the conv stem needs a patch size that is a power of two >= 2 (one stride-2 conv per "
                     "factor 2), got " + std::to_string(patch_size));
  int64_t k = 0;
  while ((int64_t{1} << k) < patch_size) ++k;
  const int64_t narrowest = int64_t{1} << (k - 1);  // embed_dim / 2^(k-1): the first conv's channels
  if (embed_dim < narrowest || embed_dim % narrowest != 0)
    throw UsageError("the conv stem for patch size " + std::to_string(patch_size) + " needs embed_dim a multiple of " +
                     std::to_string(narrowest) + " (its channels halve " + std::to_string(k - 1) +
                     " times), got " + std::to_string(embed_dim));
  std::vector<int64_t> channels;
  for (int64_t i = 0; i < k; ++i) channels.push_back(embed_dim >> (k - 1 - i));
  channels.push_back(embed_dim);  // the 1x1 convolution
  return channels;
}

ConvNormAct::ConvNormAct(int64_t in_chans, int64_t out_chans, int64_t kernel_size, int64_t stride, bool norm_act) {
  // timm's padding '' : ((stride - 1) + (kernel_size - 1)) / 2, i.e. 1 for 3x3 stride 2, 0 for 1x1.
  const int64_t padding = ((stride - 1) + (kernel_size - 1)) / 2;
  conv_ = register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(in_chans, out_chans, kernel_size)
                                                        .stride(stride)
                                                        .padding(padding)
                                                        .bias(!norm_act)));
  if (norm_act)
    bn_ = register_module("bn", torch::nn::BatchNorm2d(torch::nn::BatchNorm2dOptions(out_chans).eps(1e-5).momentum(0.1)));
}

at::Tensor ConvNormAct::forward(const at::Tensor& x) {
  const at::Tensor y = conv_->forward(x);
  return bn_ ? at::relu(bn_->forward(y)) : y;
}

ConvStem::ConvStem(int64_t in_chans, int64_t patch_size, int64_t embed_dim) {
  const std::vector<int64_t> channels = conv_stem_channels(patch_size, embed_dim);
  int64_t in = in_chans;
  for (size_t i = 0; i < channels.size(); ++i) {
    const bool last = i + 1 == channels.size();
    layers_.push_back(register_module(std::to_string(i), std::make_shared<ConvNormAct>(in, channels[i], last ? 1 : 3,
                                                                                      last ? 1 : 2, !last)));
    in = channels[i];
  }
}

at::Tensor ConvStem::forward(const at::Tensor& x) {
  at::Tensor y = x;
  for (const auto& layer : layers_) y = layer->forward(y);
  return y;
}

}  // namespace sparsevit::models
