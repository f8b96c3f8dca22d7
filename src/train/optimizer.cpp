#include "train/optimizer.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <stdexcept>

#include <torch/nn/utils/clip_grad.h>

#include "util/errors.h"

namespace sparsevit::train {

namespace {

bool listed(const std::string& name, const std::vector<std::string>& names) {
  const auto dot = name.rfind('.');
  const std::string last = dot == std::string::npos ? name : name.substr(dot + 1);
  return std::find(names.begin(), names.end(), name) != names.end() ||
         std::find(names.begin(), names.end(), last) != names.end();
}

bool is_bias(const std::string& name) {
  return name == "bias" || (name.size() > 5 && name.compare(name.size() - 5, 5, ".bias") == 0);
}


}  // namespace

WeightDecaySplit split_weight_decay(const torch::nn::Module& model, const std::vector<std::string>& names) {
  WeightDecaySplit split;
  for (const auto& item : model.named_parameters(/*recurse=*/true)) {
    const at::Tensor& p = item.value();
    if (!p.requires_grad()) continue;
    if (p.dim() <= 1 || is_bias(item.key()) || listed(item.key(), names)) {
      split.no_decay.push_back(item.key());
    } else {
      split.decay.push_back(item.key());
    }
  }
  return split;
}

int64_t vit_layer_id(const std::string& name, int64_t num_layers) {
  if (name == "cls_token" || name == "pos_embed" || name.rfind("patch_embed", 0) == 0) return 0;
  if (name.rfind("blocks.", 0) == 0) {
    const auto end = name.find('.', 7);
    try {
      return std::stoll(name.substr(7, end == std::string::npos ? std::string::npos : end - 7)) + 1;
    } catch (const std::exception&) {
    }
  }
  return num_layers;
}

int64_t layer_id(const std::string& name, const std::string& prefix, int64_t num_layers) {
  if (prefix.empty()) return vit_layer_id(name, num_layers);
  if (name.rfind(prefix, 0) != 0) return num_layers;
  return vit_layer_id(name.substr(prefix.size()), num_layers);
}

std::vector<ParameterGroup> parameter_groups(const torch::nn::Module& model, const OptimizerConfig& c) {
  const WeightDecaySplit split = split_weight_decay(model, c.no_weight_decay_names);
  std::vector<ParameterGroup> groups;
  if (c.layer_decay >= 1.0) {
    if (!split.decay.empty()) groups.push_back({split.decay, c.weight_decay, 1.0});
    if (!split.no_decay.empty()) groups.push_back({split.no_decay, 0.0, 1.0});
    return groups;
  }
  if (c.num_layers < 1) throw UsageError("layer_decay needs the model's number of layers");
  const std::set<std::string> no_decay(split.no_decay.begin(), split.no_decay.end());
  std::map<std::pair<int64_t, bool>, std::size_t> index;  // (layer id, decayed) -> group
  for (const auto& item : model.named_parameters(/*recurse=*/true)) {
    if (!item.value().requires_grad()) continue;
    const bool decayed = no_decay.count(item.key()) == 0;
    const int64_t layer = layer_id(item.key(), c.layer_prefix, c.num_layers);
    auto [it, inserted] = index.emplace(std::make_pair(layer, decayed), groups.size());
    if (inserted)
      groups.push_back({{}, decayed ? c.weight_decay : 0.0,
                        std::pow(c.layer_decay, static_cast<double>(c.num_layers - layer))});
    groups[it->second].names.push_back(item.key());
  }
  return groups;
}

std::unique_ptr<torch::optim::AdamW> make_adamw(torch::nn::Module& model, const OptimizerConfig& c) {
  require(std::isfinite(c.lr) && c.lr >= 0, "learning rate must be >= 0, got " + std::to_string(c.lr));
  require(std::isfinite(c.weight_decay) && c.weight_decay >= 0,
          "weight_decay must be >= 0, got " + std::to_string(c.weight_decay));
  require(std::isfinite(c.eps) && c.eps > 0, "opt_eps must be > 0, got " + std::to_string(c.eps));
  require(c.betas.first >= 0 && c.betas.first < 1 && c.betas.second >= 0 && c.betas.second < 1,
          "AdamW betas must lie in [0, 1)");

  require(std::isfinite(c.layer_decay) && c.layer_decay > 0 && c.layer_decay <= 1,
          "layer_decay must be in (0, 1], got " + std::to_string(c.layer_decay));
  const auto params = model.named_parameters(/*recurse=*/true);
  auto collect = [&](const std::vector<std::string>& names) {
    std::vector<at::Tensor> out;
    out.reserve(names.size());
    for (const auto& n : names) out.push_back(params[n]);
    return out;
  };
  auto options = [&](double wd) {
    auto o = std::make_unique<torch::optim::AdamWOptions>(c.lr);
    o->betas(std::make_tuple(c.betas.first, c.betas.second)).eps(c.eps).weight_decay(wd).amsgrad(false);
    return o;
  };
  std::vector<torch::optim::OptimizerParamGroup> groups;
  for (const ParameterGroup& g : parameter_groups(model, c)) groups.emplace_back(collect(g.names), options(g.weight_decay));
  if (groups.empty()) throw UsageError("the model has no trainable parameter to optimise");
  torch::optim::AdamWOptions defaults(c.lr);
  defaults.betas(std::make_tuple(c.betas.first, c.betas.second)).eps(c.eps).weight_decay(c.weight_decay);
  return std::make_unique<torch::optim::AdamW>(std::move(groups), defaults);
}

void set_learning_rate(torch::optim::Optimizer& optimizer, double lr, const std::vector<double>& lr_scales) {
  auto& groups = optimizer.param_groups();
  if (!lr_scales.empty() && lr_scales.size() != groups.size())
    throw std::logic_error("set_learning_rate: one scale per parameter group");
  for (std::size_t i = 0; i < groups.size(); ++i) groups[i].options().set_lr(lr * (lr_scales.empty() ? 1.0 : lr_scales[i]));
}

void zero_grad_to_none(torch::optim::Optimizer& optimizer) {
  for (auto& group : optimizer.param_groups())
    for (auto& p : group.params()) p.mutable_grad().reset();
}

double learning_rate(const torch::optim::Optimizer& optimizer) {
  const auto& groups = optimizer.param_groups();
  if (groups.empty()) throw UsageError("optimizer has no parameter group");
  return groups.front().options().get_lr();
}

double clip_grad_norm(const std::vector<at::Tensor>& params, double max_norm) {
  if (max_norm > 0) return torch::nn::utils::clip_grad_norm_(params, max_norm, 2.0, /*error_if_nonfinite=*/false);
  torch::NoGradGuard no_grad;
  std::vector<at::Tensor> norms;
  for (const auto& p : params) {
    if (p.grad().defined()) norms.push_back(p.grad().detach().norm(2).to(at::kDouble));
  }
  if (norms.empty()) return 0.0;
  return at::stack(norms).norm(2).item<double>();
}

}  // namespace sparsevit::train
