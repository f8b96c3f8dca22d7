// A kwarg with a fixed default, declared once: the generator (or attention backend) reads it
// through the declaration and its registry entry lists the same declaration, so the code,
// `sparsevit masks --list` and docs/masks.md (compared by tests/patterns/mask_docs_test.cpp)
// cannot disagree about a default.
//
//   constexpr IntKwarg kWindow{"window", 2, "half-width w: keys with |j-k| <= w"};
//   const int64_t w = kWindow.read(kwargs, /*min=*/0);  // 2 when the config does not set it
//   kwargs table: {kWindow.doc_entry(), {"head_windows", "", "one window per head"}, ...}
//
// Kwargs without a default (required, or derived from the geometry such as "ceil(sqrt(N))")
// are plain KwargDoc entries: the generator computes them, the text only describes the rule.
#pragma once

#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "patterns/mask_kwargs.h"

namespace sparsevit::patterns {

// One row of a generator's (or backend's) kwargs table, as `masks --list` prints it.
struct KwargDoc {
  std::string name;
  std::string default_value;  // as a user would write it; "" when required / derived
  std::string doc;
};

struct IntKwarg {
  const char* name;
  int64_t fallback;
  const char* doc;

  int64_t read(const MaskKwargs& kwargs, int64_t min = INT64_MIN, int64_t max = INT64_MAX) const {
    return kwargs.get_int(name, fallback, min, max);
  }
  KwargDoc doc_entry() const { return {name, std::to_string(fallback), doc}; }
};

struct DoubleKwarg {
  const char* name;
  double fallback;
  const char* doc;

  double read(const MaskKwargs& kwargs, double min, double max) const {
    return kwargs.get_double(name, fallback, min, max);
  }
  KwargDoc doc_entry() const {
    std::ostringstream text;  // shortest form a user writes: 0.98, not 0.980000
    text << fallback;
    return {name, text.str(), doc};
  }
};

struct BoolKwarg {
  const char* name;
  bool fallback;
  const char* doc;

  bool read(const MaskKwargs& kwargs) const { return kwargs.get_bool(name, fallback); }
  KwargDoc doc_entry() const { return {name, fallback ? "true" : "false", doc}; }
};

// The accepted values stay at the call site (next to the code that branches on them).
struct ChoiceKwarg {
  const char* name;
  const char* fallback;
  const char* doc;

  std::string read(const MaskKwargs& kwargs, const std::vector<std::string>& choices) const {
    return kwargs.get_choice(name, fallback, choices);
  }
  KwargDoc doc_entry() const { return {name, fallback, doc}; }
};

}  // namespace sparsevit::patterns
