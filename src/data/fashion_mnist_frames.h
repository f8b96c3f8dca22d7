// fashion_mnist_frames: Fashion-MNIST images as moving_fashion_mnist's frames show them, for
// pretraining the image ViT a TimeSformer starts from (scripts/video-demo), as TimeSformer starts
// from ImageNet weights. Sample i is Fashion-MNIST image i of the split averaged 2x2 to 14x14 (the
// clips' garments, byte for byte) on a black 28x28 canvas, at a corner drawn from the clips'
// resting-garment law; its label is the image's class. Training samples draw the corner from the
// loader's per-sample generator (a new place every epoch); evaluation samples from a fixed one.
#pragma once

#include <memory>
#include <string>

#include "data/dataset.h"
#include "data/moving_fashion_mnist.h"

namespace sparsevit::data {

class FashionMnistFrames : public Dataset {
 public:
  static constexpr uint64_t kEvalSeed = 3;  // evaluation corners: Rng(mix_seed(3, index))

  // The train (60000) or test (10000) split of the Fashion-MNIST IDX files in `fashion_mnist_path`
  // ("" : /usr/share/datasets/fashion-mnist); errors as MovingFashionMnist's.
  FashionMnistFrames(const std::string& fashion_mnist_path, bool train);

  int64_t size() const override { return garments_.source_size(); }
  // uint8 [1, 28, 28]: the evaluation placement.
  Sample get(int64_t index) const override;
  // Training splits place the garment with `rng`; the test split ignores it.
  Sample get(int64_t index, Rng& rng) const override;
  int64_t label(int64_t index) const override;
  int64_t num_classes() const override { return MovingFashionMnist::kClasses; }
  int64_t channels() const override { return 1; }
  // "fashion_mnist_frames train: 60000 images 1x28x28 (14x14 garments), 10 classes (from DIR)"
  std::string describe() const override;
  // The image of `index` with the garment's corner at (x, y), each in [0, 14].
  Sample render(int64_t index, int64_t x, int64_t y) const;

 private:
  MovingFashionMnist garments_;
};

}  // namespace sparsevit::data
