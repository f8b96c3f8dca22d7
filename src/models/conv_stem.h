// The early-convolution stem of Xiao et al. 2021 ("Early convolutions help transformers see
// better") in timm's structure (timm/models/vision_transformer_hybrid.py ConvStem, the backbone of
// a HybridEmbed with proj=False): in place of the patchify Conv2d, log2(patch_size) 3x3 stride-2
// convolutions (padding 1, no bias), each followed by BatchNorm2d (eps 1e-5, momentum 0.1) and
// ReLU, then one 1x1 convolution with bias to embed_dim. Parameter names are timm's:
// <i>.conv.weight, <i>.bn.{weight, bias, running_mean, running_var, num_batches_tracked}, and for
// the last <k>.conv.{weight, bias}. The output grid is the patch grid: H / patch_size per side.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>

#include <cstdint>
#include <memory>
#include <vector>

namespace sparsevit::models {

// The output channels of the stem's convolutions, timm's "tiered" default: for patch_size 2^k, the
// k stride-2 convolutions have embed_dim / 2^(k-1-i) channels (i = 0 .. k-1), the 1x1 one
// embed_dim (patch 8, dim 64: 16, 32, 64, 64). UsageError unless patch_size is a power of two
// >= 2 and embed_dim a positive multiple of 2^(k-1).
std::vector<int64_t> conv_stem_channels(int64_t patch_size, int64_t embed_dim);

// One convolution of the stem (timm's ConvNormAct): `conv`, then, except for the last one, `bn`
// with a ReLU after it (timm's BatchNormAct2d holds the activation; it has no parameters).
class ConvNormAct : public torch::nn::Module {
 public:
  ConvNormAct(int64_t in_chans, int64_t out_chans, int64_t kernel_size, int64_t stride, bool norm_act);
  at::Tensor forward(const at::Tensor& x);
  const torch::nn::Conv2d& conv() const { return conv_; }
  // nullptr for the last convolution (no norm, no activation).
  const torch::nn::BatchNorm2d& bn() const { return bn_; }

 private:
  torch::nn::Conv2d conv_{nullptr};
  torch::nn::BatchNorm2d bn_{nullptr};
};

class ConvStem : public torch::nn::Module {
 public:
  // UsageError as conv_stem_channels.
  ConvStem(int64_t in_chans, int64_t patch_size, int64_t embed_dim);
  // [B, in_chans, H, W] -> [B, embed_dim, H / patch_size, W / patch_size].
  at::Tensor forward(const at::Tensor& x);
  // The convolutions in order, registered as "0", "1", ...: the stride-2 ones, then the 1x1.
  const std::vector<std::shared_ptr<ConvNormAct>>& layers() const { return layers_; }

 private:
  std::vector<std::shared_ptr<ConvNormAct>> layers_;
};

}  // namespace sparsevit::models
