// Puts a module in eval mode and restores its training mode when the scope ends (the probe and
// the validation loss run between training epochs).
#pragma once

#include <torch/nn/module.h>

namespace sparsevit::policy {

class EvalModeScope {
 public:
  explicit EvalModeScope(torch::nn::Module& m) : module_(m), was_training_(m.is_training()) { m.eval(); }
  ~EvalModeScope() { module_.train(was_training_); }
  EvalModeScope(const EvalModeScope&) = delete;
  EvalModeScope& operator=(const EvalModeScope&) = delete;

 private:
  torch::nn::Module& module_;
  bool was_training_;
};

}  // namespace sparsevit::policy
