#include "data/image_codec.h"

#include <png.h>
#include <turbojpeg.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>

#include "util/errors.h"
#include "util/file_bytes.h"

namespace sparsevit::data {

namespace {

// Refuse absurd headers before allocating: 2^26 pixels (an 8192 x 8192 image, 192 MiB as RGB) is
// far beyond any dataset image; a header claiming more is corrupt or hostile (the fuzzer found a
// 55551 x 23551 JPEG header that made the decoder allocate 3.7 GiB).
constexpr int64_t kMaxPixels = int64_t{1} << 26;

[[noreturn]] void decode_failure(const std::string& name, const std::string& reason) {
  throw RuntimeError("cannot decode image '" + name + "': " + reason);
}

void check_channels(int channels, const char* what) {
  if (channels != 1 && channels != 3) {
    throw UsageError(std::string(what) + ": channels must be 1 or 3, got " + std::to_string(channels));
  }
}

struct TjHandle {
  tjhandle handle;
  explicit TjHandle(tjhandle h) : handle(h) {}
  ~TjHandle() {
    if (handle != nullptr) tjDestroy(handle);
  }
  TjHandle(const TjHandle&) = delete;
  TjHandle& operator=(const TjHandle&) = delete;
};

std::string tj_error(tjhandle handle) {
  const char* msg = tjGetErrorStr2(handle);
  return msg != nullptr ? msg : "unknown TurboJPEG error";
}

Image decode_jpeg(const uint8_t* data, std::size_t size, int channels, const std::string& name) {
  if (size > std::numeric_limits<unsigned long>::max()) decode_failure(name, "file too large");
  TjHandle tj(tjInitDecompress());
  if (tj.handle == nullptr) decode_failure(name, "TurboJPEG initialisation failed");
  int width = 0, height = 0, subsamp = 0, colorspace = 0;
  if (tjDecompressHeader3(tj.handle, data, static_cast<unsigned long>(size), &width, &height, &subsamp,
                          &colorspace) != 0) {
    decode_failure(name, tj_error(tj.handle));
  }
  if (width <= 0 || height <= 0 || static_cast<int64_t>(width) * height > kMaxPixels) {
    decode_failure(name, "invalid JPEG dimensions " + std::to_string(width) + "x" + std::to_string(height) +
                             " (at most 2^26 pixels)");
  }
  Image image;
  image.width = width;
  image.height = height;
  image.channels = channels;
  image.pixels.resize(static_cast<std::size_t>(width) * height * channels);
  const int format = channels == 3 ? TJPF_RGB : TJPF_GRAY;
  if (tjDecompress2(tj.handle, data, static_cast<unsigned long>(size), image.pixels.data(), width, 0, height, format,
                    TJFLAG_ACCURATEDCT) != 0) {
    // libjpeg warnings about recoverable oddities (extraneous bytes, a corrupt marker) still
    // give an image, as PIL accepts them; a stream that ends early does not (PIL refuses
    // truncated files too).
    const std::string message = tj_error(tj.handle);
    if (tjGetErrorCode(tj.handle) != TJERR_WARNING || message.find("Premature end") != std::string::npos) {
      decode_failure(name, message);
    }
  }
  return image;
}

Image decode_png(const uint8_t* data, std::size_t size, int channels, const std::string& name) {
  png_image png;
  std::memset(&png, 0, sizeof(png));
  png.version = PNG_IMAGE_VERSION;
  if (png_image_begin_read_from_memory(&png, data, size) == 0) decode_failure(name, std::string("libpng: ") + png.message);
  struct Free {
    png_image* p;
    ~Free() { png_image_free(p); }
  } guard{&png};
  if (static_cast<int64_t>(png.width) * png.height > kMaxPixels) decode_failure(name, "PNG of " + std::to_string(png.width) + "x" + std::to_string(png.height) +
                                                   " pixels is too large (at most 2^26 pixels)");
  // The simplified API expands palettes, gray and tRNS, reduces 16-bit samples to 8 bits
  // and composites alpha onto `background`.
  png.format = channels == 3 ? PNG_FORMAT_RGB : PNG_FORMAT_GRAY;
  Image image;
  image.width = png.width;
  image.height = png.height;
  image.channels = channels;
  image.pixels.resize(PNG_IMAGE_SIZE(png));
  png_color background{0, 0, 0};
  if (png_image_finish_read(&png, &background, image.pixels.data(), 0, nullptr) == 0) {
    decode_failure(name, std::string("libpng: ") + png.message);
  }
  return image;
}

void check_image(const Image& image, const char* what) {
  check_channels(static_cast<int>(image.channels), what);
  if (image.width <= 0 || image.height <= 0 || image.width > (1 << 20) || image.height > (1 << 20)) {
    throw UsageError(std::string(what) + ": invalid image size");
  }
  if (image.pixels.size() != static_cast<std::size_t>(image.width * image.height * image.channels)) {
    throw UsageError(std::string(what) + ": pixel buffer does not match width * height * channels");
  }
}

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) throw RuntimeError("cannot write '" + path + "': " + std::strerror(errno));
  const std::size_t n = std::fwrite(bytes.data(), 1, bytes.size(), f);
  const int err = errno;
  if (std::fclose(f) != 0 || n != bytes.size()) {
    throw RuntimeError("cannot write '" + path + "': " + std::strerror(err));
  }
}

}  // namespace

