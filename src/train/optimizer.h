// AdamW with timm's decay / no-decay parameter groups (param_groups_weight_decay), plus the
// learning-rate setter and gradient clipping the training loop needs.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <torch/nn/module.h>
#include <torch/optim/adamw.h>

namespace sparsevit::train {

struct OptimizerConfig {
  double lr = 1e-3;
  double weight_decay = 0.05;
  // The recipe of docs/conventions.md (DeiT's --opt_eps is 1e-8, PyTorch's AdamW default 1e-8; we use 1e-6).
  double eps = 1e-6;
  std::pair<double, double> betas = {0.9, 0.999};
  // Parameters never decayed besides biases and 1-d tensors (timm's no_weight_decay()). A name
  // matches the full parameter name or its last component ("pos_embed" matches "vit.pos_embed").
  std::vector<std::string> no_weight_decay_names = {"pos_embed", "cls_token", "dist_token"};
};

// The split make_adamw uses, by parameter name, in named_parameters() order. Parameters with
// requires_grad == false are in neither list (timm skips them too).
struct WeightDecaySplit {
  std::vector<std::string> decay;     // dim >= 2, not a bias, not listed
  std::vector<std::string> no_decay;  // dim <= 1, names ending in ".bias"/"bias", listed names
};
WeightDecaySplit split_weight_decay(const torch::nn::Module& model, const std::vector<std::string>& no_weight_decay_names);

// AdamW over two groups: group 0 = decay (weight_decay), group 1 = no-decay (0). A group with no
// parameter is left out (a model without biases gets one group). Throws UsageError on invalid
// hyper-parameters or when the model has no trainable parameter.
std::unique_ptr<torch::optim::AdamW> make_adamw(torch::nn::Module& model, const OptimizerConfig& config);

// Sets the learning rate of every parameter group.
void set_learning_rate(torch::optim::Optimizer& optimizer, double lr);
// The learning rate of the first parameter group.
double learning_rate(const torch::optim::Optimizer& optimizer);

// Total 2-norm of the gradients of `params` (those without a gradient are skipped), computed
// before clipping. max_norm > 0 clips them in place to that norm (torch::nn::utils::
// clip_grad_norm_); max_norm <= 0 only measures.
double clip_grad_norm(const std::vector<at::Tensor>& params, double max_norm);

}  // namespace sparsevit::train
