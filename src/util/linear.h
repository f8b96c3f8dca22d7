// y = x W^T + b for a torch::nn::Linear, through ATen's at::linear.
//
// LibTorch 1.13's C++ torch::nn::Linear::forward (torch::nn::functional::linear) computes a
// [B, N, C] input as matmul and then `+= bias`: an unfused GEMM, one more pass over the output,
// and in backward a separate reduction for the bias gradient. at::linear (what Python's
// F.linear calls) runs contiguous 3-D inputs as one addmm over the flattened rows, bias fused.
#pragma once

#include <ATen/ATen.h>
#include <torch/nn/modules/linear.h>

namespace sparsevit {

inline at::Tensor linear(const torch::nn::Linear& layer, const at::Tensor& x) {
  return at::linear(x, layer->weight, layer->bias.defined() ? c10::optional<at::Tensor>(layer->bias) : c10::nullopt);
}

}  // namespace sparsevit
