// ConfigNode: a parsed config document (YAML today) in a format-neutral tree, so that one spec
// parser (config/attention_spec.cpp) serves every reader: yaml-cpp in the CLI build
// (config/yaml_cpp_config_document.cpp), PyYAML in the Python package's core
// (python/pyyaml_config_document.cpp). A node is null, a scalar (its text as written), a sequence
// or a mapping; mapping keys are nodes too, in document order, duplicates kept (the parser refuses
// them with the key's location). Every node carries where it came from ("file:line:col", or just
// the source when the reader knows no position), which errors print before their message.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace sparsevit::config {

class ConfigNode {
 public:
  enum class Kind { kNull, kScalar, kSequence, kMap };
  using Entry = std::pair<ConfigNode, ConfigNode>;  // key, value

  // What a reader copies at most. The tree is a copy, so a YAML alias becomes a copy of what it
  // names: these bound a recursive alias (`&a [*a]`) and an alias bomb, which the readers refuse
  // (UsageError "<location>: invalid YAML: ..."). A config is a few levels and a few dozen nodes.
  static constexpr int kMaxDepth = 64;
  static constexpr long kMaxNodes = 100000;

  static ConfigNode null(std::string location);
  static ConfigNode scalar(std::string text, std::string location);
  static ConfigNode sequence(std::vector<ConfigNode> items, std::string location);
  static ConfigNode map(std::vector<Entry> entries, std::string location);

  Kind kind() const { return kind_; }
  bool is_null() const { return kind_ == Kind::kNull; }
  bool is_scalar() const { return kind_ == Kind::kScalar; }
  bool is_sequence() const { return kind_ == Kind::kSequence; }
  bool is_map() const { return kind_ == Kind::kMap; }

  // The scalar's text ("" for the other kinds).
  const std::string& text() const { return text_; }
  // A sequence's items (empty for the other kinds).
  const std::vector<ConfigNode>& items() const { return items_; }
  // A mapping's entries in document order (empty for the other kinds).
  const std::vector<Entry>& entries() const { return entries_; }
  // The value of the first entry whose key is the scalar `key`; nullptr when there is none (or
  // this is not a mapping). A present key with an empty value is a null node, not nullptr.
  const ConfigNode* find(const std::string& key) const;

  const std::string& location() const { return location_; }

 private:
  ConfigNode(Kind kind, std::string location) : kind_(kind), location_(std::move(location)) {}

  Kind kind_;
  std::string text_;
  std::vector<ConfigNode> items_;
  std::vector<Entry> entries_;
  std::string location_;
};

}  // namespace sparsevit::config
