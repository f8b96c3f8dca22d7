// The values of VitConfig::stem, torch-free so that the training configuration's `--stem` field
// lists the same choices the model accepts (one list for both).
#pragma once

#include <string>
#include <vector>

namespace sparsevit::models {

// "patch": timm's patchify Conv2d; "conv": the early-convolution stem (models/conv_stem.h).
inline const std::vector<std::string>& stem_names() {
  static const std::vector<std::string> names = {"patch", "conv"};
  return names;
}

}  // namespace sparsevit::models
