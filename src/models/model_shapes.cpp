#include "models/model_shapes.h"

#include "util/did_you_mean.h"
#include "util/errors.h"

namespace sparsevit::models {

const std::vector<ModelShape>& model_shapes() {
  // timm's names and shapes; the small-image variants keep N = 197 or a CIFAR-sized grid.
  static const std::vector<ModelShape> shapes = {
      {"vit_tiny_patch16_224", 224, 16, 3, 192, 12, 3, 1, 1000, "ViT-Ti/16 (timm)"},
      {"vit_small_patch16_224", 224, 16, 3, 384, 12, 6, 1, 1000, "ViT-S/16 (timm)"},
      {"vit_base_patch16_224", 224, 16, 3, 768, 12, 12, 1, 1000, "ViT-B/16 (timm)"},
      {"vit_large_patch16_224", 224, 16, 3, 1024, 24, 16, 1, 1000, "ViT-L/16 (timm)"},
      {"vit_huge_patch14_224", 224, 14, 3, 1280, 32, 16, 1, 1000, "ViT-H/14 (timm, MAE)"},
      {"vit_tiny_patch4_32", 32, 4, 3, 192, 12, 3, 1, 10, "ViT-Ti for 32x32 images (CIFAR): 64 patches"},
      {"vit_tiny_patch2_28", 28, 2, 1, 192, 12, 3, 1, 10, "ViT-Ti for 28x28 images: 196 patches + class = N 197"},
      {"vit_nano_patch2_28", 28, 2, 1, 64, 4, 4, 1, 10, "4-layer, 4-head, dim-64 ViT for 28x28 images (N 197)"},
      {"vit_nano_patch4_28", 28, 4, 1, 64, 6, 4, 1, 10, "6-layer, 4-head, dim-64 ViT for 28x28 images (N 50): the CPU quickstart"},
      // Observation encoders of the diffusion policy (docs/policy.md): patch 8 on 96x96 camera
      // images as the Fibottention paper's ViT-B/8 Crossway Diffusion, and CPU-sized variants.
      {"vit_base_patch8_96", 96, 8, 3, 768, 12, 12, 1, 0, "ViT-B/8 on 96x96 observations (N 145): the paper's policy encoder"},
      {"vit_tiny_patch8_96", 96, 8, 3, 192, 12, 3, 1, 0, "ViT-Ti/8 on 96x96 observations (N 145)"},
      {"vit_nano_patch8_64", 64, 8, 3, 64, 4, 4, 1, 0, "4-layer, 4-head, dim-64 ViT/8 on 64x64 observations (N 65)"},
      {"vit_nano_patch8_48", 48, 8, 3, 64, 4, 4, 1, 0, "4-layer, 4-head, dim-64 ViT/8 on 48x48 observations (N 37): the CPU policy demo"},
      // TimeSformer (Bertasius et al. 2021): the shape of one frame, and the frames per clip.
      {"timesformer_base_patch16_224", 224, 16, 3, 768, 12, 12, 1, 400, "TimeSformer-B/16, 8 frames (Kinetics-400)", 8},
      {"timesformer_small_patch16_224", 224, 16, 3, 384, 12, 6, 1, 400, "TimeSformer with ViT-S/16 frames, 8 frames", 8},
      {"timesformer_tiny_patch16_224", 224, 16, 3, 192, 12, 3, 1, 400, "TimeSformer with ViT-Ti/16 frames, 8 frames", 8},
      {"timesformer_nano_patch4_28", 28, 4, 1, 64, 4, 4, 1, 10,
       "4-layer, 4-head, dim-64 TimeSformer for 8 frames of 28x28 (N 50 per frame): the CPU video demo", 8},
  };
  return shapes;
}

const std::vector<std::pair<std::string, std::string>>& model_aliases() {
  // MAE's model names (models_vit.py) for the same shapes.
  static const std::vector<std::pair<std::string, std::string>> aliases = {
      {"vit_base_patch16", "vit_base_patch16_224"},
      {"vit_large_patch16", "vit_large_patch16_224"},
      {"vit_huge_patch14", "vit_huge_patch14_224"},
  };
  return aliases;
}

std::vector<std::string> model_names() {
  std::vector<std::string> names;
  for (const auto& s : model_shapes()) names.push_back(s.name);
  return names;
}

const ModelShape& find_model_shape(const std::string& name) {
  std::string canonical = name;
  for (const auto& [alias, target] : model_aliases())
    if (alias == name) canonical = target;
  for (const auto& s : model_shapes())
    if (s.name == canonical) return s;
  std::vector<std::string> known = model_names();
  for (const auto& alias : model_aliases()) known.push_back(alias.first);
  throw UsageError(unknown_name_message("model", name, known));
}

}  // namespace sparsevit::models
