// A module's state as an ordered list of (name, tensor): named_parameters() then
// named_buffers(), recursive, with timm's dotted names. EMA and checkpoints share it, along with
// its archive encoding and the strict name/shape check used when state is copied back.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/serialize/archive.h>

namespace sparsevit::weights {

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

// Handles (not copies) of every parameter, then every buffer, of `module`.
NamedTensors named_state(const torch::nn::Module& module);

// Detached deep copies of `tensors`.
NamedTensors clone_named(const NamedTensors& tensors);

// "[3, 64, 64]"
std::string shape_string(const at::Tensor& tensor);

// `source` reordered to `target`'s names. Both must hold the same names with the same shapes;
// otherwise throws RuntimeError (one line starting with `context`, see copy_named_into).
NamedTensors align_named(const NamedTensors& source, const NamedTensors& target, const std::string& context);

// Copies `source` into `target` by name, in place and without autograd. Both must hold the same
// names with the same shapes (dtype and device may differ); otherwise throws RuntimeError with one
// line starting with `context`, e.g. "checkpoint run/ck.pt: parameter blocks.0.attn.qkv.weight
// has shape [96, 32], model expects [192, 64]". Nothing is copied unless everything matches.
void copy_named_into(const NamedTensors& source, const NamedTensors& target, const std::string& context);

// Archive encoding: "names" (a list of strings) and tensor i under key "t<i>".
void write_named(torch::serialize::OutputArchive& archive, const NamedTensors& tensors);
// Throws RuntimeError (prefixed with `context`) when the encoding is missing or incomplete.
NamedTensors read_named(torch::serialize::InputArchive& archive, const std::string& context);

}  // namespace sparsevit::weights
