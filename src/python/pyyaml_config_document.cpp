// read_config_document for the Python package's core, which has no yaml-cpp: PyYAML composes the
// text (yaml.compose: nodes with their tags and marks, before any conversion to Python values,
// so scalars keep their text and duplicate keys are still there for the parser to refuse) and
// the nodes become the format-neutral tree. Locations are "source:line:col" from PyYAML's marks,
// 1-based like the CLI's; messages of malformed YAML are PyYAML's own.
#include <pybind11/pybind11.h>

#include <string>
#include <utility>
#include <vector>

#include "config/config_document.h"
#include "util/errors.h"

namespace py = pybind11;

namespace sparsevit::config {
namespace {

std::string where(const std::string& source, const py::handle& mark) {
  if (mark.is_none()) return source;
  return source + ":" + std::to_string(mark.attr("line").cast<long>() + 1) + ":" +
         std::to_string(mark.attr("column").cast<long>() + 1);
}

class PyYamlReader {
 public:
  PyYamlReader(const py::module_& yaml, const std::string& source)
      : source_(source),
        scalar_(yaml.attr("nodes").attr("ScalarNode")),
        sequence_(yaml.attr("nodes").attr("SequenceNode")),
        mapping_(yaml.attr("nodes").attr("MappingNode")) {}

  ConfigNode read(const py::handle& node, int depth) {
    std::string location = where(source_, node.attr("start_mark"));
    if (depth > ConfigNode::kMaxDepth)
      throw UsageError(location + ": invalid YAML: nested more than " + std::to_string(ConfigNode::kMaxDepth) +
                       " levels deep (a recursive alias?)");
    if (++nodes_ > ConfigNode::kMaxNodes)
      throw UsageError(location + ": invalid YAML: more than " + std::to_string(ConfigNode::kMaxNodes) +
                       " nodes (aliases expanding?)");
    if (py::isinstance(node, scalar_)) {
      if (node.attr("tag").cast<std::string>() == "tag:yaml.org,2002:null") return ConfigNode::null(std::move(location));
      return ConfigNode::scalar(node.attr("value").cast<std::string>(), std::move(location));
    }
    if (py::isinstance(node, sequence_)) {
      std::vector<ConfigNode> items;
      for (const py::handle item : node.attr("value")) items.push_back(read(item, depth + 1));
      return ConfigNode::sequence(std::move(items), std::move(location));
    }
    if (py::isinstance(node, mapping_)) {
      std::vector<ConfigNode::Entry> entries;
      for (const py::handle pair : node.attr("value")) {
        const auto key_value = py::reinterpret_borrow<py::tuple>(pair);
        ConfigNode key = read(key_value[0], depth + 1);
        entries.emplace_back(std::move(key), read(key_value[1], depth + 1));
      }
      return ConfigNode::map(std::move(entries), std::move(location));
    }
    throw UsageError(location + ": invalid YAML: unexpected node " + py::str(node).cast<std::string>());
  }

 private:
  const std::string& source_;
  py::object scalar_, sequence_, mapping_;
  long nodes_ = 0;
};

py::module_ import_pyyaml() {
  try {
    return py::module_::import("yaml");
  } catch (py::error_already_set&) {
    throw RuntimeError("sparsevit reads attention configs with PyYAML, which this Python lacks "
                       "(pip install PyYAML; Debian: apt install python3-yaml)");
  }
}

}  // namespace

ConfigNode read_config_document(const std::string& text, const std::string& source) {
  // Callers may hold no GIL (LibTorch's custom-class calls release it).
  py::gil_scoped_acquire gil;
  const py::module_ yaml = import_pyyaml();
  py::object document;
  try {
    document = yaml.attr("compose")(text, py::arg("Loader") = yaml.attr("SafeLoader"));
  } catch (py::error_already_set& e) {
    if (!e.matches(yaml.attr("YAMLError"))) throw;
    const py::object error = e.value();
    const py::object mark = py::getattr(error, "problem_mark", py::none());
    const py::object problem = py::getattr(error, "problem", py::none());
    throw UsageError(where(source, mark) + ": invalid YAML: " +
                     py::str(problem.is_none() ? error : problem).cast<std::string>());
  }
  if (document.is_none()) return ConfigNode::null(source);  // an empty text
  return PyYamlReader(yaml, source).read(document, 0);
}

}  // namespace sparsevit::config
