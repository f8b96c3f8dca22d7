// The synthetic training batches of the trajectory golden test, generated the same way as
// tests/golden/vit_reference.py's synthetic_batches: one splitmix64 stream; per batch every
// pixel in C order as (2 * (r >> 56) - 255) / 128 (exact in float32), then every label as
// r % num_classes.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

namespace sparsevit::golden {

// Vigna's splitmix64 (the reference's SplitMix64).
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }

 private:
  uint64_t state_;
};

struct SyntheticBatch {
  at::Tensor images;  // [B, C, S, S] float32
  at::Tensor labels;  // [B] int64
};

inline std::vector<SyntheticBatch> synthetic_batches(uint64_t seed, int64_t num_batches, int64_t batch_size,
                                                     int64_t channels, int64_t image_size, int64_t num_classes) {
  SplitMix64 rng(seed);
  std::vector<SyntheticBatch> out;
  for (int64_t b = 0; b < num_batches; ++b) {
    at::Tensor images = at::empty({batch_size, channels, image_size, image_size}, at::kFloat);
    float* pixels = images.data_ptr<float>();
    for (int64_t i = 0; i < images.numel(); ++i)
      pixels[i] = static_cast<float>(2 * static_cast<int64_t>(rng.next() >> 56) - 255) / 128.0f;
    at::Tensor labels = at::empty({batch_size}, at::kLong);
    for (int64_t i = 0; i < batch_size; ++i)
      labels.data_ptr<int64_t>()[i] = static_cast<int64_t>(rng.next() % static_cast<uint64_t>(num_classes));
    out.push_back({images, labels});
  }
  return out;
}

}  // namespace sparsevit::golden
