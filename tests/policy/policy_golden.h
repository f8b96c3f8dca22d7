// What the policy golden tests share: tensors from tests/golden/diffusion_policy_golden.inc and
// copying its weights into a module by parameter name (the two name sets must be equal, so a
// structural difference from the reference fails loudly).
#pragma once

#include <ATen/ATen.h>
#include <torch/nn/module.h>

#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "golden/diffusion_policy_golden.inc"

namespace sparsevit::golden::diffusion_policy {

inline at::Tensor float_tensor(const float* values, at::IntArrayRef shape) {
  return at::from_blob(const_cast<float*>(values), shape, at::kFloat).clone();
}

inline at::Tensor double_tensor(const double* values, at::IntArrayRef shape) {
  return at::from_blob(const_cast<double*>(values), shape, at::kDouble).clone();
}

// Copies every fixture tensor of `sets` into the parameter of that name; every parameter must
// get a value.
inline void load_by_name(torch::nn::Module& model, const std::vector<const std::vector<PolicyGoldenTensor>*>& sets) {
  at::NoGradGuard no_grad;
  auto params = model.named_parameters(/*recurse=*/true);
  std::set<std::string> missing;
  for (const auto& item : params) missing.insert(item.key());
  for (const auto* set : sets) {
    for (const auto& t : *set) {
      at::Tensor* p = params.find(t.name);
      if (p == nullptr) throw std::runtime_error(std::string("golden: the model has no parameter '") + t.name + "'");
      if (p->sizes() != at::IntArrayRef(t.shape))
        throw std::runtime_error(std::string("golden: parameter '") + t.name + "' has shape " + c10::str(p->sizes()) +
                                 ", the fixture " + c10::str(at::IntArrayRef(t.shape)));
      p->copy_(float_tensor(t.values, t.shape));
      missing.erase(t.name);
    }
  }
  if (!missing.empty()) throw std::runtime_error("golden: no fixture value for parameter '" + *missing.begin() + "'");
}

// What the float32 modules may differ from the float64 references, in max_relative_error.
inline constexpr double kTolerance = 2e-5;

// max |actual - expected| / max(1, |expected|).
inline double max_relative_error(const at::Tensor& actual, const at::Tensor& expected) {
  const at::Tensor a = actual.to(at::kDouble), e = expected.to(at::kDouble);
  return ((a - e).abs() / e.abs().clamp_min(1.0)).max().item<double>();
}

}  // namespace sparsevit::golden::diffusion_policy
