// torch.ops.sparsevit.read_weight_file(path) -> (names, tensors, metadata JSON): the project's
// readers of safetensors, torch.save .pth and sparsevit checkpoints (src/weights/, fuzzed), for
// the Python package's sparsevit.models.load. Safetensors' "__metadata__" comes back as a JSON
// object of strings ("{}" for the other formats).
#include <ATen/ATen.h>
#include <torch/library.h>

#include <nlohmann/json.hpp>

#include <string>
#include <tuple>
#include <vector>

#include "weights/safetensors_file.h"
#include "weights/weight_file.h"

namespace sparsevit {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::tuple<std::vector<std::string>, std::vector<at::Tensor>, std::string> read_weight_file_op(const std::string& path) {
  weights::NamedTensors tensors;
  nlohmann::json metadata = nlohmann::json::object();
  if (ends_with(path, ".safetensors")) {
    weights::SafetensorsContents contents = weights::read_safetensors(path);
    tensors = std::move(contents.tensors);
    for (const auto& [key, value] : contents.metadata) metadata[key] = value;
  } else {
    tensors = weights::read_weight_file(path);
  }
  std::vector<std::string> names;
  std::vector<at::Tensor> values;
  for (auto& [name, tensor] : tensors) {
    names.push_back(name);
    values.push_back(tensor);
  }
  return {names, values, metadata.dump()};
}

}  // namespace
}  // namespace sparsevit

TORCH_LIBRARY_FRAGMENT(sparsevit, m) {
  m.def("read_weight_file(str path) -> (str[] names, Tensor[] tensors, str metadata)",
        &sparsevit::read_weight_file_op);
}
