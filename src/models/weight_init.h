// timm's weight initialisation, shared by the ViT and the TimeSformer.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

namespace sparsevit::models {

// timm's trunc_normal_(std): the [-2, 2] cut is ~100 standard deviations away at std .02.
void trunc_normal(at::Tensor t, double std);

// timm's _init_weights on every submodule: Linear weights trunc_normal(std), biases zero;
// LayerNorm weights one, biases zero.
void init_linear_and_norm(torch::nn::Module& model, double std = 0.02);

}  // namespace sparsevit::models
