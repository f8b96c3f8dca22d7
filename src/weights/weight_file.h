// One entry point for weights, whatever the file: safetensors (timm), torch.save .pth (MAE, DeiT,
// torchvision) or sparsevit's own checkpoint, told apart by their first bytes, not their names.
#pragma once

#include <map>
#include <string>

#include "weights/named_tensors.h"

namespace sparsevit::weights {

enum class WeightFormat { safetensors, pth, checkpoint };

// "safetensors", "pth", "checkpoint".
const char* weight_format_name(WeightFormat format);

// By magic bytes: "PK\x03\x04" (zip) -> pth, "SVCKPT01" -> checkpoint, an 8-byte header length
// that fits the file followed by '{' -> safetensors. RuntimeError otherwise (naming the three formats,
// and the legacy pre-1.6 torch.save format when that is what it is).
WeightFormat detect_weight_format(const std::string& path);

// The model's tensors from any of the three formats (a .pth's state dict is found as
// state_dict_from_pth describes; a checkpoint gives CheckpointFile::model_tensors()).
weights::NamedTensors read_weight_file(const std::string& path);

// "safetensors" or "pth" (case-insensitive); UsageError otherwise. Checkpoints are written by
// train::save_checkpoint, which needs more than tensors.
WeightFormat parse_weight_format_name(const std::string& name);

// UsageError for WeightFormat::checkpoint. `metadata` goes to safetensors' "__metadata__" (a .pth
// holds tensors only, as timm's state dicts do).
void write_weight_file(const std::string& path, const weights::NamedTensors& tensors, WeightFormat format,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace sparsevit::weights
