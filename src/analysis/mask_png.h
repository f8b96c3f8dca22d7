// Mask images: the per-head attention masks of one layer as an 8-bit RGB PNG.
//
// Heads are laid out row-major in a grid (`columns` per grid row); head h is an N x N block
// whose pixel (row j, column k) is dark where query j may attend to key k and white elsewhere.
// When the pattern has a class token (num_prefix_tokens() == 1), its row and column (index 0)
// are tinted blue so they stand out. Blocks are separated by a 2-pixel light-grey gutter,
// which is also the colour of unused grid cells. Each token is `scale` x `scale` pixels.
#pragma once

#include <cstdint>
#include <string>

#include "patterns/pattern.h"

namespace sparsevit::analysis {

struct MaskPngOptions {
  int32_t columns = 0;     // heads per grid row; 0 = ceil(sqrt(H)) (clamped to H)
  int32_t scale = 0;       // pixels per token; 0 = largest that keeps the width <= max_width, >= 1
  int32_t max_width = 1600;  // target width for the automatic scale (pixels)
};

struct Rgb {
  uint8_t r, g, b;
  bool operator==(const Rgb& o) const { return r == o.r && g == o.g && b == o.b; }
  bool operator!=(const Rgb& o) const { return !(*this == o); }
};

namespace mask_png_colors {
inline constexpr Rgb kAllowed{0x20, 0x20, 0x20};       // (j, k) in the mask
inline constexpr Rgb kMasked{0xFF, 0xFF, 0xFF};        // (j, k) not in the mask
inline constexpr Rgb kClassAllowed{0x1F, 0x4E, 0xD8};  // class-token row/column, in the mask
inline constexpr Rgb kClassMasked{0xD6, 0xE2, 0xFF};   // class-token row/column, not in the mask
inline constexpr Rgb kGutter{0xD0, 0xD0, 0xD0};        // between heads and unused cells
}  // namespace mask_png_colors

inline constexpr int32_t kMaskPngGutter = 2;  // pixels between head blocks

// The image geometry write_mask_png uses for `pattern` and `options`.
struct MaskPngLayout {
  int32_t columns = 0;  // grid columns
  int32_t rows = 0;     // grid rows
  int32_t scale = 0;    // pixels per token
  int64_t width = 0;    // pixels
  int64_t height = 0;   // pixels
  // Top-left pixel of head h's block.
  int64_t block_x(int32_t h) const;
  int64_t block_y(int32_t h) const;
  int64_t block_size = 0;  // N * scale
};

// Throws UsageError for an empty pattern or negative options.
MaskPngLayout mask_png_layout(const patterns::Pattern& pattern, const MaskPngOptions& options = {});

// Writes the image atomically (a temporary file in the same directory, then rename).
// Throws sparsevit::RuntimeError naming `path` when it cannot be written, and UsageError for
// an empty pattern, negative options, or an image wider or taller than 1,000,000 pixels.
void write_mask_png(const patterns::Pattern& pattern, const std::string& path,
                    const MaskPngOptions& options = {});

}  // namespace sparsevit::analysis
