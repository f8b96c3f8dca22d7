#include "analysis/mask_png.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csetjmp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "analysis/png_file.h"
#include "util/errors.h"

namespace sparsevit::analysis {

namespace {

constexpr int64_t kMaxSide = 1000000;  // libpng's default user width/height limit

int32_t ceil_sqrt(int32_t n) {
  int32_t r = 0;
  while (static_cast<int64_t>(r) * r < n) ++r;
  return r;
}



// ---------------------------------------------------------------- rendering

struct Renderer {
  const patterns::Pattern* pattern = nullptr;
  MaskPngLayout layout;
  bool class_token = false;
  std::vector<uint8_t> token_row;  // one image row for the current (grid row, token row)
  int64_t cached_y = -1;            // image row index / scale whose pixels token_row holds

  void put(int64_t x0, Rgb c, int64_t count) {
    uint8_t* p = token_row.data() + 3 * x0;
    for (int64_t i = 0; i < count; ++i, p += 3) {
      p[0] = c.r;
      p[1] = c.g;
      p[2] = c.b;
    }
  }

  // Renders image row y into token_row (rows within one token row are identical).
  void render(uint32_t y) {
    namespace col = mask_png_colors;
    const int64_t pitch = layout.block_size + kMaskPngGutter;
    const int64_t grid_row = y / pitch;
    const int64_t within = y % pitch;
    const int64_t key = within < layout.block_size ? within / layout.scale : -1;  // -1: gutter
    const int64_t tag = key < 0 ? -1 - grid_row : grid_row * pattern->num_tokens() + key;
    if (tag == cached_y) return;
    cached_y = tag;
    put(0, col::kGutter, layout.width);
    if (key < 0) return;
    const auto j = static_cast<int32_t>(key);  // query row
    const int64_t s = layout.scale;
    const int32_t n = pattern->num_tokens();
    for (int32_t c = 0; c < layout.columns; ++c) {
      const int64_t hh = grid_row * layout.columns + c;
      if (hh >= pattern->num_heads()) break;
      const auto h = static_cast<int32_t>(hh);
      const int64_t x0 = layout.block_x(h);
      const bool class_row = class_token && j == 0;
      put(x0, class_row ? col::kClassMasked : col::kMasked, layout.block_size);
      if (class_token && !class_row) put(x0, col::kClassMasked, s);  // column 0
      const auto& ptr = pattern->row_ptr(h);
      const auto& keys = pattern->col_idx(h);
      for (int32_t e = ptr[j]; e < ptr[j + 1]; ++e) {
        const int32_t k = keys[e];
        if (k < 0 || k >= n) continue;
        const bool tinted = class_token && (class_row || k == 0);
        put(x0 + k * s, tinted ? col::kClassAllowed : col::kAllowed, s);
      }
    }
  }

  static void row_callback(void* context, uint32_t y, uint8_t* row) {
    auto* self = static_cast<Renderer*>(context);
    self->render(y);
    std::memcpy(row, self->token_row.data(), self->token_row.size());
  }
};

}  // namespace

int64_t MaskPngLayout::block_x(int32_t h) const {
  return static_cast<int64_t>(h % columns) * (block_size + kMaskPngGutter);
}
int64_t MaskPngLayout::block_y(int32_t h) const {
  return static_cast<int64_t>(h / columns) * (block_size + kMaskPngGutter);
}

MaskPngLayout mask_png_layout(const patterns::Pattern& pattern, const MaskPngOptions& options) {
  const int32_t n = pattern.num_tokens();
  const int32_t heads = pattern.num_heads();
  if (n < 1 || heads < 1) throw UsageError("mask image: the pattern is empty (no tokens or heads)");
  if (options.columns < 0) throw UsageError("mask image: columns must be >= 0 (0 = automatic)");
  if (options.scale < 0) throw UsageError("mask image: scale must be >= 0 (0 = automatic)");
  MaskPngLayout layout;
  layout.columns = options.columns > 0 ? std::min(options.columns, heads) : ceil_sqrt(heads);
  layout.rows = (heads + layout.columns - 1) / layout.columns;
  const int64_t gutters_x = static_cast<int64_t>(layout.columns - 1) * kMaskPngGutter;
  if (options.scale > 0) {
    layout.scale = options.scale;
  } else {
    const int64_t span = static_cast<int64_t>(layout.columns) * n;
    layout.scale = static_cast<int32_t>(std::max<int64_t>(1, (options.max_width - gutters_x) / span));
  }
  layout.block_size = static_cast<int64_t>(n) * layout.scale;
  layout.width = layout.columns * layout.block_size + gutters_x;
  layout.height = layout.rows * layout.block_size + static_cast<int64_t>(layout.rows - 1) * kMaskPngGutter;
  return layout;
}

void write_mask_png(const patterns::Pattern& pattern, const std::string& path,
                    const MaskPngOptions& options) {
  Renderer renderer;
  renderer.pattern = &pattern;
  renderer.layout = mask_png_layout(pattern, options);
  renderer.class_token = pattern.num_prefix_tokens() == 1;
  const MaskPngLayout& layout = renderer.layout;
  if (layout.width > kMaxSide || layout.height > kMaxSide) {
    throw UsageError("mask image '" + path + "' would be " + std::to_string(layout.width) + "x" +
                     std::to_string(layout.height) + " pixels (at most " + std::to_string(kMaxSide) +
                     " per side); use a smaller scale or more columns");
  }
  renderer.token_row.assign(static_cast<size_t>(layout.width) * 3, 0);

  write_rgb_png(path, static_cast<uint32_t>(layout.width), static_cast<uint32_t>(layout.height),
                &Renderer::row_callback, &renderer);
}

}  // namespace sparsevit::analysis
