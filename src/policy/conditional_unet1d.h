// Diffusion Policy's ConditionalUnet1D (Chi et al. 2023, real-stanford/diffusion_policy
// model/diffusion/conditional_unet1d.py): the denoiser eps(a_t, t, obs) over an action sequence.
// A 1-D U-Net over the horizon whose every residual block is FiLM-conditioned on
// [step embedding ; global_cond]. Parameter names are the original's state_dict names
// (`diffusion_step_encoder.1.weight`, `down_modules.0.0.blocks.0.block.0.weight`,
// `mid_modules.*`, `up_modules.*`, `final_conv.*`), so a published checkpoint loads by name.
// The original's local_cond path is not implemented (the image policies do not use it).
#pragma once

#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>

#include <memory>
#include <vector>

#include "policy/conditional_residual_block1d.h"
#include "policy/sinusoidal_pos_emb.h"

namespace sparsevit::policy {

// The noise prediction and what Crossway Diffusion decodes: the features after the mid modules.
struct UnetOutput {
  at::Tensor prediction;  // [B, T, input_dim]
  at::Tensor mid;         // [B, down_dims.back(), T / 2^(down_dims.size() - 1)]
};

class ConditionalUnet1D : public torch::nn::Module {
 public:
  // global_cond_dim 0: no global conditioning (forward takes an undefined global_cond).
  // Defaults are Diffusion Policy's image-policy configs (kernel 5, FiLM scale), not the
  // class defaults of the original (kernel 3, bias only).
  ConditionalUnet1D(int64_t input_dim, int64_t global_cond_dim, int64_t diffusion_step_embed_dim = 256,
                    std::vector<int64_t> down_dims = {256, 512, 1024}, int64_t kernel_size = 5, int64_t n_groups = 8,
                    bool cond_predict_scale = true);

  // sample [B, T, input_dim]; timestep [B] or a scalar tensor (integer or floating);
  // global_cond [B, global_cond_dim] -> the prediction [B, T, input_dim].
  // T must be a multiple of 2^(down_dims.size() - 1).
  at::Tensor forward(const at::Tensor& sample, const at::Tensor& timestep, const at::Tensor& global_cond);
  UnetOutput forward_with_mid(const at::Tensor& sample, const at::Tensor& timestep, const at::Tensor& global_cond);

  int64_t input_dim() const { return input_dim_; }
  int64_t global_cond_dim() const { return global_cond_dim_; }
  int64_t mid_dim() const { return down_dims_.back(); }
  const std::vector<int64_t>& down_dims() const { return down_dims_; }
  // The horizon of the mid features for a sample horizon T.
  int64_t mid_horizon(int64_t horizon) const;

 private:
  // [step embedding ; global_cond], the FiLM input of every block.
  at::Tensor condition(const at::Tensor& timestep, const at::Tensor& global_cond, int64_t batch, at::ScalarType dtype);

  struct Level {
    std::shared_ptr<ConditionalResidualBlock1D> resnet, resnet2;
    Downsample1d down{nullptr};  // null: none (the last down level)
    Upsample1d up{nullptr};      // up levels only
  };
  static at::Tensor resample(const Level& level, const at::Tensor& x);

  int64_t input_dim_, global_cond_dim_;
  std::vector<int64_t> down_dims_;
  SinusoidalPosEmb step_embedding_{nullptr};
  torch::nn::Linear step_fc1_{nullptr}, step_fc2_{nullptr};
  torch::nn::Sequential diffusion_step_encoder_{nullptr};
  std::vector<Level> down_, up_;
  std::vector<std::shared_ptr<ConditionalResidualBlock1D>> mid_;
  torch::nn::ModuleList down_modules_{nullptr}, mid_modules_{nullptr}, up_modules_{nullptr};
  Conv1dBlock final_block_{nullptr};
  torch::nn::Conv1d final_proj_{nullptr};
  torch::nn::Sequential final_conv_{nullptr};
};

}  // namespace sparsevit::policy
