#include "util/did_you_mean.h"

#include <algorithm>
#include <cctype>

namespace sparsevit {

std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const bool same = std::tolower(static_cast<unsigned char>(a[i - 1])) ==
                        std::tolower(static_cast<unsigned char>(b[j - 1]));
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (same ? 0 : 1)});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string closest_name(const std::string& name, const std::vector<std::string>& candidates) {
  std::string best;
  std::size_t best_distance = static_cast<std::size_t>(-1);
  for (const auto& c : candidates) {
    const std::size_t d = edit_distance(name, c);
    if (d < best_distance) {
      best_distance = d;
      best = c;
    }
  }
  // A typo changes a few characters; beyond that the suggestion is noise.
  const std::size_t limit = std::max<std::size_t>(2, name.size() / 3);
  return best_distance <= limit ? best : std::string();
}

std::string unknown_name_message(const std::string& what, const std::string& name,
                                 const std::vector<std::string>& candidates) {
  std::string msg = "unknown " + what + " '" + name + "'";
  const std::string guess = closest_name(name, candidates);
  if (!guess.empty()) msg += " (did you mean '" + guess + "'?)";
  msg += "; known: ";
  for (std::size_t i = 0; i < candidates.size(); ++i) msg += (i ? ", " : "") + candidates[i];
  return msg;
}

}  // namespace sparsevit
