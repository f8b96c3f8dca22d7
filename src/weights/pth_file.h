// PyTorch's torch.save files (zip format, torch >= 1.6): read through the restricted unpickler
// (nothing in the file is executed) and written through LibTorch's pickler, which Python's
// torch.load reads.
#pragma once

#include <ATen/core/ivalue.h>

#include <string>
#include <string_view>

#include "train/named_tensors.h"

namespace sparsevit::weights {

// The object a .pth file holds (dicts, lists, tuples, tensors, numbers, strings, None).
// RuntimeError "<source>: ..." for a legacy (pre-1.6) file, a broken zip, a missing data.pkl or
// storage record, a storage of the wrong size, or anything the restricted unpickler refuses.
c10::IValue parse_pth(std::string_view bytes, const std::string& source);
c10::IValue read_pth(const std::string& path);

// The state dict inside: the root when it maps names to tensors, else the first of "model"
// (MAE), "state_dict", "model_ema", "module" that does. RuntimeError naming the top-level keys
// when none does, or naming a key whose value is not a tensor.
train::NamedTensors state_dict_from_pth(const c10::IValue& root, const std::string& source);

// torch.save-compatible zip of {name: tensor} (contiguous CPU copies), written atomically.
void write_pth(const std::string& path, const train::NamedTensors& tensors);

}  // namespace sparsevit::weights
