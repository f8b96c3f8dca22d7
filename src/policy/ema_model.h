// Diffusion Policy's EMAModel (model/diffusion/ema_model.py): an exponential moving average of
// a model's weights with a warm-up decay
//   decay(step) = clamp(1 - (1 + s / inv_gamma)^-power, min_value, max_value),
//   s = max(0, step - update_after_step - 1), decay 0 while s <= 0,
// evaluated at the number of step() calls before the current one. Defaults are Diffusion
// Policy's training configs (power 0.75; the class's own default is 2/3).
// Parameters that require grad are averaged, the others are copied, as the original does.
// Buffers are copied too (the original keeps its deep copy's buffers; copying keeps running
// statistics and fixed tables current).
#pragma once

#include <ATen/ATen.h>
#include <torch/nn/module.h>

#include <string>
#include <utility>
#include <vector>

namespace sparsevit::policy {

struct EmaOptions {
  int64_t update_after_step = 0;
  double inv_gamma = 1.0;
  double power = 0.75;
  double min_value = 0.0;
  double max_value = 0.9999;
};

class EMAModel {
 public:
  // Starts from a copy of `model`'s parameters and buffers.
  explicit EMAModel(const torch::nn::Module& model, EmaOptions options = {});

  // The decay the step() after `optimization_step` earlier steps uses.
  double decay_at(int64_t optimization_step) const;
  // Folds `model` (same parameter names and shapes as at construction) into the average.
  void step(const torch::nn::Module& model);
  // Writes the averaged parameters and buffers into `model`.
  void copy_to(torch::nn::Module& model) const;

  double decay() const { return decay_; }  // the decay of the last step() (0 before any)
  int64_t optimization_step() const { return optimization_step_; }
  // The averaged tensor of a parameter or buffer by name; throws if there is none.
  const at::Tensor& averaged(const std::string& name) const;

 private:
  struct Entry {
    std::string name;
    at::Tensor value;
    bool averaged;  // a parameter that requires grad
  };
  EmaOptions options_;
  std::vector<Entry> entries_;
  double decay_ = 0.0;
  int64_t optimization_step_ = 0;
};

}  // namespace sparsevit::policy
