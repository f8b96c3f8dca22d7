// moving_fashion_mnist: a deterministic synthetic video classification set generated on the fly
// from Fashion-MNIST (Debian's dataset-fashion-mnist), the embedded default video dataset of the
// TimeSformer model. Each clip holds two garments of different classes on a black 28x28 canvas.
// Two tasks (docs/datasets.md defines the generator exactly):
//   which_moves        one moves in a straight line, the other stands still; the label is the
//                      class of the moving one, so no single frame decides it.
//   which_moves_first  both move, one in the first half of the clip, the other in the second;
//                      the label is the class of the first. The set of clips is closed under time
//                      reversal, which swaps the two labels, so a model blind to frame order (or a
//                      single frame) can reach at most 50%: only order decides it.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "data/random.h"
#include "data/video_dataset.h"

namespace sparsevit::data {

class MovingFashionMnist : public VideoDataset {
 public:
  enum class Task { kWhichMoves, kWhichMovesFirst };

  static constexpr int64_t kFrames = 16;          // frames per clip
  static constexpr int64_t kSize = 28;            // canvas height = width
  static constexpr int64_t kGarmentSize = 14;     // a Fashion-MNIST image averaged 2x2
  static constexpr int64_t kMaxOffset = kSize - kGarmentSize;  // top-left corner in [0, 14]
  static constexpr int64_t kClasses = 10;
  static constexpr double kFps = 30.0;            // nominal
  static constexpr int64_t kDefaultTrainClips = 10000;
  static constexpr int64_t kDefaultTestClips = 2000;
  static constexpr int64_t kSubpixel = 64;        // motion is exact in 1/64 px (integer arithmetic)
  // px from frame 0 to frame 15, at least and at most (the design's 10-14 px let a single frame
  // tell the moving garment by its position in up to 82% of clips; docs/datasets.md).
  static constexpr int64_t kMinTravel = 6;
  static constexpr int64_t kMaxTravel = 8;
  static constexpr uint64_t kTrainSeed = 1;       // split seeds: clip i draws from mix_seed(seed, i)
  static constexpr uint64_t kTestSeed = 2;

  // Everything that decides clip `index`: the garments (indices into the split's Fashion-MNIST
  // IDX file), their positions (top-left corners, px) and the label. The "moving" garment is the
  // labelled one (which_moves: the one that moves; which_moves_first: the one that moves first).
  struct ClipRecipe {
    int64_t label = 0;           // = index % 10 = the Fashion-MNIST class of moving_image
    int64_t moving_image = 0;    // index into the split's IDX file (train- or t10k-)
    int64_t other_image = 0;
    int64_t other_label = 0;     // its class, always != label
    double x0 = 0, y0 = 0;       // moving garment's path: corner at path time 0 (a multiple of 1/64)
    double dx = 0, dy = 0;       // and velocity, px per path step (travel over the path = 15 * (dx, dy))
    // Corners in frame t. which_moves: moving at path time t, other the same in every frame.
    // which_moves_first: moving at path time min(2t, 15), other at path time max(2t - 15, 0) of
    // its own path (the first moves in frames 0-8, the second in frames 7-15).
    std::array<int64_t, kFrames> moving_x{}, moving_y{};
    std::array<int64_t, kFrames> other_x{}, other_y{};
  };

  // The train (`train-*`, 60000 images) or test (`t10k-*`, 10000 images) split of the
  // Fashion-MNIST IDX files in `fashion_mnist_path` ("" : /usr/share/datasets/fashion-mnist).
  // num_clips 0: 10000 train / 2000 test clips. A missing folder or missing files are
  // UsageErrors naming the path and the Debian package; corrupt files RuntimeErrors.
  MovingFashionMnist(const std::string& fashion_mnist_path, bool train, int64_t num_clips = 0,
                     Task task = Task::kWhichMoves);

  int64_t size() const override { return num_clips_; }
  // uint8 [1, 16, 28, 28], fps 30. Generated on every call (a few microseconds); thread-safe.
  VideoClip clip(int64_t index) const override;
  int64_t label(int64_t index) const override;
  int64_t num_classes() const override { return kClasses; }
  int64_t channels() const override { return 1; }
  // "moving_fashion_mnist train: 10000 clips 1x16x28x28, 10 classes (from DIR)"
  // ("moving_fashion_mnist_order ..." for which_moves_first)
  std::string describe() const override;
  // The --dataset name of the task: moving_fashion_mnist, moving_fashion_mnist_order.
  static const char* dataset_name(Task task);

  // The ground truth clip(index) renders.
  ClipRecipe recipe(int64_t index) const;

  bool train() const { return train_; }
  Task task() const { return task_; }
  uint64_t seed() const { return train_ ? kTrainSeed : kTestSeed; }
  const std::string& path() const { return path_; }
  // The split's Fashion-MNIST images: their number and the class of one.
  int64_t source_size() const { return static_cast<int64_t>(source_labels_.size()); }
  int64_t source_label(int64_t image) const;
  // Image `image` of the split averaged 2x2: kGarmentSize x kGarmentSize bytes, row-major.
  const uint8_t* garment(int64_t image) const;
  // A resting garment's top-left corner {x, y} (draw 6 of which_moves): where an independent
  // path is at a uniform frame, so it has the moving garment's time-averaged law. Both in [0, 14].
  static std::array<int64_t, 2> draw_resting_corner(Rng& rng);

 private:
  void check_clip_index(int64_t index) const;

  std::string path_;
  bool train_ = true;
  Task task_ = Task::kWhichMoves;
  int64_t num_clips_ = 0;
  std::vector<uint8_t> garments_;                         // [source_size, 14, 14], 2x2 averages
  std::vector<uint8_t> source_labels_;                    // [source_size]
  std::array<std::vector<int64_t>, kClasses> by_class_;  // image indices of each class, ascending
};

}  // namespace sparsevit::data
