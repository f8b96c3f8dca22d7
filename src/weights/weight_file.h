// One entry point for weight files: safetensors, torch.save .pth, or a sparsevit checkpoint,
// told apart by their first bytes.
#pragma once

#include <string>

#include "train/named_tensors.h"

namespace sparsevit::weights {

enum class WeightFormat { safetensors, pth, checkpoint };

// By magic bytes: "PK\3\4" -> pth, "SVCKPT01" -> checkpoint, a plausible 8-byte header length
// followed by '{' -> safetensors. RuntimeError naming the file and the three formats otherwise.
WeightFormat detect_weight_format(const std::string& path);
// "safetensors" | "pth" (UsageError otherwise).
WeightFormat parse_weight_format_name(const std::string& name);

// The file's tensors by name (a .pth's state dict as state_dict_from_pth finds it; a
// checkpoint's model tensors).
train::NamedTensors read_weight_file(const std::string& path);
// safetensors or pth, atomically.
void write_weight_file(const std::string& path, const train::NamedTensors& tensors, WeightFormat format);

}  // namespace sparsevit::weights
