#include "data/moving_fashion_mnist.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "data/dataset.h"
#include "data/idx_dataset.h"
#include "data/random.h"
#include "util/errors.h"

namespace sparsevit::data {

namespace fs = std::filesystem;

namespace {

constexpr const char* kPackageHint = "install Debian's dataset-fashion-mnist (apt-get install dataset-fashion-mnist)";

// Direction vectors are integer points (a, b) of this annulus, drawn by rejection: uniform in
// angle, and normalised with sqrt alone (IEEE-exact), so no libm trigonometry enters the clips.
constexpr int64_t kDirRadius = 1024;
constexpr int64_t kDirMinRadius = 256;

constexpr int64_t kSteps = MovingFashionMnist::kFrames - 1;                 // 15 frame intervals
constexpr int64_t kTravelDenom = kSteps * MovingFashionMnist::kSubpixel;  // 960
constexpr int64_t kMaxCorner = MovingFashionMnist::kMaxOffset * MovingFashionMnist::kSubpixel;  // 896

// One straight constant-velocity path of a garment's top-left corner, exact in 1/64 px.
struct Path {
  int64_t x0 = 0, y0 = 0;        // corner at frame 0, 1/64 px
  int64_t big_x = 0, big_y = 0;  // displacement from frame 0 to frame 15, 1/64 px
  std::array<int64_t, MovingFashionMnist::kFrames> x{}, y{};  // corner in frame t, px
};

// Draws 3-5 of the recipe (see recipe()).
Path draw_path(Rng& rng) {
  using M = MovingFashionMnist;
  Path p;
  const int64_t travel = randint(rng, M::kMinTravel * M::kSubpixel, M::kMaxTravel * M::kSubpixel + 1);
  int64_t a = 0, b = 0, r2 = 0;
  do {
    a = randint(rng, -kDirRadius, kDirRadius + 1);
    b = randint(rng, -kDirRadius, kDirRadius + 1);
    r2 = a * a + b * b;
  } while (r2 < kDirMinRadius * kDirMinRadius || r2 > kDirRadius * kDirRadius);
  const double norm = std::sqrt(static_cast<double>(r2));
  p.big_x = std::llround(static_cast<double>(travel) * static_cast<double>(a) / norm);
  p.big_y = std::llround(static_cast<double>(travel) * static_cast<double>(b) / norm);
  p.x0 = randint(rng, std::max<int64_t>(0, -p.big_x), std::min(kMaxCorner, kMaxCorner - p.big_x) + 1);
  p.y0 = randint(rng, std::max<int64_t>(0, -p.big_y), std::min(kMaxCorner, kMaxCorner - p.big_y) + 1);
  for (int64_t t = 0; t < M::kFrames; ++t) {
    // 0 <= 15 x0 + t X <= 15 * 896, so the corner stays in [0, 14]: the garment never leaves.
    p.x[static_cast<std::size_t>(t)] = (kSteps * p.x0 + t * p.big_x + kTravelDenom / 2) / kTravelDenom;
    p.y[static_cast<std::size_t>(t)] = (kSteps * p.y0 + t * p.big_y + kTravelDenom / 2) / kTravelDenom;
  }
  return p;
}

}  // namespace

MovingFashionMnist::MovingFashionMnist(const std::string& fashion_mnist_path, bool train, int64_t num_clips,
                                       Task task)
    : path_(fashion_mnist_path.empty() ? default_data_path("fashion_mnist") : fashion_mnist_path),
      train_(train),
      task_(task),
      num_clips_(num_clips == 0 ? (train ? kDefaultTrainClips : kDefaultTestClips) : num_clips) {
  if (num_clips < 0) {
    throw UsageError(std::string(dataset_name(task)) + ": num_clips must be >= 0 (0: the default " +
                     std::to_string(train ? kDefaultTrainClips : kDefaultTestClips) + "), got " +
                     std::to_string(num_clips));
  }
  std::error_code ec;
  if (!fs::is_directory(path_, ec)) {
    throw UsageError("moving_fashion_mnist: Fashion-MNIST folder '" + path_ + "' does not exist (" + kPackageHint +
                     " or pass the folder of its IDX files)");
  }
  std::shared_ptr<const IdxDataset> source;
  try {
    source = IdxDataset::from_folder(path_, train, "Fashion-MNIST", kClasses);
  } catch (const UsageError& e) {
    throw UsageError(std::string("moving_fashion_mnist: ") + e.what() + " (" + kPackageHint + ")");
  }
  if (source->height() != 2 * kGarmentSize || source->width() != 2 * kGarmentSize) {
    throw RuntimeError("moving_fashion_mnist: '" + source->images_path() + "' holds " +
                       std::to_string(source->height()) + "x" + std::to_string(source->width()) +
                       " images, expected 28x28 (Fashion-MNIST)");
  }

  // Every image of the split averaged 2x2 (rounded half up) once, so a clip is two copies.
  const int64_t n = source->size();
  constexpr int64_t g = kGarmentSize, s = 2 * kGarmentSize;
  garments_.resize(static_cast<std::size_t>(n * g * g));
  source_labels_.resize(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const Sample sample = source->get(i);
    const uint8_t* src = sample.image.data_ptr<uint8_t>();
    uint8_t* dst = garments_.data() + i * g * g;
    for (int64_t r = 0; r < g; ++r) {
      for (int64_t c = 0; c < g; ++c) {
        const uint8_t* p = src + (2 * r) * s + 2 * c;
        dst[r * g + c] = static_cast<uint8_t>((p[0] + p[1] + p[s] + p[s + 1] + 2) / 4);
      }
    }
    source_labels_[static_cast<std::size_t>(i)] = static_cast<uint8_t>(sample.label);
    by_class_[static_cast<std::size_t>(sample.label)].push_back(i);
  }
  for (int64_t c = 0; c < kClasses; ++c) {
    if (by_class_[static_cast<std::size_t>(c)].empty()) {
      throw RuntimeError("moving_fashion_mnist: '" + source->labels_path() + "' has no image of class " +
                         std::to_string(c) + "; every class needs one");
    }
  }
}

void MovingFashionMnist::check_clip_index(int64_t index) const {
  if (index < 0 || index >= num_clips_) {
    throw RuntimeError("clip index " + std::to_string(index) + " out of range for " + describe());
  }
}

int64_t MovingFashionMnist::label(int64_t index) const {
  check_clip_index(index);
  return index % kClasses;
}

int64_t MovingFashionMnist::source_label(int64_t image) const {
  if (image < 0 || image >= source_size()) {
    throw RuntimeError("Fashion-MNIST image " + std::to_string(image) + " out of range [0, " +
                       std::to_string(source_size()) + ")");
  }
  return source_labels_[static_cast<std::size_t>(image)];
}

// The draws, in this order, from Rng(mix_seed(seed(), index)) (docs/datasets.md):
//  1. the moving garment: an image of class index % 10, uniform;
//  2. the static garment's class: (label + 1 + randint[0, 9)) % 10, then an image of it, uniform;
//  3. the travel L from frame 0 to frame 15: randint[384, 512] in 1/64 px (6..8 px);
//  4. the direction: integer (a, b) uniform in [-1024, 1024]^2 until 256^2 <= a^2 + b^2 <= 1024^2;
//     the displacement is (X, Y) = llround(L (a, b) / sqrt(a^2 + b^2)) in 1/64 px;
//  5. the start corner x0 in 1/64 px: randint over [max(0, -X), min(896, 896 - X)], then y0 the same;
//     frame t puts the corner at floor((15 x0 + t X + 480) / 960) px (round half up, exact);
//  6. which_moves: the static corner: a second path by 3-5, then a frame randint[0, 16); its
//     corner there. which_moves_first: the second garment's path by 3-5; the first garment is at
//     path time min(2t, 15) in frame t, the second at max(2t - 15, 0).
MovingFashionMnist::ClipRecipe MovingFashionMnist::recipe(int64_t index) const {
  check_clip_index(index);
  Rng rng(mix_seed(seed(), static_cast<uint64_t>(index)));
  ClipRecipe r;
  r.label = index % kClasses;

  const auto& movers = by_class_[static_cast<std::size_t>(r.label)];
  r.moving_image = movers[static_cast<std::size_t>(below(rng, movers.size()))];
  r.other_label = (r.label + 1 + randint(rng, 0, kClasses - 1)) % kClasses;
  const auto& others = by_class_[static_cast<std::size_t>(r.other_label)];
  r.other_image = others[static_cast<std::size_t>(below(rng, others.size()))];

  const Path moving = draw_path(rng);
  r.x0 = static_cast<double>(moving.x0) / kSubpixel;
  r.y0 = static_cast<double>(moving.y0) / kSubpixel;
  r.dx = static_cast<double>(moving.big_x) / static_cast<double>(kTravelDenom);
  r.dy = static_cast<double>(moving.big_y) / static_cast<double>(kTravelDenom);
  if (task_ == Task::kWhichMoves) {
    r.moving_x = moving.x;
    r.moving_y = moving.y;
    // Where a garment sits says as little as possible about whether it moves (docs/datasets.md).
    const auto corner = draw_resting_corner(rng);
    r.other_x.fill(corner[0]);
    r.other_y.fill(corner[1]);
    return r;
  }
  const Path other = draw_path(rng);
  // Both paths are drawn from one reversal-symmetric law (a path read backwards is as likely),
  // and the two time warps are each other's reversal, so reversing a clip's frames gives an
  // equally likely clip with the other label.
  for (int64_t t = 0; t < kFrames; ++t) {
    const auto first = static_cast<std::size_t>(std::min<int64_t>(2 * t, kSteps));
    const auto second = static_cast<std::size_t>(std::max<int64_t>(2 * t - kSteps, 0));
    r.moving_x[static_cast<std::size_t>(t)] = moving.x[first];
    r.moving_y[static_cast<std::size_t>(t)] = moving.y[first];
    r.other_x[static_cast<std::size_t>(t)] = other.x[second];
    r.other_y[static_cast<std::size_t>(t)] = other.y[second];
  }
  return r;
}

std::array<int64_t, 2> MovingFashionMnist::draw_resting_corner(Rng& rng) {
  const Path ghost = draw_path(rng);
  const auto frame = static_cast<std::size_t>(randint(rng, 0, kFrames));
  return {ghost.x[frame], ghost.y[frame]};
}

const uint8_t* MovingFashionMnist::garment(int64_t image) const {
  source_label(image);  // bounds check
  return garments_.data() + image * kGarmentSize * kGarmentSize;
}

VideoClip MovingFashionMnist::clip(int64_t index) const {
  const ClipRecipe r = recipe(index);
  at::Tensor frames = at::zeros({1, kFrames, kSize, kSize}, at::TensorOptions().dtype(at::kByte));
  uint8_t* out = frames.data_ptr<uint8_t>();
  constexpr int64_t g = kGarmentSize;
  const uint8_t* other = garments_.data() + r.other_image * g * g;
  const uint8_t* mover = garments_.data() + r.moving_image * g * g;
  for (int64_t t = 0; t < kFrames; ++t) {
    uint8_t* frame = out + t * kSize * kSize;
    const int64_t ox = r.other_x[static_cast<std::size_t>(t)], oy = r.other_y[static_cast<std::size_t>(t)];
    for (int64_t y = 0; y < g; ++y) {
      std::copy(other + y * g, other + (y + 1) * g, frame + (oy + y) * kSize + ox);
    }
    const int64_t mx = r.moving_x[static_cast<std::size_t>(t)], my = r.moving_y[static_cast<std::size_t>(t)];
    for (int64_t y = 0; y < g; ++y) {
      uint8_t* row = frame + (my + y) * kSize + mx;
      const uint8_t* src = mover + y * g;
      for (int64_t x = 0; x < g; ++x) row[x] = std::max(row[x], src[x]);
    }
  }
  return VideoClip{frames, kFps};
}

const char* MovingFashionMnist::dataset_name(Task task) {
  return task == Task::kWhichMoves ? "moving_fashion_mnist" : "moving_fashion_mnist_order";
}

std::string MovingFashionMnist::describe() const {
  return std::string(dataset_name(task_)) + " " + (train_ ? "train" : "test") + ": " + std::to_string(num_clips_) +
         " clips 1x" + std::to_string(kFrames) + "x" + std::to_string(kSize) + "x" + std::to_string(kSize) + ", " +
         std::to_string(kClasses) + " classes (from " + path_ + ")";
}

}  // namespace sparsevit::data
