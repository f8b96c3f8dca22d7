#include "patterns/pattern_stats.h"

#include <algorithm>
#include <iterator>

namespace sparsevit::patterns {

int64_t patch_edges(const Pattern& p, int32_t h) {
  const int32_t prefix = p.num_prefix_tokens();
  const auto& ptr = p.row_ptr(h);
  const auto& cols = p.col_idx(h);
  int64_t count = 0;
  for (int32_t j = prefix; j < p.num_tokens(); ++j) {
    // Keys are sorted: the patch keys are the tail of the row.
    const auto begin = cols.begin() + ptr[j];
    const auto end = cols.begin() + ptr[j + 1];
    count += end - std::lower_bound(begin, end, prefix);
  }
  return count;
}

double head_pruning_ratio(const Pattern& p, int32_t h) {
  const double patches = p.num_tokens() - p.num_prefix_tokens();
  if (patches <= 0) return 0.0;
  return (patches * patches - static_cast<double>(patch_edges(p, h))) / (patches * patches);
}

double pruning_ratio(const Pattern& p) {
  double sum = 0;
  for (int32_t h = 0; h < p.num_heads(); ++h) sum += head_pruning_ratio(p, h);
  return sum / p.num_heads();
}

double pruning_ratio(const std::vector<Pattern>& layers) {
  if (layers.empty()) return 0.0;
  double sum = 0;
  for (const auto& p : layers) sum += pruning_ratio(p);
  return sum / layers.size();
}

double density(const Pattern& p) {
  const double n = p.num_tokens();
  return static_cast<double>(p.total_edges()) / (n * n * p.num_heads());
}

double density(const std::vector<Pattern>& layers) {
  if (layers.empty()) return 1.0;
  double sum = 0;
  for (const auto& p : layers) sum += density(p);
  return sum / layers.size();
}

double head_jaccard(const Pattern& p, int32_t a, int32_t b) {
  int64_t both = 0;
  for (int32_t j = 0; j < p.num_tokens(); ++j) {
    const auto& ca = p.col_idx(a);
    const auto& cb = p.col_idx(b);
    auto ia = ca.begin() + p.row_ptr(a)[j], ea = ca.begin() + p.row_ptr(a)[j + 1];
    auto ib = cb.begin() + p.row_ptr(b)[j], eb = cb.begin() + p.row_ptr(b)[j + 1];
    while (ia != ea && ib != eb) {
      if (*ia < *ib) ++ia;
      else if (*ib < *ia) ++ib;
      else { ++both; ++ia; ++ib; }
    }
  }
  const int64_t either = p.edges(a) + p.edges(b) - both;
  return either == 0 ? 1.0 : static_cast<double>(both) / static_cast<double>(either);
}

std::vector<std::vector<double>> head_overlap(const Pattern& p) {
  const int32_t h = p.num_heads();
  std::vector<std::vector<double>> m(h, std::vector<double>(h, 1.0));
  for (int32_t a = 0; a < h; ++a)
    for (int32_t b = a + 1; b < h; ++b) m[a][b] = m[b][a] = head_jaccard(p, a, b);
  return m;
}

double union_coverage(const Pattern& p) {
  const int32_t n = p.num_tokens();
  int64_t covered = 0;
  std::vector<char> seen(n);
  for (int32_t j = 0; j < n; ++j) {
    std::fill(seen.begin(), seen.end(), 0);
    for (int32_t h = 0; h < p.num_heads(); ++h)
      for (int32_t e = p.row_ptr(h)[j]; e < p.row_ptr(h)[j + 1]; ++e) seen[p.col_idx(h)[e]] = 1;
    covered += std::count(seen.begin(), seen.end(), 1);
  }
  return static_cast<double>(covered) / (static_cast<double>(n) * n);
}

double attention_gflops_for_pairs(double pairs, int64_t head_dim) {
  return 2.0 * static_cast<double>(head_dim) * pairs / 1e9;
}

double attention_gflops(const Pattern& p, int64_t head_dim) {
  return attention_gflops_for_pairs(static_cast<double>(p.total_edges()), head_dim);
}

double attention_gflops_patch(const Pattern& p, int64_t head_dim) {
  double pairs = 0;
  for (int32_t h = 0; h < p.num_heads(); ++h) pairs += static_cast<double>(patch_edges(p, h));
  return attention_gflops_for_pairs(pairs, head_dim);
}

}  // namespace sparsevit::patterns
