// Parameters one model shares across the attention modules of all its layers (linformer
// `share: layerwise`: a single E for keys and values, every head and every layer). Modules are
// built layer by layer, so the model hands every layer the same holder and registers it once
// (as `attn_shared`): the state dict, the optimizer and checkpoints see each tensor once, and
// every layer computes with that one tensor (checkpoint loads copy into it in place).
#pragma once

#include <torch/nn/module.h>

#include <functional>
#include <string>

namespace sparsevit::attention {

class SharedAttentionParameters : public torch::nn::Module {
 public:
  // The parameter `name`, made by `init` on the first request; later requests get the same
  // tensor and must ask for the same shape (a mismatch is a UsageError).
  at::Tensor get_or_create(const std::string& name, c10::IntArrayRef sizes, const std::function<at::Tensor()>& init);
  bool empty() const { return parameters(/*recurse=*/false).empty(); }
};

}  // namespace sparsevit::attention
