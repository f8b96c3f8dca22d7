// Whether two patterns compute the same pairs, whatever generator built them (a Fibonacci
// schedule and a local window can coincide at a small N; `sweep` reports such twins).
#pragma once

#include <optional>
#include <vector>

#include "patterns/pattern.h"

namespace sparsevit::patterns {

// Same tokens, heads and prefix tokens, and the same keys for every head and row (structure
// hints, windows and warnings are ignored).
bool same_pairs(const Pattern& a, const Pattern& b);

// Per layer (nullopt = a dense layer): the same number of layers, dense in the same ones, and
// the same pairs in every other one.
bool same_pairs(const std::vector<std::optional<Pattern>>& a, const std::vector<std::optional<Pattern>>& b);

}  // namespace sparsevit::patterns