ImageFormat sniff_image_format(const uint8_t* data, std::size_t size) {
  static const uint8_t kPng[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (size >= 3 && data[0] == 0xFF && data[1] == 0xD8 && data[2] == 0xFF) return ImageFormat::kJpeg;
  if (size >= 8 && std::memcmp(data, kPng, 8) == 0) return ImageFormat::kPng;
  return ImageFormat::kUnknown;
}

Image decode_image(const uint8_t* data, std::size_t size, int channels, const std::string& name) {
  check_channels(channels, "decode_image");
  switch (sniff_image_format(data, size)) {
    case ImageFormat::kJpeg:
      return decode_jpeg(data, size, channels, name);
    case ImageFormat::kPng:
      return decode_png(data, size, channels, name);
    case ImageFormat::kUnknown:
      break;
  }
  decode_failure(name, size == 0 ? "empty file" : "not a JPEG or PNG file");
}

Image read_image(const std::string& path, int channels) {
  const std::vector<uint8_t> bytes = read_file_bytes(path);
  return decode_image(bytes.data(), bytes.size(), channels, path);
}

std::vector<uint8_t> encode_png(const Image& image) {
  check_image(image, "encode_png");
  png_image png;
  std::memset(&png, 0, sizeof(png));
  png.version = PNG_IMAGE_VERSION;
  png.width = static_cast<png_uint_32>(image.width);
  png.height = static_cast<png_uint_32>(image.height);
  png.format = image.channels == 3 ? PNG_FORMAT_RGB : PNG_FORMAT_GRAY;
  png_alloc_size_t size = 0;
  if (png_image_write_to_memory(&png, nullptr, &size, 0, image.pixels.data(), 0, nullptr) == 0) {
    throw RuntimeError(std::string("cannot encode PNG: ") + png.message);
  }
  std::vector<uint8_t> out(size);
  if (png_image_write_to_memory(&png, out.data(), &size, 0, image.pixels.data(), 0, nullptr) == 0) {
    throw RuntimeError(std::string("cannot encode PNG: ") + png.message);
  }
  out.resize(size);
  return out;
}

std::vector<uint8_t> encode_jpeg(const Image& image, int quality) {
  check_image(image, "encode_jpeg");
  TjHandle tj(tjInitCompress());
  if (tj.handle == nullptr) throw RuntimeError("cannot encode JPEG: TurboJPEG initialisation failed");
  unsigned char* buffer = nullptr;
  unsigned long size = 0;
  const bool rgb = image.channels == 3;
  const int rc = tjCompress2(tj.handle, image.pixels.data(), static_cast<int>(image.width), 0,
                             static_cast<int>(image.height), rgb ? TJPF_RGB : TJPF_GRAY, &buffer, &size,
                             rgb ? TJSAMP_444 : TJSAMP_GRAY, quality, TJFLAG_ACCURATEDCT);
  std::unique_ptr<unsigned char, void (*)(unsigned char*)> owned(buffer, tjFree);
  if (rc != 0) throw RuntimeError("cannot encode JPEG: " + tj_error(tj.handle));
  return std::vector<uint8_t>(buffer, buffer + size);
}

void write_png(const std::string& path, const Image& image) { write_bytes(path, encode_png(image)); }

void write_jpeg(const std::string& path, const Image& image, int quality) {
  write_bytes(path, encode_jpeg(image, quality));
}

}  // namespace sparsevit::data
