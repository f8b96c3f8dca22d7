#include "weights/named_tensors.h"

#include <algorithm>
#include <unordered_map>

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include "util/errors.h"

namespace sparsevit::weights {

NamedTensors named_state(const torch::nn::Module& module) {
  NamedTensors out;
  for (const auto& item : module.named_parameters(/*recurse=*/true)) out.emplace_back(item.key(), item.value());
  for (const auto& item : module.named_buffers(/*recurse=*/true)) out.emplace_back(item.key(), item.value());
  return out;
}

NamedTensors clone_named(const NamedTensors& tensors) {
  NamedTensors out;
  out.reserve(tensors.size());
  for (const auto& [name, t] : tensors) out.emplace_back(name, t.detach().clone());
  return out;
}

std::string shape_string(const at::Tensor& t) {
  std::string s = "[";
  for (int64_t i = 0; i < t.dim(); ++i) s += (i ? ", " : "") + std::to_string(t.size(i));
  return s + "]";
}

namespace {

std::string name_list(const std::vector<std::string>& names) {
  std::string s;
  const size_t shown = std::min<size_t>(names.size(), 3);
  for (size_t i = 0; i < shown; ++i) s += (i ? ", " : "") + names[i];
  if (names.size() > shown) s += " (and " + std::to_string(names.size() - shown) + " more)";
  return s;
}

}  // namespace

NamedTensors align_named(const NamedTensors& source, const NamedTensors& target, const std::string& context) {
  std::unordered_map<std::string, const at::Tensor*> by_name;
  for (const auto& [name, t] : source) by_name.emplace(name, &t);
  std::vector<std::string> missing;
  for (const auto& [name, t] : target) {
    auto it = by_name.find(name);
    if (it == by_name.end()) {
      missing.push_back(name);
      continue;
    }
    if (it->second->sizes() != t.sizes()) {
      throw RuntimeError(context + ": parameter " + name + " has shape " + shape_string(*it->second) +
                         ", model expects " + shape_string(t));
    }
  }
  if (!missing.empty()) {
    throw RuntimeError(context + ": missing " + std::to_string(missing.size()) + " of the model's tensors: " +
                       name_list(missing) + " (was it saved from a different model?)");
  }
  if (source.size() != target.size()) {
    std::unordered_map<std::string, bool> wanted;
    for (const auto& [name, t] : target) wanted.emplace(name, true);
    std::vector<std::string> extra;
    for (const auto& [name, t] : source) {
      if (!wanted.count(name)) extra.push_back(name);
    }
    throw RuntimeError(context + ": holds " + std::to_string(extra.size()) + " tensors the model does not have: " +
                       name_list(extra) + " (was it saved from a different model?)");
  }
  NamedTensors aligned;
  aligned.reserve(target.size());
  for (const auto& [name, t] : target) aligned.emplace_back(name, *by_name.at(name));
  return aligned;
}

void copy_named_into(const NamedTensors& source, const NamedTensors& target, const std::string& context) {
  const NamedTensors aligned = align_named(source, target, context);
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < target.size(); ++i) {
    at::Tensor dst = target[i].second;  // shares storage with the module's tensor
    dst.copy_(aligned[i].second);
  }
}

void write_named(torch::serialize::OutputArchive& archive, const NamedTensors& tensors) {
  c10::List<std::string> names;
  for (size_t i = 0; i < tensors.size(); ++i) {
    names.push_back(tensors[i].first);
    archive.write("t" + std::to_string(i), tensors[i].second.detach(), /*is_buffer=*/true);
  }
  archive.write("names", c10::IValue(names));
}

NamedTensors read_named(torch::serialize::InputArchive& archive, const std::string& context) {
  c10::IValue names_value;
  if (!archive.try_read("names", names_value) || !names_value.isList()) {
    throw RuntimeError(context + ": no tensor name list (not a sparsevit checkpoint, or a corrupt one)");
  }
  NamedTensors out;
  const c10::List<c10::IValue> list = names_value.toList();
  out.reserve(list.size());
  for (size_t i = 0; i < list.size(); ++i) {
    const c10::IValue name = list.get(i);
    if (!name.isString()) throw RuntimeError(context + ": tensor name " + std::to_string(i) + " is not a string");
    at::Tensor t;
    if (!archive.try_read("t" + std::to_string(i), t, /*is_buffer=*/true)) {
      throw RuntimeError(context + ": tensor " + name.toStringRef() + " is missing");
    }
    out.emplace_back(name.toStringRef(), t);
  }
  return out;
}

}  // namespace sparsevit::weights
