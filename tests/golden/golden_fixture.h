// What the golden tests share: the types the generated fixtures (tests/golden/*.inc, written by
// the Python references next to them) fill in, and the helpers that build the tiny ViT those
// fixtures describe and copy the fixture's weights into it by parameter name.
#pragma once

#include <ATen/ATen.h>
#include <torch/nn/module.h>

#include <cstdint>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "config/attention_spec.h"
#include "models/vision_transformer.h"

namespace sparsevit::golden {

// A named float32 tensor of a fixture (C order).
struct GoldenTensor {
  const char* name;
  std::vector<int64_t> shape;
  const float* values;
};

struct TinyVitGeometry {
  int64_t img_size, patch_size, in_chans, embed_dim, depth, num_heads, mlp_ratio, num_classes;
};

// One model of vit_forward_golden.inc: its attention config and the reference's float64
// logits [batch, classes] and losses for kForwardImages / kForwardLabels.
struct VitForwardCase {
  const char* name;
  const char* attention_yaml;
  const double* logits;
  double cross_entropy;
  double smoothed_cross_entropy;
};

// The recipe of training_trajectory_golden.inc (make_training_trajectory.py states the formulas).
struct GoldenTrainingRecipe {
  double lr, min_lr, warmup_epochs;
  int64_t epochs, iters_per_epoch, batch_size;
  double weight_decay, opt_eps, beta1, beta2, smoothing;
  uint64_t data_seed;
};

// Per synthetic batch: the sum of its pixels and of its labels (the C++ generator must agree).
struct SyntheticBatchSums {
  double pixel_sum;
  int64_t label_sum;
};

// One model trained by training_trajectory_golden.inc: the reference's loss of every step and
// its logits for kForwardImageValues after the last step.
struct TrajectoryCase {
  const char* name;
  const char* attention_yaml;
  const double* losses;  // epochs * iters_per_epoch
  const double* final_logits;  // [batch of kForwardImageValues, classes]
};

inline int64_t numel_of(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

// A copy of `values` as a tensor of `shape` in `dtype` (float32 -> float64 is exact).
inline at::Tensor tensor_from(const float* values, const std::vector<int64_t>& shape, at::ScalarType dtype) {
  return at::from_blob(const_cast<float*>(values), shape, at::kFloat).to(dtype, /*non_blocking=*/false, /*copy=*/true);
}

inline at::Tensor tensor_from(const double* values, const std::vector<int64_t>& shape) {
  return at::from_blob(const_cast<double*>(values), shape, at::kDouble).clone();
}

inline models::VitConfig tiny_vit_config(const TinyVitGeometry& g, const std::string& attention_yaml) {
  models::VitConfig c;
  c.img_size = g.img_size;
  c.patch_size = g.patch_size;
  c.in_chans = g.in_chans;
  c.embed_dim = g.embed_dim;
  c.depth = g.depth;
  c.num_heads = g.num_heads;
  c.mlp_ratio = static_cast<double>(g.mlp_ratio);
  c.num_classes = g.num_classes;
  c.attention = config::parse_attention_spec(attention_yaml, "golden.yaml");
  return c;
}

// Casts every parameter to `dtype` in place. Unlike Module::to(dtype) it leaves the buffers
// alone: the attention's int32 pattern (row_ptr, col_idx) must stay integer.
inline void cast_parameters(torch::nn::Module& model, at::ScalarType dtype) {
  at::NoGradGuard no_grad;
  for (auto& p : model.parameters()) p.set_data(p.to(dtype));
}

// Casts every floating-point buffer (BatchNorm's running statistics) to `dtype` in place; the
// integer ones (the attention's patterns, BatchNorm's num_batches_tracked) stay as they are.
inline void cast_floating_buffers(torch::nn::Module& model, at::ScalarType dtype) {
  at::NoGradGuard no_grad;
  for (auto& b : model.buffers())
    if (b.is_floating_point()) b.set_data(b.to(dtype));
}

// BatchNorm's state: learned like the parameters, so a fixture of a model with BatchNorm holds it.
inline bool is_batch_norm_statistic(const std::string& name) {
  for (const std::string suffix : {".running_mean", ".running_var", ".num_batches_tracked"})
    if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) return true;
  return false;
}

// Copies each fixture tensor into the model's parameter of the same name, or where the model has
// no such parameter into its buffer of that name (BatchNorm statistics), keeping the target's
// dtype. The parameter names and the fixture's must match exactly: a parameter the fixture lacks
// (or a fixture tensor the model lacks) means the model's structure differs from the reference.
// Of the buffers, the BatchNorm statistics must all be in the fixture; the others (the attention's
// patterns, built from the config) are never loaded.
// `computed`: parameters the model computes itself (MAE's fixed sin-cos tables).
inline void load_parameters_by_name(torch::nn::Module& model, const std::vector<GoldenTensor>& tensors,
                                    const std::set<std::string>& computed = {}) {
  at::NoGradGuard no_grad;
  auto params = model.named_parameters(/*recurse=*/true);
  auto buffers = model.named_buffers(/*recurse=*/true);
  std::set<std::string> unused;
  for (const auto& item : params)
    if (!computed.count(item.key())) unused.insert(item.key());
  for (const auto& item : buffers)
    if (is_batch_norm_statistic(item.key())) unused.insert(item.key());
  for (const auto& t : tensors) {
    at::Tensor* p = params.find(t.name);
    if (p == nullptr && is_batch_norm_statistic(t.name)) p = buffers.find(t.name);
    if (p == nullptr) throw std::runtime_error(std::string("golden: the model has no parameter '") + t.name + "'");
    if (p->sizes() != at::IntArrayRef(t.shape))
      throw std::runtime_error(std::string("golden: parameter '") + t.name + "' has shape " + c10::str(p->sizes()) +
                               ", the fixture " + c10::str(at::IntArrayRef(t.shape)));
    p->copy_(tensor_from(t.values, t.shape, p->scalar_type()));
    unused.erase(t.name);
  }
  if (!unused.empty())
    throw std::runtime_error("golden: the fixture has no value for parameter '" + *unused.begin() + "'");
}

// max |actual - expected| / (atol + rtol |expected|): at most 1 where allclose(atol, rtol) holds.
inline double worst_error_ratio(const at::Tensor& actual, const at::Tensor& expected, double atol, double rtol) {
  return ((actual - expected).abs() / (atol + rtol * expected.abs())).max().item<double>();
}

}  // namespace sparsevit::golden
