#include "models/model_shapes.h"

#include "util/did_you_mean.h"
#include "util/errors.h"

namespace sparsevit::models {

const std::vector<ModelShape>& model_shapes() {
  // timm's names and shapes; the small-image variants keep N = 197 or a CIFAR-sized grid.
  static const std::vector<ModelShape> shapes = {
      {"vit_tiny_patch16_224", 224, 16, 3, 192, 12, 3, 1},
      {"vit_small_patch16_224", 224, 16, 3, 384, 12, 6, 1},
      {"vit_base_patch16_224", 224, 16, 3, 768, 12, 12, 1},
      {"vit_large_patch16_224", 224, 16, 3, 1024, 24, 16, 1},
      {"vit_tiny_patch4_32", 32, 4, 3, 192, 12, 3, 1},
      {"vit_tiny_patch2_28", 28, 2, 1, 192, 12, 3, 1},
  };
  return shapes;
}

std::vector<std::string> model_names() {
  std::vector<std::string> names;
  for (const auto& s : model_shapes()) names.push_back(s.name);
  return names;
}

const ModelShape& find_model_shape(const std::string& name) {
  for (const auto& s : model_shapes())
    if (s.name == name) return s;
  throw UsageError(unknown_name_message("model", name, model_names()));
}

}  // namespace sparsevit::models
