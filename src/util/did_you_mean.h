// "Did you mean" suggestions for unknown names (masks, kwargs, config keys, models).
#pragma once

#include <string>
#include <vector>

namespace sparsevit {

// Levenshtein distance between two ASCII strings.
std::size_t edit_distance(const std::string& a, const std::string& b);

// The closest candidate when it is close enough to be a plausible typo, else "".
std::string closest_name(const std::string& name, const std::vector<std::string>& candidates);

// "unknown <what> 'x' (did you mean 'y'?; known: a, b, c)" — one line.
std::string unknown_name_message(const std::string& what, const std::string& name,
                                 const std::vector<std::string>& candidates);

}  // namespace sparsevit
