// Model registry with timm names: create_model("vit_base_patch16_224", options) for image ViTs,
// create_classifier(name, options) for any registered model (TimeSformers too).
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "models/model_shapes.h"
#include "models/vision_transformer.h"

namespace sparsevit::models {

struct ModelOptions {
  std::optional<int64_t> num_classes;  // default: the shape's (1000)
  std::optional<int64_t> in_chans;     // default: the shape's
  std::optional<int64_t> img_size;     // default: the shape's (timm's img_size=); a multiple of the patch
  // Shape overrides, so the paper's other shapes (ViT-T/8, other depths) need no C++ edit.
  std::optional<int64_t> patch_size, embed_dim, depth, num_heads;
  bool global_pool = false;  // mean of patch tokens + fc_norm (MAE finetuning) instead of the class token
  std::string stem = "patch";  // the patch embedding, VitConfig::stem: "patch" | "conv" (early convolutions)
  double drop_rate = 0.0;
  double drop_path_rate = 0.0;
  config::AttentionSpec attention;  // default-constructed: dense (video models: the spatial attention)
  // Video models (TimeSformer).
  std::optional<int64_t> num_frames;                   // default: the shape's
  std::string attention_type = "divided_space_time";   // | space_only | joint_space_time
  config::AttentionSpec temporal_attention;            // divided_space_time's temporal attention (dense)
};

VitConfig vit_config(const ModelShape& shape, const ModelOptions& options);
// The image ViT `name`. Throws UsageError for an unknown name ("did you mean") or a video model.
std::shared_ptr<VisionTransformer> create_model(const std::string& name, const ModelOptions& options);
// Frames per clip a video model gets from `options` (0 for image models). UsageError below 1.
int64_t num_frames(const ModelShape& shape, const ModelOptions& options);
// Any registered classifier: an image ViT, or a TimeSformer for the video models.
std::shared_ptr<Classifier> create_classifier(const std::string& name, const ModelOptions& options);

}  // namespace sparsevit::models
