// A tiny two-class IDX dataset (MNIST layout) for end-to-end tests: label 0 has a bright
// top half, label 1 a bright bottom half, with deterministic noise. A ViT learns it in a
// few hundred images.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

namespace sparsevit::testing {

inline void write_be32(std::ofstream& out, uint32_t v) {
  const unsigned char b[4] = {static_cast<unsigned char>(v >> 24), static_cast<unsigned char>(v >> 16),
                              static_cast<unsigned char>(v >> 8), static_cast<unsigned char>(v)};
  out.write(reinterpret_cast<const char*>(b), 4);
}

// Writes DIR/PREFIX-images-idx3-ubyte and DIR/PREFIX-labels-idx1-ubyte (PREFIX: train | t10k).
inline void write_synthetic_idx(const std::filesystem::path& dir, const std::string& prefix, int n, uint32_t seed) {
  std::ofstream images(dir / (prefix + "-images-idx3-ubyte"), std::ios::binary);
  std::ofstream labels(dir / (prefix + "-labels-idx1-ubyte"), std::ios::binary);
  write_be32(images, 2051);
  write_be32(images, static_cast<uint32_t>(n));
  write_be32(images, 28);
  write_be32(images, 28);
  write_be32(labels, 2049);
  write_be32(labels, static_cast<uint32_t>(n));
  uint32_t state = seed;
  for (int i = 0; i < n; ++i) {
    const unsigned char label = static_cast<unsigned char>(i % 2);
    labels.put(static_cast<char>(label));
    for (int y = 0; y < 28; ++y)
      for (int x = 0; x < 28; ++x) {
        state = state * 1664525u + 1013904223u;
        const bool bright = (y < 14) == (label == 0);
        images.put(static_cast<char>((bright ? 160 : 20) + (state >> 26)));
      }
  }
}

}  // namespace sparsevit::testing
