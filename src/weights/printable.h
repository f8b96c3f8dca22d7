// Names from a file (tensor names, dict keys, storage keys) as they appear in error messages:
// control characters become '?' and long names are cut, so every message stays one line.
#pragma once

#include <string>

namespace sparsevit::weights {

inline std::string printable(const std::string& name) {
  std::string out = name.size() > 200 ? name.substr(0, 200) + "..." : name;
  for (char& c : out)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  return out;
}

}  // namespace sparsevit::weights
