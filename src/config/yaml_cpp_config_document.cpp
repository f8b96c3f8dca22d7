// read_config_document for the CLI build: yaml-cpp's nodes into the format-neutral tree, with
// yaml-cpp's marks as "source:line:col" (1-based), the locations the CLI has always printed.
#include <yaml-cpp/yaml.h>

#include <string>
#include <utility>
#include <vector>

#include "config/config_document.h"
#include "util/errors.h"

namespace sparsevit::config {
namespace {

std::string where(const std::string& source, const YAML::Mark& mark) {
  if (mark.is_null()) return source;
  return source + ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1);
}

class YamlCppReader {
 public:
  explicit YamlCppReader(const std::string& source) : source_(source) {}

  ConfigNode read(const YAML::Node& node, int depth) {
    std::string location = where(source_, node.Mark());
    if (depth > ConfigNode::kMaxDepth)
      throw UsageError(location + ": invalid YAML: nested more than " + std::to_string(ConfigNode::kMaxDepth) +
                       " levels deep (a recursive alias?)");
    if (++nodes_ > ConfigNode::kMaxNodes)
      throw UsageError(location + ": invalid YAML: more than " + std::to_string(ConfigNode::kMaxNodes) +
                       " nodes (aliases expanding?)");
    switch (node.Type()) {
      case YAML::NodeType::Scalar:
        return ConfigNode::scalar(node.Scalar(), std::move(location));
      case YAML::NodeType::Sequence: {
        std::vector<ConfigNode> items;
        for (const auto& item : node) items.push_back(read(item, depth + 1));
        return ConfigNode::sequence(std::move(items), std::move(location));
      }
      case YAML::NodeType::Map: {
        std::vector<ConfigNode::Entry> entries;
        for (const auto& item : node) {
          ConfigNode key = read(item.first, depth + 1);
          entries.emplace_back(std::move(key), read(item.second, depth + 1));
        }
        return ConfigNode::map(std::move(entries), std::move(location));
      }
      case YAML::NodeType::Null:
      case YAML::NodeType::Undefined:
        break;
    }
    return ConfigNode::null(std::move(location));
  }

 private:
  const std::string& source_;
  long nodes_ = 0;
};

}  // namespace

ConfigNode read_config_document(const std::string& text, const std::string& source) {
  try {
    return YamlCppReader(source).read(YAML::Load(text), 0);
  } catch (const YAML::Exception& e) {
    throw UsageError(where(source, e.mark) + ": invalid YAML: " + e.msg);
  }
}

}  // namespace sparsevit::config
