#include "patterns/pattern.h"

#include <algorithm>
#include <numeric>
#include <string>

#include "util/errors.h"

namespace sparsevit::patterns {

Pattern::Pattern(int32_t num_tokens, int32_t num_heads, int32_t num_prefix_tokens)
    : num_tokens_(num_tokens), num_heads_(num_heads), num_prefix_tokens_(num_prefix_tokens) {
  if (num_tokens < 1) throw UsageError("tokens must be >= 1, got " + std::to_string(num_tokens));
  if (num_heads < 1) throw UsageError("heads must be >= 1, got " + std::to_string(num_heads));
  if (num_prefix_tokens < 0 || num_prefix_tokens > num_tokens)
    throw UsageError("prefix tokens must be in [0, tokens], got " + std::to_string(num_prefix_tokens));
  row_ptr_.assign(num_heads, std::vector<int32_t>(num_tokens + 1, 0));
  col_idx_.assign(num_heads, {});
  diagonals_.assign(num_heads, std::nullopt);
  windows_.assign(num_heads, std::nullopt);
}

void Pattern::check_head(int32_t h) const {
  if (h < 0 || h >= num_heads_)
    throw std::out_of_range("head " + std::to_string(h) + " out of range [0, " +
                            std::to_string(num_heads_) + ")");
}

void Pattern::set_head(int32_t h, const RowFiller& fill) {
  check_head(h);
  auto& ptr = row_ptr_[h];
  auto& cols = col_idx_[h];
  cols.clear();
  std::vector<int32_t> row;
  for (int32_t j = 0; j < num_tokens_; ++j) {
    row.clear();
    fill(j, row);
    std::sort(row.begin(), row.end());
    row.erase(std::unique(row.begin(), row.end()), row.end());
    if (!row.empty() && (row.front() < 0 || row.back() >= num_tokens_))
      throw std::out_of_range("pattern key out of range in row " + std::to_string(j));
    ptr[j] = static_cast<int32_t>(cols.size());
    cols.insert(cols.end(), row.begin(), row.end());
  }
  ptr[num_tokens_] = static_cast<int32_t>(cols.size());
  cols.shrink_to_fit();
  diagonals_[h].reset();
}

void Pattern::set_head_diagonals(int32_t h, DiagonalStructure s) {
  check_head(h);
  const int32_t n = num_tokens_;
  // Normalise: offsets >= N produce no pair, so the hint keeps only those that do.
  auto normalise = [n](std::vector<int32_t>& v) {
    v.erase(std::remove_if(v.begin(), v.end(), [n](int32_t x) { return x < 0 || x >= n; }), v.end());
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
  };
  normalise(s.offsets);
  normalise(s.global_tokens);
  std::vector<char> is_global(n, 0);
  for (int32_t g : s.global_tokens) is_global[g] = 1;
  set_head(h, [&](int32_t j, std::vector<int32_t>& keys) {
    if (is_global[j]) {
      keys.resize(n);
      std::iota(keys.begin(), keys.end(), 0);
      return;
    }
    for (int32_t o : s.offsets) {
      if (j - o >= 0) keys.push_back(j - o);
      if (o != 0 && j + o < n) keys.push_back(j + o);
    }
    keys.insert(keys.end(), s.global_tokens.begin(), s.global_tokens.end());
  });
  diagonals_[h] = std::move(s);
}

int64_t Pattern::max_edges() const {
  int64_t m = 0;
  for (int32_t h = 0; h < num_heads_; ++h) m = std::max(m, edges(h));
  return m;
}

int64_t Pattern::total_edges() const {
  int64_t t = 0;
  for (int32_t h = 0; h < num_heads_; ++h) t += edges(h);
  return t;
}

bool Pattern::contains(int32_t h, int32_t row, int32_t key) const {
  check_head(h);
  if (row < 0 || row >= num_tokens_) return false;
  const auto& cols = col_idx_[h];
  const auto begin = cols.begin() + row_ptr_[h][row];
  const auto end = cols.begin() + row_ptr_[h][row + 1];
  return std::binary_search(begin, end, key);
}

std::vector<int32_t> Pattern::flat_row_ptr() const {
  std::vector<int32_t> flat;
  flat.reserve(static_cast<std::size_t>(num_heads_) * (num_tokens_ + 1));
  for (const auto& ptr : row_ptr_) flat.insert(flat.end(), ptr.begin(), ptr.end());
  return flat;
}

std::vector<int32_t> Pattern::padded_col_idx() const {
  const int64_t width = max_edges();
  std::vector<int32_t> flat(static_cast<std::size_t>(num_heads_ * width), 0);
  for (int32_t h = 0; h < num_heads_; ++h)
    std::copy(col_idx_[h].begin(), col_idx_[h].end(), flat.begin() + h * width);
  return flat;
}

}  // namespace sparsevit::patterns
