#include "patterns/file_mask.h"

#include <cstring>
#include <fstream>
#include <limits>

#include "patterns/mask_generators.h"
#include "util/errors.h"
#include "util/npy_array.h"
#include "util/npz_file.h"

namespace sparsevit::patterns {

namespace {

constexpr const char* kContext = "file";

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// Checks the leading [L, H] or [H] of an array whose last `trailing` dims hold one head, and
// returns the element index where layer context.layer's first head starts.
int64_t layer_start(const NpyArray& a, std::size_t trailing, const std::string& what, const MaskContext& ctx,
                    const std::string& where, const std::string& shapes) {
  if (a.shape.size() != trailing + 1 && a.shape.size() != trailing + 2)
    throw RuntimeError(where + " " + what + " is shaped " + shape_text(a.shape) + "; expected " + shapes);
  const std::size_t head_dim = a.shape.size() - trailing - 1;
  int64_t per_head = 1;
  for (std::size_t d = head_dim + 1; d < a.shape.size(); ++d) per_head *= a.shape[d];
  if (head_dim == 0) return 0;  // [H, ...]: one pattern for every layer
  if (a.shape[0] != ctx.num_layers)
    throw RuntimeError(where + " " + what + " " + shape_text(a.shape) + " has " + std::to_string(a.shape[0]) +
                       " layers, the model " + std::to_string(ctx.num_layers));
  return ctx.layer * a.shape[1] * per_head;
}

void check_geometry(int64_t file_tokens, int64_t file_heads, const std::string& what, const NpyArray& a,
                    const MaskContext& ctx, const std::string& where) {
  if (file_tokens != ctx.num_tokens || file_heads != ctx.num_heads)
    throw RuntimeError(where + " " + what + " " + shape_text(a.shape) + " is for N=" + std::to_string(file_tokens) +
                       " tokens and H=" + std::to_string(file_heads) + " heads; the model has N=" +
                       std::to_string(ctx.num_tokens) + " tokens and H=" + std::to_string(ctx.num_heads) + " heads");
}

// Per-head CSR: row_ptr [(L,) H, N+1], col_idx [(L,) H, W].
Pattern from_csr(const std::string& path, const MaskContext& ctx) {
  const std::string where = std::string(kContext) + ": '" + path + "'";
  const NpzReader npz(path, kContext);
  if (!npz.has("row_ptr") || !npz.has("col_idx")) {
    std::string listed;
    for (const auto& m : npz.members()) listed += (listed.empty() ? "" : ", ") + m;
    throw RuntimeError(where + " must hold arrays 'row_ptr' and 'col_idx' (it holds: " +
                       (listed.empty() ? "nothing" : listed) + ")");
  }
  const NpyArray row_ptr = npz.read("row_ptr");
  const NpyArray col_idx = npz.read("col_idx");
  for (const auto* a : {&row_ptr, &col_idx})
    if (!a->is_integer())
      throw RuntimeError(where + " " + (a == &row_ptr ? "row_ptr" : "col_idx") + " must be int32 or int64, not '" +
                         npy_descr(a->dtype) + "'");
  const int64_t rp_start = layer_start(row_ptr, 1, "row_ptr", ctx, where, "[L, H, N+1] or [H, N+1]");
  const int64_t ci_start = layer_start(col_idx, 1, "col_idx", ctx, where, "[L, H, W] or [H, W]");
  if (row_ptr.shape.size() != col_idx.shape.size() || row_ptr.shape.end()[-2] != col_idx.shape.end()[-2])
    throw RuntimeError(where + " row_ptr " + shape_text(row_ptr.shape) + " and col_idx " + shape_text(col_idx.shape) +
                       " must share their leading [L, H] or [H]");
  check_geometry(row_ptr.shape.back() - 1, row_ptr.shape.end()[-2], "row_ptr", row_ptr, ctx, where);

  const int32_t n = static_cast<int32_t>(ctx.num_tokens);
  const int64_t width = col_idx.shape.back();
  Pattern pattern(n, static_cast<int32_t>(ctx.num_heads), static_cast<int32_t>(ctx.num_prefix_tokens));
  for (int32_t h = 0; h < ctx.num_heads; ++h) {
    const int64_t rp0 = rp_start + static_cast<int64_t>(h) * (n + 1);
    const int64_t ci0 = ci_start + static_cast<int64_t>(h) * width;
    const std::string at = where + " layer " + std::to_string(ctx.layer) + " head " + std::to_string(h) + ": ";
    if (row_ptr.int_at(rp0) != 0)
      throw RuntimeError(at + "row_ptr[0] is " + std::to_string(row_ptr.int_at(rp0)) + ", must be 0");
    // Validate every row before building: the ranges index col_idx.
    for (int32_t j = 0; j < n; ++j) {
      const int64_t begin = row_ptr.int_at(rp0 + j), end = row_ptr.int_at(rp0 + j + 1);
      if (end < begin)
        throw RuntimeError(at + "row_ptr decreases at row " + std::to_string(j) + " (" + std::to_string(begin) + " -> " +
                           std::to_string(end) + ")");
      if (end > width || end > std::numeric_limits<int32_t>::max())
        throw RuntimeError(at + "row_ptr[" + std::to_string(j + 1) + "] = " + std::to_string(end) +
                           " exceeds col_idx's width W=" + std::to_string(width));
      if (end == begin)
        throw RuntimeError(at + "row " + std::to_string(j) + " has no keys (every query needs at least one)");
      int64_t previous = -1;
      for (int64_t e = begin; e < end; ++e) {
        const int64_t k = col_idx.int_at(ci0 + e);
        if (k < 0 || k >= n)
          throw RuntimeError(at + "row " + std::to_string(j) + " has key " + std::to_string(k) + " outside [0, " +
                             std::to_string(n) + ")");
        if (k <= previous)
          throw RuntimeError(at + "row " + std::to_string(j) + "'s keys are not strictly increasing (" +
                             std::to_string(previous) + " then " + std::to_string(k) + ")");
        previous = k;
      }
    }
    pattern.set_head(h, [&](int32_t j, std::vector<int32_t>& keys) {
      for (int64_t e = row_ptr.int_at(rp0 + j); e < row_ptr.int_at(rp0 + j + 1); ++e)
        keys.push_back(static_cast<int32_t>(col_idx.int_at(ci0 + e)));
    });
  }
  return pattern;
}

// Dense mask [(L,) H, N, N] of bool/uint8.
Pattern from_dense(const std::string& path, const MaskContext& ctx) {
  const std::string where = std::string(kContext) + ": '" + path + "'";
  const NpyArray mask = read_npy_array(path, kContext);
  if (mask.dtype != NpyDtype::kBool && mask.dtype != NpyDtype::kUInt8)
    throw RuntimeError(where + " must be a bool or uint8 mask, not '" + std::string(npy_descr(mask.dtype)) + "'");
  const int64_t start = layer_start(mask, 2, "mask", ctx, where, "[L, H, N, N] or [H, N, N]");
  const auto& s = mask.shape;
  if (s.end()[-1] != s.end()[-2])
    throw RuntimeError(where + " mask " + shape_text(s) + " is not square in its last two dimensions");
  check_geometry(s.back(), s.end()[-3], "mask", mask, ctx, where);

  const int32_t n = static_cast<int32_t>(ctx.num_tokens);
  Pattern pattern(n, static_cast<int32_t>(ctx.num_heads), static_cast<int32_t>(ctx.num_prefix_tokens));
  for (int32_t h = 0; h < ctx.num_heads; ++h) {
    const int64_t head = start + static_cast<int64_t>(h) * n * n;
    pattern.set_head(h, [&](int32_t j, std::vector<int32_t>& keys) {
      for (int32_t k = 0; k < n; ++k)
        if (mask.int_at(head + static_cast<int64_t>(j) * n + k) != 0) keys.push_back(k);
      if (keys.empty())
        throw RuntimeError(where + " layer " + std::to_string(ctx.layer) + " head " + std::to_string(h) + ": row " +
                           std::to_string(j) + " has no keys (every query needs at least one)");
    });
  }
  return pattern;
}

}  // namespace

Pattern load_pattern_file(const std::string& path, const MaskContext& context) {
  char magic[6] = {};
  {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw RuntimeError(std::string(kContext) + ": cannot open pattern file '" + path + "'");
    in.read(magic, sizeof magic);
  }
  if (std::memcmp(magic, "PK", 2) == 0) return from_csr(path, context);
  if (std::memcmp(magic, "\x93NUMPY", 6) == 0) return from_dense(path, context);
  throw RuntimeError(std::string(kContext) + ": '" + path +
                     "' is neither an .npz archive (row_ptr, col_idx) nor a .npy dense mask");
}

namespace {

Pattern build_file(const MaskContext& ctx, const MaskKwargs& kw) {
  if (!kw.has("pattern_file"))
    throw UsageError("mask 'file' needs mask_kwargs.pattern_file: an .npz with row_ptr/col_idx (CSR) or a bool "
                     ".npy [L, H, N, N]");
  const auto& value = kw.values().at("pattern_file");
  if (value.is_list || value.items.size() != 1 || value.items[0].empty())
    throw UsageError(kw.describe("pattern_file") + " must be one path");
  return load_pattern_file(value.items[0], ctx);
}

}  // namespace

MaskGenerator file_generator() {
  return MaskGenerator{
      "file",
      "the pattern read from a file: .npz CSR (row_ptr, col_idx) or bool .npy [L, H, N, N], used exactly as given",
      {
          {"pattern_file", "",
           ".npz with int row_ptr [L, H, N+1] and col_idx [L, H, W], or a bool/uint8 .npy [L, H, N, N] "
           "([H, ...] for every layer); relative to the working directory"},
      },
      false,
      build_file,
  };
}

}  // namespace sparsevit::patterns
