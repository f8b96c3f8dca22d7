#include "config/config_node.h"

namespace sparsevit::config {

ConfigNode ConfigNode::null(std::string location) { return ConfigNode(Kind::kNull, std::move(location)); }

ConfigNode ConfigNode::scalar(std::string text, std::string location) {
  ConfigNode node(Kind::kScalar, std::move(location));
  node.text_ = std::move(text);
  return node;
}

ConfigNode ConfigNode::sequence(std::vector<ConfigNode> items, std::string location) {
  ConfigNode node(Kind::kSequence, std::move(location));
  node.items_ = std::move(items);
  return node;
}

ConfigNode ConfigNode::map(std::vector<Entry> entries, std::string location) {
  ConfigNode node(Kind::kMap, std::move(location));
  node.entries_ = std::move(entries);
  return node;
}

const ConfigNode* ConfigNode::find(const std::string& key) const {
  for (const auto& [k, value] : entries_)
    if (k.is_scalar() && k.text() == key) return &value;
  return nullptr;
}

}  // namespace sparsevit::config
