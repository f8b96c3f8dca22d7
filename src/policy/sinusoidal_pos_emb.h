// Diffusion Policy's SinusoidalPosEmb (model/diffusion/positional_embedding.py): a diffusion
// step t -> [sin(t * f_0), ..., sin(t * f_{h-1}), cos(t * f_0), ..., cos(t * f_{h-1})] with
// h = dim / 2 and f_i = 10000^(-i / (h - 1)). No parameters.
#pragma once

#include <ATen/ATen.h>
#include <torch/nn/cloneable.h>
#include <torch/nn/pimpl.h>

namespace sparsevit::policy {

class SinusoidalPosEmbImpl : public torch::nn::Cloneable<SinusoidalPosEmbImpl> {
 public:
  explicit SinusoidalPosEmbImpl(int64_t dim);
  void reset() override {}
  // timesteps [B] (integer or floating) -> [B, dim] in `dtype`.
  at::Tensor forward(const at::Tensor& timesteps, at::ScalarType dtype = at::kFloat);

 private:
  int64_t dim_;
};
TORCH_MODULE(SinusoidalPosEmb);

}  // namespace sparsevit::policy
