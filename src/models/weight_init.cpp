#include "models/weight_init.h"

#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/utils.h>

namespace sparsevit::models {

void trunc_normal(at::Tensor t, double std) {
  torch::NoGradGuard no_grad;
  t.normal_(0.0, std).clamp_(-2.0, 2.0);
}

void init_linear_and_norm(torch::nn::Module& model, double std) {
  torch::NoGradGuard no_grad;
  for (const auto& module : model.modules(/*include_self=*/false)) {
    if (auto* linear = module->as<torch::nn::Linear>()) {
      trunc_normal(linear->weight, std);
      if (linear->bias.defined()) linear->bias.zero_();
    } else if (auto* norm = module->as<torch::nn::LayerNorm>()) {
      norm->weight.fill_(1.0);
      norm->bias.zero_();
    }
  }
}

}  // namespace sparsevit::models
