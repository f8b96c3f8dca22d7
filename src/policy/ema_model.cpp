#include "policy/ema_model.h"

#include <algorithm>
#include <cmath>

#include "util/errors.h"

namespace sparsevit::policy {
namespace {

// Parameters then buffers, by name, in registration order.
std::vector<std::pair<std::string, at::Tensor>> named_state(const torch::nn::Module& model) {
  std::vector<std::pair<std::string, at::Tensor>> state;
  for (const auto& item : model.named_parameters(/*recurse=*/true)) state.emplace_back(item.key(), item.value());
  for (const auto& item : model.named_buffers(/*recurse=*/true)) state.emplace_back(item.key(), item.value());
  return state;
}

}  // namespace

EMAModel::EMAModel(const torch::nn::Module& model, EmaOptions options) : options_(options) {
  if (options.inv_gamma <= 0) throw UsageError("EMA: inv_gamma must be positive");
  if (options.min_value > options.max_value) throw UsageError("EMA: min_value exceeds max_value");
  at::NoGradGuard no_grad;
  for (const auto& item : model.named_parameters(/*recurse=*/true))
    entries_.push_back({item.key(), item.value().detach().clone(), item.value().requires_grad()});
  for (const auto& item : model.named_buffers(/*recurse=*/true))
    entries_.push_back({item.key(), item.value().detach().clone(), false});
}

double EMAModel::decay_at(int64_t optimization_step) const {
  const int64_t step = std::max<int64_t>(0, optimization_step - options_.update_after_step - 1);
  if (step <= 0) return 0.0;
  const double value = 1 - std::pow(1 + static_cast<double>(step) / options_.inv_gamma, -options_.power);
  return std::max(options_.min_value, std::min(value, options_.max_value));
}

void EMAModel::step(const torch::nn::Module& model) {
  const auto state = named_state(model);
  if (state.size() != entries_.size())
    throw UsageError("EMA: the model has " + std::to_string(state.size()) + " parameters and buffers, the average " +
                     std::to_string(entries_.size()));
  decay_ = decay_at(optimization_step_);
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < entries_.size(); ++i) {
    Entry& e = entries_[i];
    const at::Tensor& current = state[i].second;
    if (state[i].first != e.name || current.sizes() != e.value.sizes())
      throw UsageError("EMA: model tensor '" + state[i].first + "' does not match the averaged '" + e.name + "'");
    const at::Tensor src = current.detach().to(e.value.scalar_type());
    if (e.averaged) {
      e.value.mul_(decay_).add_(src, 1 - decay_);
    } else {
      e.value.copy_(src);
    }
  }
  ++optimization_step_;
}

void EMAModel::copy_to(torch::nn::Module& model) const {
  const auto state = named_state(model);
  if (state.size() != entries_.size())
    throw UsageError("EMA: copy_to a model with " + std::to_string(state.size()) +
                     " parameters and buffers, the average has " + std::to_string(entries_.size()));
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < entries_.size(); ++i) {
    if (state[i].first != entries_[i].name || state[i].second.sizes() != entries_[i].value.sizes())
      throw UsageError("EMA: model tensor '" + state[i].first + "' does not match the averaged '" +
                       entries_[i].name + "'");
    at::Tensor target = state[i].second;
    target.copy_(entries_[i].value);
  }
}

const at::Tensor& EMAModel::averaged(const std::string& name) const {
  for (const Entry& e : entries_)
    if (e.name == name) return e.value;
  throw UsageError("EMA: no averaged tensor named '" + name + "'");
}

}  // namespace sparsevit::policy
