// A pickle reader for weight files that executes nothing: it knows the opcodes torch.save emits
// (protocol 2, plus protocol 4's framing and short strings) and a fixed list of globals —
// collections.OrderedDict, torch._utils._rebuild_tensor_v2 / _rebuild_parameter(_with_state),
// torch.jit._pickle.restore_type_tag (C++ torch::pickle_save's type tags) and the torch.*Storage
// types for persistent ids. Any other global (argparse.Namespace, builtins.print, numpy ...) or
// opcode is refused with a RuntimeError naming it. LibTorch's own pickle_load cannot be used: it
// asserts on a plain state_dict() (an OrderedDict whose _metadata is set through BUILD).
//
// The result is a tree of GenericDict (string or int keys), GenericList, Tuple, Tensor (contiguous
// CPU, owning its memory), int, double, bool, string (bytes come back as strings) and None.
// Limits against hostile input: nesting (containers, tuples, marks) at most kMaxPickleDepth, at most
// kMaxPickleStack stack entries, every pop and memo index checked, a list or dict may not change
// once it is inside another (so no cycles), tensors must lie inside their storage.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <utility>

#include <ATen/core/ivalue.h>
#include <c10/core/Allocator.h>

namespace sparsevit::weights {

constexpr int kMaxPickleDepth = 1000;
constexpr size_t kMaxPickleStack = size_t{1} << 20;

// Returns the bytes of storage record `key` (the archive's data/<key>); throws RuntimeError when
// there is none.
using StorageRecordLoader = std::function<std::pair<at::DataPtr, size_t>(const std::string& key)>;

// Unpickles `pickle` (a data.pkl); errors are RuntimeError("<source>: why").
c10::IValue restricted_unpickle(std::string_view pickle, const StorageRecordLoader& load_record,
                                const std::string& source);

}  // namespace sparsevit::weights
