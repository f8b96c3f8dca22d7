#include "analysis/mask_png.h"

#include <png.h>
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

#include "util/errors.h"

namespace sparsevit::analysis {

namespace {

constexpr int64_t kMaxSide = 1000000;  // libpng's default user width/height limit

int32_t ceil_sqrt(int32_t n) {
  int32_t r = 0;
  while (static_cast<int64_t>(r) * r < n) ++r;
  return r;
}

std::string errno_text(int err) { return std::strerror(err); }

[[noreturn]] void fail(const std::string& path, const std::string& reason) {
  throw RuntimeError("cannot write mask image '" + path + "': " + reason);
}

// ---------------------------------------------------------------- libpng, C-style
// libpng reports errors by longjmp. The setjmp frame below owns no C++ objects, and no C++
// frame lies between it and libpng, so the jump skips no destructors.

struct PngErrorSink {
  char message[256];
};

void on_png_error(png_structp png, png_const_charp msg) {
  auto* sink = static_cast<PngErrorSink*>(png_get_error_ptr(png));
  if (sink != nullptr) {
    const int err = errno;  // a failed fwrite in libpng's default writer leaves the cause here
    if (err != 0) {
      std::snprintf(sink->message, sizeof(sink->message), "libpng: %s (%s)", msg ? msg : "error",
                    std::strerror(err));
    } else {
      std::snprintf(sink->message, sizeof(sink->message), "libpng: %s", msg ? msg : "error");
    }
  }
  png_longjmp(png, 1);
}

void on_png_warning(png_structp, png_const_charp) {}

using RowFn = void (*)(void* context, uint32_t y, png_bytep row);

// Writes a width x height RGB8 image to fp, asking row_fn for each row (row_fn must not throw).
// Returns true on success; on failure sink->message holds libpng's reason.
bool write_png_stream(FILE* fp, uint32_t width, uint32_t height, RowFn row_fn, void* context,
                      png_bytep row, PngErrorSink* sink) {
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, sink, on_png_error, on_png_warning);
  if (png == nullptr) {
    std::snprintf(sink->message, sizeof(sink->message), "libpng: out of memory");
    return false;
  }
  png_infop info = png_create_info_struct(png);
  if (info == nullptr) {
    png_destroy_write_struct(&png, nullptr);
    std::snprintf(sink->message, sizeof(sink->message), "libpng: out of memory");
    return false;
  }
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    return false;
  }
  png_init_io(png, fp);
  png_set_IHDR(png, info, width, height, 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_set_compression_level(png, 6);
  png_write_info(png, info);
  for (uint32_t y = 0; y < height; ++y) {
    row_fn(context, y, row);
    png_write_row(png, row);
  }
  png_write_end(png, info);
  png_destroy_write_struct(&png, &info);
  return true;
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

  static void row_callback(void* context, uint32_t y, png_bytep row) {
    auto* self = static_cast<Renderer*>(context);
    self->render(y);
    std::memcpy(row, self->token_row.data(), self->token_row.size());
  }
};

// mkstemp in the directory of `path`, named after it.
std::string temp_template(const std::string& path) { return path + ".tmp.XXXXXX"; }

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
  std::vector<png_byte> row(renderer.token_row.size());

  std::string tmp = temp_template(path);
  const int fd = ::mkstemp(tmp.data());
  if (fd < 0) fail(path, errno_text(errno));
  (void)::fchmod(fd, 0644);  // mkstemp creates 0600; an image is for sharing
  FILE* fp = ::fdopen(fd, "wb");
  if (fp == nullptr) {
    const int err = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    fail(path, errno_text(err));
  }
  PngErrorSink sink{};
  errno = 0;
  const bool ok = write_png_stream(fp, static_cast<uint32_t>(layout.width),
                                   static_cast<uint32_t>(layout.height), &Renderer::row_callback,
                                   &renderer, row.data(), &sink);
  errno = 0;
  const bool flushed = std::fflush(fp) == 0 && !std::ferror(fp);
  const int flush_err = errno;
  const bool closed = std::fclose(fp) == 0;
  const int close_err = errno;
  if (!ok || !flushed || !closed) {
    ::unlink(tmp.c_str());
    if (!ok) fail(path, sink.message);
    fail(path, errno_text(!flushed ? (flush_err ? flush_err : EIO) : (close_err ? close_err : EIO)));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    fail(path, errno_text(err));
  }
}

}  // namespace sparsevit::analysis
