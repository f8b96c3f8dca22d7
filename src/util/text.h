// Small text helpers shared by the parsers (standard library only, header-only).
#pragma once

#include <cctype>
#include <cstddef>
#include <string>

namespace sparsevit {

// `s` without leading and trailing white space (std::isspace in the C locale: space, \t, \n,
// \v, \f, \r).
inline std::string trim(const std::string& s) {
  std::size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

}  // namespace sparsevit
