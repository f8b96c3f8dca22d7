// The attention module interface every backend implements (timm's Attention): a dense,
// trainable qkv projection and output projection around a backend-specific score step.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>

#include <array>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "attention/shared_attention_parameters.h"
#include "config/attention_spec.h"
#include "patterns/pattern.h"
#include "util/attention_geometry.h"

namespace sparsevit::attention {

// What one layer's attention module is built from: the model's attention geometry (embed_dim
// = num_heads * head_dim; backends built for one sequence read num_tokens: linformer's E, F,
// imhsa's grid; 0 tokens = unknown, and those refuse to build), the layer's index, and timm's options.
struct LayerOptions {
  AttentionGeometry geometry;
  int64_t layer = 0;  // 0-based; seeds per-layer randomness (performer, reformer)
  bool qkv_bias = true;
  double attn_drop = 0.0;
  double proj_drop = 0.0;
  // Parameters every layer of the model shares (linformer `share: layerwise`). The model owns
  // it and registers it once; nullptr (a module built alone) keeps them in the module itself.
  std::shared_ptr<SharedAttentionParameters> shared;
};

// forward(x [B, N, C]) -> [B, N, C]. Parameters `qkv` and `proj` as in timm.
class AttentionModule : public torch::nn::Module {
 public:
  virtual at::Tensor forward(const at::Tensor& x) = 0;
  // The kernel that forward runs: "dense", "masked" or "sparse" (for reports and logs).
  virtual std::string kernel_name() const = 0;
  // Pairs computed per head per sample in forward (N^2 when dense): feeds the FLOP reports.
  virtual double computed_pairs_per_head(int64_t num_tokens) const = 0;
  // The layer's static pattern as the kernel runs it (nullopt: dense, dynamic or no pattern).
  virtual std::optional<patterns::Pattern> static_pattern() const { return std::nullopt; }
  // Training progress in [0, 1] (step / total steps): backends with a scheduled budget (top-k's
  // k_start -> k_end) follow it; the trainer calls it on every module each iteration.
  virtual void set_progress(double progress) {}

  // Analysis (static-pruning calibration, attention maps, head diversity), on the layer's
  // normalised input x [B, N, C]. Backends that cannot provide them throw UsageError.
  // Per-head attention probabilities, dense [B, H, N, N] (zero outside the pattern).
  virtual at::Tensor attention_probs(const at::Tensor& x);
  // Per-head outputs before the output projection, [B, H, N, D].
  virtual at::Tensor head_outputs(const at::Tensor& x);
};

// The shared part of every backend: the dense qkv projection into heads and the output
// projection back (timm's parameter names `qkv` and `proj`).
class QkvAttention : public AttentionModule {
 protected:
  explicit QkvAttention(const LayerOptions& options);
  // x [B, N, C] -> q, k, v, each [B, H, N, D].
  std::array<at::Tensor, 3> project_qkv(const at::Tensor& x);
  // heads [B, H, N, D] -> [B, N, C] through `proj`.
  at::Tensor project_out(const at::Tensor& heads);
  // The layer's geometry for a sequence of `num_tokens` tokens (what the cost functions take).
  AttentionGeometry with_tokens(int64_t num_tokens) const {
    AttentionGeometry g = geometry_;
    g.num_tokens = num_tokens;
    return g;
  }

  AttentionGeometry geometry_;  // num_tokens: the length the module was built for (0: any)
  int64_t layer_;
  double scale_;  // 1 / sqrt(head_dim)
  torch::nn::Linear qkv_{nullptr};
  torch::nn::Linear proj_{nullptr};
};

// Builds the module for one layer from the spec; `layer_pattern` is that layer's static
// pattern (nullopt for dense layers and dynamic masks).
std::shared_ptr<AttentionModule> make_attention(const config::AttentionSpec& spec, const LayerOptions& options,
                                                std::optional<patterns::Pattern> layer_pattern);

// The backends that have a factory: the names of config::attention_backends(), in its order.
std::vector<std::string> attention_backend_names();
// Every backend of config::attention_backends() has a factory and every factory a table entry;
// throws std::logic_error naming the mismatch. Runs once when the program starts.
void check_backend_registry();
// The check itself, on two name lists (exposed for its test).
void check_backend_names(const std::vector<std::string>& listed, const std::vector<std::string>& with_factory);

// Density below which `kernel: auto` runs the sparse operator instead of dense masked
// attention (see docs/ops.md for the measurement behind it).
double sparse_kernel_density_threshold();

}  // namespace sparsevit::attention
