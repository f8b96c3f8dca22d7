// Reading a config file's text into a ConfigNode tree. One declaration, one implementation per
// build, chosen by what is linked: yaml-cpp in the CLI build (config/yaml_cpp_config_document.cpp,
// locations "source:line:col"), PyYAML in the Python package's core, which has no yaml-cpp
// (python/pyyaml_config_document.cpp, the same locations from PyYAML's node marks).
#pragma once

#include <string>

#include "config/config_node.h"

namespace sparsevit::config {

// The first document of `text` (an empty text is a null node located at `source`). Malformed
// YAML is a UsageError "<source>:<line>:<col>: invalid YAML: <the reader's message>".
ConfigNode read_config_document(const std::string& text, const std::string& source);

}  // namespace sparsevit::config
