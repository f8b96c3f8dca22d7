// `sparsevit export`: a checkpoint's parameters under timm's / MAE's names in a published format.
#pragma once

#include <cstdint>
#include <string>

namespace sparsevit::inference {

struct ExportSummary {
  std::string model;       // the checkpoint's model name
  int64_t tensors = 0, parameters = 0;
};

// Rebuilds the checkpoint's model (finetuned ViT or MAE pretrain model), loads it and writes its
// parameters to `output` as `format` ("safetensors" | "pth"), atomically. Buffers (sparse
// patterns) are left out: they are rebuilt from the attention config.
ExportSummary export_checkpoint(const std::string& checkpoint, const std::string& format, const std::string& output);

}  // namespace sparsevit::inference
