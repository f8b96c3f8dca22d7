#include "data/fashion_mnist_frames.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "util/errors.h"

namespace sparsevit::data {

FashionMnistFrames::FashionMnistFrames(const std::string& fashion_mnist_path, bool train)
    : garments_(fashion_mnist_path, train, 1) {}

Sample FashionMnistFrames::render(int64_t index, int64_t x, int64_t y) const {
  using M = MovingFashionMnist;
  if (x < 0 || x > M::kMaxOffset || y < 0 || y > M::kMaxOffset) {
    throw RuntimeError("fashion_mnist_frames: corner (" + std::to_string(x) + ", " + std::to_string(y) +
                       ") outside [0, " + std::to_string(M::kMaxOffset) + "]");
  }
  const int64_t label = garments_.source_label(index);  // bounds check
  at::Tensor image = at::zeros({1, M::kSize, M::kSize}, at::TensorOptions().dtype(at::kByte));
  uint8_t* out = image.data_ptr<uint8_t>();
  const uint8_t* g = garments_.garment(index);
  for (int64_t r = 0; r < M::kGarmentSize; ++r) {
    std::copy(g + r * M::kGarmentSize, g + (r + 1) * M::kGarmentSize, out + (y + r) * M::kSize + x);
  }
  return Sample{image, label};
}

Sample FashionMnistFrames::get(int64_t index) const {
  check_index(*this, index);
  Rng rng(mix_seed(kEvalSeed, static_cast<uint64_t>(index)));
  const auto corner = MovingFashionMnist::draw_resting_corner(rng);
  return render(index, corner[0], corner[1]);
}

Sample FashionMnistFrames::get(int64_t index, Rng& rng) const {
  if (!garments_.train()) return get(index);
  check_index(*this, index);
  const auto corner = MovingFashionMnist::draw_resting_corner(rng);
  return render(index, corner[0], corner[1]);
}

int64_t FashionMnistFrames::label(int64_t index) const {
  check_index(*this, index);
  return garments_.source_label(index);
}

std::string FashionMnistFrames::describe() const {
  return std::string("fashion_mnist_frames ") + (garments_.train() ? "train" : "test") + ": " +
         std::to_string(size()) + " images 1x28x28 (14x14 garments), 10 classes (from " + garments_.path() + ")";
}

}  // namespace sparsevit::data
