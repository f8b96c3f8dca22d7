#include "analysis/png_file.h"

#include <png.h>

#include <csetjmp>
#include <cstdio>
#include <vector>

#include "util/atomic_file.h"
#include "util/errors.h"

namespace sparsevit::analysis {
namespace {

// libpng reports errors by longjmp. The setjmp frame below owns no C++ objects that need
// destruction between it and libpng (the output string and row buffer live in the caller).
struct PngSink {
  std::string* bytes = nullptr;
  char message[256] = {0};
};

void on_png_error(png_structp png, png_const_charp msg) {
  auto* sink = static_cast<PngSink*>(png_get_error_ptr(png));
  std::snprintf(sink->message, sizeof(sink->message), "libpng: %s", msg ? msg : "error");
  png_longjmp(png, 1);
}

void on_png_warning(png_structp, png_const_charp) {}

void on_png_write(png_structp png, png_bytep data, png_size_t size) {
  auto* sink = static_cast<PngSink*>(png_get_io_ptr(png));
  sink->bytes->append(reinterpret_cast<const char*>(data), size);
}

void on_png_flush(png_structp) {}

bool encode(PngSink* sink, uint32_t width, uint32_t height, PngRowFn row_fn, void* context, png_bytep row) {
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
  png_set_write_fn(png, sink, on_png_write, on_png_flush);
  png_set_IHDR(png, info, width, height, 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
               PNG_FILTER_TYPE_DEFAULT);
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

}  // namespace

std::string encode_rgb_png(uint32_t width, uint32_t height, PngRowFn row, void* context) {
  std::string bytes;
  std::vector<png_byte> buffer(static_cast<std::size_t>(width) * 3);
  PngSink sink;
  sink.bytes = &bytes;
  if (!encode(&sink, width, height, row, context, buffer.data())) throw RuntimeError(sink.message);
  return bytes;
}

void write_rgb_png(const std::string& path, uint32_t width, uint32_t height, PngRowFn row, void* context) {
  std::string bytes;
  try {
    bytes = encode_rgb_png(width, height, row, context);
  } catch (const RuntimeError& e) {
    throw RuntimeError("cannot write " + path + ": " + e.what());
  }
  write_file_atomically(path, bytes);
}

}  // namespace sparsevit::analysis
