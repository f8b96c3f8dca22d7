#include "train/model_ema.h"

#include <algorithm>
#include <cmath>

#include <ATen/ATen.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include "util/errors.h"

namespace sparsevit::train {

double ema_warmup_decay(int64_t optimization_step, const EmaWarmup& w) {
  const int64_t step = std::max<int64_t>(0, optimization_step - w.update_after_step - 1);
  if (step <= 0) return 0.0;
  const double value = 1 - std::pow(1 + static_cast<double>(step) / w.inv_gamma, -w.power);
  return std::max(w.min_value, std::min(value, w.max_value));
}

namespace {

// The model's tensors in the EMA's order, checked by name and shape.
weights::NamedTensors matching_state(const weights::NamedTensors& ema, const torch::nn::Module& model) {
  return weights::align_named(weights::named_state(model), ema, "model EMA (the model changed since the EMA was created)");
}

}  // namespace

ModelEma::ModelEma(const torch::nn::Module& model, bool copy_buffers)
    : ema_(weights::clone_named(weights::named_state(model))), copy_buffers_(copy_buffers) {
  const auto buffers = model.named_buffers(/*recurse=*/true);
  for (const auto& [name, tensor] : ema_) buffer_.push_back(buffers.contains(name));
}

void ModelEma::update(const torch::nn::Module& model, double decay) {
  if (!(decay >= 0.0 && decay <= 1.0)) throw UsageError("model_ema_decay must lie in [0, 1], got " + std::to_string(decay));
  const weights::NamedTensors state = matching_state(ema_, model);
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < ema_.size(); ++i) {
    at::Tensor& e = ema_[i].second;
    const at::Tensor& original = state[i].second;
    const at::Tensor m = original.detach();
    const bool copied = buffer_[i] ? copy_buffers_ : !original.requires_grad();
    if (!copied && (at::isFloatingType(e.scalar_type()) || at::isComplexType(e.scalar_type()))) {
      e.mul_(decay).add_(m.to(e.device(), e.scalar_type()), 1.0 - decay);
    } else {
      e.copy_(m);
    }
  }
  ++num_updates_;
}

void ModelEma::copy_to(torch::nn::Module& model) const {
  const weights::NamedTensors state = matching_state(ema_, model);
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < ema_.size(); ++i) state[i].second.copy_(ema_[i].second);
}

void ModelEma::swap_into(torch::nn::Module& model) {
  const weights::NamedTensors state = matching_state(ema_, model);
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < ema_.size(); ++i) {
    at::Tensor held = state[i].second.detach().clone();
    state[i].second.copy_(ema_[i].second);
    ema_[i].second.copy_(held);
  }
}

void ModelEma::save(torch::serialize::OutputArchive& archive) const {
  weights::write_named(archive, ema_);
  archive.write("num_updates", c10::IValue(num_updates_));
}

void ModelEma::load(torch::serialize::InputArchive& archive, const std::string& context) {
  const weights::NamedTensors saved = weights::read_named(archive, context);
  weights::copy_named_into(saved, ema_, context);
  c10::IValue n;
  num_updates_ = archive.try_read("num_updates", n) && n.isInt() ? n.toInt() : 0;
}

}  // namespace sparsevit::train
