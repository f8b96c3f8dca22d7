// The one PNG encoder (libpng) behind every image sparsevit writes: mask images, plots and
// attention maps. Rows are produced on demand, so a large mask image never exists in memory
// as pixels; the encoded bytes go to disk through util/atomic_file.
#pragma once

#include <cstdint>
#include <string>

namespace sparsevit::analysis {

// Fills `row` (width * 3 bytes, RGB8) with image row y. Must not throw.
using PngRowFn = void (*)(void* context, uint32_t y, uint8_t* row);

// Encodes a width x height RGB8 image; RuntimeError "libpng: ..." on failure.
std::string encode_rgb_png(uint32_t width, uint32_t height, PngRowFn row, void* context);

// Encodes and writes atomically; RuntimeError "cannot write PATH: ..." on failure.
void write_rgb_png(const std::string& path, uint32_t width, uint32_t height, PngRowFn row, void* context);

}  // namespace sparsevit::analysis
