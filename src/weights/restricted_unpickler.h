// A pickle reader that executes nothing: the opcodes torch.save emits (protocol 2, plus the
// protocol-4 framing ones) and an allow-list of globals — collections.OrderedDict,
// torch._utils._rebuild_tensor_v2 / _rebuild_parameter(_with_state), the torch.*Storage types and
// torch.jit._pickle.restore_type_tag (LibTorch's type tags).
// Anything else (argparse.Namespace, builtins, numpy scalars, a __reduce__ calling os.system) is
// refused with its name. The result holds only dicts, lists, tuples, tensors, numbers, strings,
// booleans and None.
#pragma once

#include <ATen/core/ivalue.h>

#include <functional>
#include <string>
#include <string_view>

namespace sparsevit::weights {

// Returns storage `key` (`numel` elements of `dtype`) as a 1-d CPU tensor; throws on a bad key.
using StorageLoader = std::function<at::Tensor(const std::string& key, at::ScalarType dtype, int64_t numel)>;

// Unpickles `pickle` (data.pkl of a torch.save zip). RuntimeError "<source>: ..." on anything not
// allowed or malformed (truncated data, stack underflow, bad memo index, nesting over 1000,
// tensor views outside their storage).
c10::IValue restricted_unpickle(std::string_view pickle, const StorageLoader& storages, const std::string& source);

}  // namespace sparsevit::weights
