// Shapes of the registered models by timm name (ViTs, and TimeSformers for video): what the
// attention reports need, without LibTorch.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "util/attention_geometry.h"

namespace sparsevit::models {

struct ModelShape {
  std::string name;
  int32_t image_size = 224;
  int32_t patch_size = 16;
  int32_t in_chans = 3;
  int32_t embed_dim = 768;
  int32_t depth = 12;
  int32_t num_heads = 12;
  int32_t num_prefix_tokens = 1;  // the class token
  int32_t num_classes = 1000;
  std::string summary;
  int32_t num_frames = 0;  // video models (TimeSformer): frames per clip; 0 for image models

  bool is_video() const { return num_frames > 0; }

  int32_t grid() const { return image_size / patch_size; }
  int32_t num_patches() const { return grid() * grid(); }
  int32_t num_tokens() const { return num_patches() + num_prefix_tokens; }
  int32_t head_dim() const { return embed_dim / num_heads; }
  AttentionGeometry attention_geometry() const {
    return AttentionGeometry{num_tokens(), num_prefix_tokens, num_heads, head_dim(), depth};
  }
};

const std::vector<ModelShape>& model_shapes();
std::vector<std::string> model_names();
// Other names of registered shapes (MAE's `vit_base_patch16`, ...): alias -> timm name.
const std::vector<std::pair<std::string, std::string>>& model_aliases();
// By timm name or alias. Throws UsageError "unknown model 'x' (did you mean 'y'?)".
const ModelShape& find_model_shape(const std::string& name);

}  // namespace sparsevit::models
