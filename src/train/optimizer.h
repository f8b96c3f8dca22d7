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
  // Layer-wise learning-rate decay (MAE's lr_decay.py, BEiT): parameters of layer id l get
  // lr * layer_decay^(num_layers - l). 1: off. num_layers = blocks + 1 (see vit_layer_id).
  double layer_decay = 1.0;
  int64_t num_layers = 0;
  // When set, only parameters under this module prefix are the ViT's layers (the policy's
  // "obs_encoder."): their ids come from their names without it; every other parameter gets
  // num_layers (the full lr).
  std::string layer_prefix;
};

// MAE's get_layer_id_for_vit: cls_token, pos_embed, patch_embed -> 0; blocks.<i>.* -> i + 1;
// everything else (norm, fc_norm, head) -> num_layers.
int64_t vit_layer_id(const std::string& name, int64_t num_layers);
// vit_layer_id of a parameter of a model whose ViT sits under `prefix` ("" : the model is the ViT).
int64_t layer_id(const std::string& name, const std::string& prefix, int64_t num_layers);

// One optimizer parameter group: its parameters by name, weight decay and learning-rate scale.
struct ParameterGroup {
  std::vector<std::string> names;
  double weight_decay = 0;
  double lr_scale = 1.0;
};

// The groups make_adamw builds, in order. Without layer decay: decay (dim >= 2, not a bias, not
// listed) then no-decay, empty groups left out. With layer decay: MAE's param_groups_lrd, one
// group per (layer id, decay or not) in order of first appearance.
std::vector<ParameterGroup> parameter_groups(const torch::nn::Module& model, const OptimizerConfig& config);

// The split make_adamw uses, by parameter name, in named_parameters() order. Parameters with
// requires_grad == false are in neither list (timm skips them too).
struct WeightDecaySplit {
  std::vector<std::string> decay;     // dim >= 2, not a bias, not listed
  std::vector<std::string> no_decay;  // dim <= 1, names ending in ".bias"/"bias", listed names
};
WeightDecaySplit split_weight_decay(const torch::nn::Module& model, const std::vector<std::string>& no_weight_decay_names);

// AdamW over parameter_groups(model, config). Throws UsageError on invalid hyper-parameters or
// when the model has no trainable parameter.
std::unique_ptr<torch::optim::AdamW> make_adamw(torch::nn::Module& model, const OptimizerConfig& config);

// Sets the learning rate of every parameter group: lr * lr_scales[i] for group i (1 when
// lr_scales is empty), as MAE's adjust_learning_rate applies "lr_scale".
void set_learning_rate(torch::optim::Optimizer& optimizer, double lr, const std::vector<double>& lr_scales = {});

// Drops every parameter's gradient (PyTorch's zero_grad(set_to_none=True), LibTorch 1.13's
// zero_grad() fills zeros): the next backward then hands its gradient buffers over instead of
// adding them into zero-filled ones, which saves a fill and an add over every parameter per step.
void zero_grad_to_none(torch::optim::Optimizer& optimizer);
// The learning rate of the first parameter group.
double learning_rate(const torch::optim::Optimizer& optimizer);

// Total 2-norm of the gradients of `params` (those without a gradient are skipped), computed
// before clipping. max_norm > 0 clips them in place to that norm (torch::nn::utils::
// clip_grad_norm_); max_norm <= 0 only measures.
double clip_grad_norm(const std::vector<at::Tensor>& params, double max_norm);

}  // namespace sparsevit::train
