// Model registry with timm names: create_model("vit_base_patch16_224", options).
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
  double drop_rate = 0.0;
  double drop_path_rate = 0.0;
  config::AttentionSpec attention;  // default-constructed: dense
};

VitConfig vit_config(const ModelShape& shape, const ModelOptions& options);
// Throws UsageError for an unknown name ("did you mean").
std::shared_ptr<VisionTransformer> create_model(const std::string& name, const ModelOptions& options);

}  // namespace sparsevit::models
