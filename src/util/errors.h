// Error kinds that map to the CLI's exit codes: UsageError -> 2, everything else -> 1.
#pragma once

#include <stdexcept>
#include <string>

namespace sparsevit {

// Bad configuration or arguments: the user can fix it by changing the input.
class UsageError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// The input was well-formed but something failed while doing the work.
class RuntimeError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Throws UsageError(message) unless `ok`: the one-line check of a bad argument.
inline void require(bool ok, const std::string& message) {
  if (!ok) throw UsageError(message);
}

}  // namespace sparsevit
