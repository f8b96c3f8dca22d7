// Exponential moving average of a model's weights (timm's ModelEmaV2 / DeiT's --model_ema): a
// deep copy of every parameter and buffer, updated after each optimizer step and swapped into
// the model to evaluate with the averaged weights.
#pragma once

#include <cstdint>
#include <string>

#include <torch/nn/module.h>
#include <torch/serialize/archive.h>

#include "weights/named_tensors.h"

namespace sparsevit::train {

// Diffusion Policy's EMAModel schedule (its ema_model.py, after diffusers): the decay after
// `optimization_step` updates, 1 - (1 + s / inv_gamma)^-power with s = step - update_after_step - 1,
// 0 while s <= 0, clamped to [min_value, max_value]. A warm-up: early weights are forgotten fast.
struct EmaWarmup {
  int64_t update_after_step = 0;
  double inv_gamma = 1.0, power = 0.75, min_value = 0.0, max_value = 0.9999;
};
double ema_warmup_decay(int64_t optimization_step, const EmaWarmup& warmup);

class ModelEma {
 public:
  // Deep-copies the current parameters and buffers of `model` (same device and dtype).
  // `copy_buffers`: buffers are copied instead of averaged (Diffusion Policy's EMAModel; timm's
  // ModelEmaV2 averages them).
  explicit ModelEma(const torch::nn::Module& model, bool copy_buffers = false);

  // ema = decay * ema + (1 - decay) * model for floating-point tensors (integer buffers are
  // copied), without autograd. Parameters that do not require gradients (a frozen encoder) are
  // copied, as Diffusion Policy's EMAModel does: averaging a constant would drift it by rounding.
  // Throws UsageError for decay outside [0, 1], RuntimeError when the model's tensors no longer
  // match (names or shapes).
  void update(const torch::nn::Module& model, double decay);

  // Overwrites the model's parameters and buffers with the EMA values.
  void copy_to(torch::nn::Module& model) const;

  // Exchanges the model's values and the EMA values; calling it again restores both. Use
  // EmaWeightsScope to evaluate with EMA weights and get the training weights back.
  void swap_into(torch::nn::Module& model);

  const weights::NamedTensors& tensors() const { return ema_; }
  int64_t num_updates() const { return num_updates_; }

  // Serialisation into (a nested) archive; load validates names and shapes (RuntimeError
  // prefixed with `context`).
  void save(torch::serialize::OutputArchive& archive) const;
  void load(torch::serialize::InputArchive& archive, const std::string& context = "EMA state");

 private:
  weights::NamedTensors ema_;
  std::vector<bool> buffer_;  // per tensor of ema_: a buffer (not a parameter)
  bool copy_buffers_ = false;
  int64_t num_updates_ = 0;
};

// Swaps the EMA weights into `model` for the lifetime of the scope, then swaps them back.
class EmaWeightsScope {
 public:
  EmaWeightsScope(ModelEma& ema, torch::nn::Module& model) : ema_(ema), model_(model) { ema_.swap_into(model_); }
  ~EmaWeightsScope() { ema_.swap_into(model_); }
  EmaWeightsScope(const EmaWeightsScope&) = delete;
  EmaWeightsScope& operator=(const EmaWeightsScope&) = delete;

 private:
  ModelEma& ema_;
  torch::nn::Module& model_;
};

}  // namespace sparsevit::train
