// What training, evaluation and prediction need of a model, image or video: logits, the
// attention patterns it runs, their cost, and the training-progress hook. The ViT
// (models/vision_transformer.h) and the TimeSformer (models/timesformer.h) implement it.
#pragma once

#include <torch/nn/module.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "patterns/pattern.h"

namespace sparsevit::models {

struct VitConfig;

class Classifier : public torch::nn::Module {
 public:
  // Images [B, C, H, W] (video models: clips [B, C, T, H, W]) -> logits [B, num_classes].
  virtual at::Tensor forward(const at::Tensor& x) = 0;
  // The ViT shape (for a video model: of one frame; its `attention` is the attention config).
  virtual const VitConfig& config() const = 0;
  // Frames per clip of a video model; 0 for image models.
  virtual int64_t num_frames() const { return 0; }
  // The static pattern of every block's attention as the kernels run them (nullopt = dense);
  // for a video model its spatial attention, the one the attention config sets.
  virtual std::vector<std::optional<patterns::Pattern>> layer_patterns() const = 0;
  // Training progress in [0, 1] for every attention (scheduled budgets such as top-k's).
  virtual void set_training_progress(double progress) = 0;
  // Attention GFLOPs of one sample's forward as the modules compute it now (a scheduled budget
  // changes it during training).
  virtual double attention_gflops_now() const = 0;
  // The kernel the attention config's layers run: dense | masked | sparse.
  virtual std::string kernel_name() const = 0;
  // One sample's input shape: [C, H, W], or [C, T, H, W] for video.
  std::vector<int64_t> input_shape() const;
};

}  // namespace sparsevit::models
