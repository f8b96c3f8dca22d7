// JPEG (TurboJPEG) and PNG (libpng) decoding and encoding of 8-bit images held as
// interleaved HWC bytes. No LibTorch here: the dataset readers wrap the pixels in tensors.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sparsevit::data {

// An 8-bit image, rows top to bottom, channels interleaved (HWC): 1 = gray, 3 = RGB.
struct Image {
  int64_t width = 0;
  int64_t height = 0;
  int64_t channels = 0;
  std::vector<uint8_t> pixels;  // height * width * channels
};

enum class ImageFormat { kUnknown, kJpeg, kPng };

// The format from the first bytes (JPEG FF D8 FF, PNG's 8-byte signature), not the name.
ImageFormat sniff_image_format(const uint8_t* data, std::size_t size);

// Decodes a JPEG or PNG to `channels` (1: gray by luminance, 3: RGB). PNG palette, gray and
// alpha images are expanded (alpha composited on black), 16-bit samples reduced to 8 bits.
// Any failure is a RuntimeError naming `name`.
Image decode_image(const uint8_t* data, std::size_t size, int channels, const std::string& name);

// Reads and decodes the file at `path` (format sniffed from its bytes).
Image read_image(const std::string& path, int channels);

// Encoders (for tests, fixtures and previews); RuntimeError naming the file on failure.
std::vector<uint8_t> encode_png(const Image& image);
std::vector<uint8_t> encode_jpeg(const Image& image, int quality = 95);
void write_png(const std::string& path, const Image& image);
void write_jpeg(const std::string& path, const Image& image, int quality = 95);

}  // namespace sparsevit::data
