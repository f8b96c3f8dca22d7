// Pattern: the static attention pattern of one layer, per-head CSR over all N tokens.
//
// Row j of head h may attend to the sorted keys col_idx(h)[row_ptr(h)[j] .. row_ptr(h)[j+1]).
// Token 0 is the class token when the model has one (num_prefix_tokens() == 1); the
// statistics that follow the literature (pruning ratio) exclude it. Structure hints
// describe the pattern exactly when present, so kernels may use them instead of the CSR.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace sparsevit::patterns {

// Omega = {(j,k) in [0,N)^2 : |j-k| in offsets} union the rows and columns of global_tokens.
struct DiagonalStructure {
  std::vector<int32_t> offsets;        // sorted, unique, 0 <= o < N (0 = main diagonal)
  std::vector<int32_t> global_tokens;  // sorted, unique, < N
};

class Pattern {
 public:
  using RowFiller = std::function<void(int32_t row, std::vector<int32_t>& keys)>;

  Pattern() = default;
  Pattern(int32_t num_tokens, int32_t num_heads, int32_t num_prefix_tokens);

  // Head h from a row callback: fill(j, keys) appends row j's keys in any order, duplicates allowed.
  void set_head(int32_t h, const RowFiller& fill);
  // Head h from diagonal offsets + global tokens; records the structure hint.
  void set_head_diagonals(int32_t h, DiagonalStructure structure);
  // The window w_h a generator used for head h (reported by `masks`); optional.
  void set_window(int32_t h, int64_t window) { windows_.at(h) = window; }
  void add_warning(std::string message) { warnings_.push_back(std::move(message)); }

  int32_t num_tokens() const { return num_tokens_; }
  int32_t num_heads() const { return num_heads_; }
  int32_t num_prefix_tokens() const { return num_prefix_tokens_; }

  const std::vector<int32_t>& row_ptr(int32_t h) const { return row_ptr_.at(h); }  // N+1 entries
  const std::vector<int32_t>& col_idx(int32_t h) const { return col_idx_.at(h); }  // edges(h) entries
  int64_t edges(int32_t h) const { return static_cast<int64_t>(col_idx_.at(h).size()); }
  int64_t max_edges() const;    // nnz_max over heads: the width of the padded col_idx tensor
  int64_t total_edges() const;  // sum over heads
  bool contains(int32_t h, int32_t row, int32_t key) const;

  const std::optional<DiagonalStructure>& diagonals(int32_t h) const { return diagonals_.at(h); }
  const std::optional<int64_t>& window(int32_t h) const { return windows_.at(h); }
  const std::vector<std::string>& warnings() const { return warnings_; }

  // Flat copies in the operator's layout: row_ptr [H, N+1], col_idx [H, max_edges()] zero-padded.
  std::vector<int32_t> flat_row_ptr() const;
  std::vector<int32_t> padded_col_idx() const;

 private:
  void check_head(int32_t h) const;

  int32_t num_tokens_ = 0;
  int32_t num_heads_ = 0;
  int32_t num_prefix_tokens_ = 0;
  std::vector<std::vector<int32_t>> row_ptr_;
  std::vector<std::vector<int32_t>> col_idx_;
  std::vector<std::optional<DiagonalStructure>> diagonals_;
  std::vector<std::optional<int64_t>> windows_;
  std::vector<std::string> warnings_;
};

}  // namespace sparsevit::patterns
