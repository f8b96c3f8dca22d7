// Diffusion Policy's ConditionalResidualBlock1D (model/diffusion/conditional_unet1d.py): two
// Conv1dBlocks with FiLM conditioning between them and a residual path. Parameter names as the
// original: `blocks.0`, `blocks.1`, `cond_encoder.1` (Mish -> Linear), `residual_conv` (a 1x1
// conv, only when the channel count changes).
#pragma once

#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>

#include "policy/conv1d_components.h"

namespace sparsevit::policy {

class ConditionalResidualBlock1D : public torch::nn::Module {
 public:
  // cond_predict_scale: FiLM predicts a per-channel scale and bias (out = scale * h + bias);
  // otherwise only a bias (out = h + bias).
  ConditionalResidualBlock1D(int64_t in_channels, int64_t out_channels, int64_t cond_dim, int64_t kernel_size = 3,
                             int64_t n_groups = 8, bool cond_predict_scale = false);
  // x [B, in_channels, T], cond [B, cond_dim] -> [B, out_channels, T].
  at::Tensor forward(const at::Tensor& x, const at::Tensor& cond);

 private:
  int64_t out_channels_;
  bool cond_predict_scale_;
  Conv1dBlock block0_{nullptr}, block1_{nullptr};
  torch::nn::ModuleList blocks_{nullptr};
  torch::nn::Sequential cond_encoder_{nullptr};
  torch::nn::Conv1d residual_conv_{nullptr};  // null: identity
};

}  // namespace sparsevit::policy
