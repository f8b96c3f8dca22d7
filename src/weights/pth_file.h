// torch.save files (.pth / .pt, the zip format of torch >= 1.6): `<archive>/data.pkl` holds the
// pickled object, `<archive>/data/<key>` the raw bytes of each storage. Read with LibTorch's zip
// reader and our restricted unpickler (weights/restricted_unpickler.h), so loading a file runs no
// code from it: objects other than tensors, dicts, lists, tuples, numbers and strings are refused.
// Written the way Python's torch.save writes a dict of tensors, so torch.load reads it with
// weights_only=True (torch 2.6's default) as well.
#pragma once

#include <string>
#include <string_view>

#include <ATen/core/ivalue.h>

#include "weights/named_tensors.h"

namespace sparsevit::weights {

// The unpickled object of a whole .pth file held in `bytes`; errors are RuntimeError("<source>: why")
// (legacy pre-1.6 files, foreign or damaged archives, refused globals, bad storages).
c10::IValue parse_pth(std::string_view bytes, const std::string& source);
c10::IValue read_pth(const std::string& path);

// The state dict inside an unpickled .pth: the root when it is a dict of string -> tensor, else the
// first of root["model"] (MAE), ["state_dict"], ["model_ema"], ["module"], ["net"] that is one.
// RuntimeError naming the top-level keys when none is; naming the key when the chosen dict maps a
// name to something other than a tensor.
weights::NamedTensors state_dict_from_pth(const c10::IValue& root, const std::string& path);

// A dict of name -> tensor (made contiguous and moved to the CPU), atomically. UsageError on a
// duplicate name or an undefined tensor.
void write_pth(const std::string& path, const weights::NamedTensors& tensors);

}  // namespace sparsevit::weights
