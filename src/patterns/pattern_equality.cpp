#include "patterns/pattern_equality.h"

namespace sparsevit::patterns {

bool same_pairs(const Pattern& a, const Pattern& b) {
  if (a.num_tokens() != b.num_tokens() || a.num_heads() != b.num_heads() ||
      a.num_prefix_tokens() != b.num_prefix_tokens())
    return false;
  for (int32_t h = 0; h < a.num_heads(); ++h)
    if (a.row_ptr(h) != b.row_ptr(h) || a.col_idx(h) != b.col_idx(h)) return false;
  return true;
}

bool same_pairs(const std::vector<std::optional<Pattern>>& a, const std::vector<std::optional<Pattern>>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t l = 0; l < a.size(); ++l)
    if (a[l].has_value() != b[l].has_value() || (a[l] && !same_pairs(*a[l], *b[l]))) return false;
  return true;
}

}  // namespace sparsevit::patterns
