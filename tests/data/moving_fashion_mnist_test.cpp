#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <chrono>
#include <cmath>
#include <memory>
#include <thread>
#include <vector>

#include "data/dataset.h"
#include "data/idx_dataset.h"
#include "data/moving_fashion_mnist.h"
#include "data_test_util.h"

namespace sparsevit::data {
namespace {

using testing::TempDir;
using testing::expect_error;
using M = MovingFashionMnist;

constexpr int64_t kT = M::kFrames, kS = M::kSize, kG = M::kGarmentSize;

std::string fashion_path() { return default_data_path("fashion_mnist"); }
bool fashion_train_and_test_installed() {
  return !find_idx_file(fashion_path(), "train-images-idx3-ubyte").empty() &&
         !find_idx_file(fashion_path(), "t10k-images-idx3-ubyte").empty();
}

// A 14x14 garment straight from the IDX reader, averaged 2x2 here (independently of the generator).
std::vector<uint8_t> garment(const IdxDataset& source, int64_t image) {
  const at::Tensor img = source.get(image).image;
  const auto a = img.accessor<uint8_t, 3>();
  std::vector<uint8_t> g(kG * kG);
  for (int64_t r = 0; r < kG; ++r)
    for (int64_t c = 0; c < kG; ++c)
      g[r * kG + c] = static_cast<uint8_t>(
          (a[0][2 * r][2 * c] + a[0][2 * r][2 * c + 1] + a[0][2 * r + 1][2 * c] + a[0][2 * r + 1][2 * c + 1] + 2) / 4);
  return g;
}

// One garment alone on the black canvas, corner (x, y).
std::vector<uint8_t> layer(const std::vector<uint8_t>& g, int64_t x, int64_t y) {
  std::vector<uint8_t> canvas(kS * kS, 0);
  for (int64_t r = 0; r < kG; ++r)
    for (int64_t c = 0; c < kG; ++c) canvas[(y + r) * kS + x + c] = g[r * kG + c];
  return canvas;
}

bool in_box(int64_t px, int64_t py, int64_t x, int64_t y) { return px >= x && px < x + kG && py >= y && py < y + kG; }

uint64_t fnv1a(uint64_t h, const at::Tensor& t) {
  const at::Tensor c = t.contiguous();
  const uint8_t* p = c.data_ptr<uint8_t>();
  for (int64_t i = 0; i < c.numel(); ++i) h = (h ^ p[i]) * 0x100000001B3ULL;
  return h;
}

class MovingFashionMnistTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!fashion_train_and_test_installed()) return;
    train_ = std::make_shared<const M>("", true);
    test_ = std::make_shared<const M>("", false);
    train_source_ = IdxDataset::from_folder(fashion_path(), true, "Fashion-MNIST");
    test_source_ = IdxDataset::from_folder(fashion_path(), false, "Fashion-MNIST");
  }
  static void TearDownTestSuite() {
    train_.reset();
    test_.reset();
    train_source_.reset();
    test_source_.reset();
  }
  void SetUp() override {
    if (!fashion_train_and_test_installed()) GTEST_SKIP() << "dataset-fashion-mnist not installed";
  }

  static std::shared_ptr<const M> train_, test_;
  static std::shared_ptr<const IdxDataset> train_source_, test_source_;
};

std::shared_ptr<const M> MovingFashionMnistTest::train_, MovingFashionMnistTest::test_;
std::shared_ptr<const IdxDataset> MovingFashionMnistTest::train_source_, MovingFashionMnistTest::test_source_;

TEST_F(MovingFashionMnistTest, ShapesDtypeFpsAndDescribe) {
  EXPECT_EQ(train_->size(), 10000);
  EXPECT_EQ(test_->size(), 2000);
  EXPECT_EQ(train_->num_classes(), 10);
  EXPECT_EQ(train_->channels(), 1);
  EXPECT_EQ(train_->source_size(), 60000);
  EXPECT_EQ(test_->source_size(), 10000);
  EXPECT_EQ(train_->describe(),
            "moving_fashion_mnist train: 10000 clips 1x16x28x28, 10 classes (from /usr/share/datasets/fashion-mnist)");
  EXPECT_EQ(test_->describe(),
            "moving_fashion_mnist test: 2000 clips 1x16x28x28, 10 classes (from /usr/share/datasets/fashion-mnist)");
  for (const M* ds : {train_.get(), test_.get()}) {
    for (int64_t i : {int64_t{0}, int64_t{7}, ds->size() - 1}) {
      const VideoClip c = ds->clip(i);
      EXPECT_EQ(c.frames.sizes(), (at::IntArrayRef{1, 16, 28, 28}));
      EXPECT_EQ(c.frames.scalar_type(), at::kByte);
      EXPECT_TRUE(c.frames.is_contiguous());
      EXPECT_DOUBLE_EQ(c.fps, 30.0);
    }
  }
  const M small(fashion_path(), false, 37);
  EXPECT_EQ(small.size(), 37);
  EXPECT_NE(small.describe().find("37 clips"), std::string::npos);
  // A shorter set is a prefix of the default one.
  EXPECT_TRUE(at::equal(small.clip(36).frames, test_->clip(36).frames));
}

TEST_F(MovingFashionMnistTest, DeterministicAcrossCallsInstancesAndThreads) {
  const M again(fashion_path(), false);
  for (int64_t i = 0; i < 50; ++i) {
    const at::Tensor a = test_->clip(i).frames;
    EXPECT_TRUE(at::equal(a, test_->clip(i).frames)) << i;
    EXPECT_TRUE(at::equal(a, again.clip(i).frames)) << i;
  }
  // Concurrent generation gives the same clips (no mutable state).
  std::vector<at::Tensor> from_threads(200);
  std::vector<std::thread> workers;
  for (int w = 0; w < 2; ++w) {
    workers.emplace_back([&, w] {
      for (int64_t i = w; i < 200; i += 2) from_threads[static_cast<std::size_t>(i)] = train_->clip(i).frames;
    });
  }
  for (auto& t : workers) t.join();
  for (int64_t i = 0; i < 200; ++i) EXPECT_TRUE(at::equal(from_threads[static_cast<std::size_t>(i)], train_->clip(i).frames)) << i;
}

// Pins the generator: any change to the draws, the motion or the compositing changes these.
TEST_F(MovingFashionMnistTest, PinnedChecksum) {
  uint64_t h_train = 0xCBF29CE484222325ULL, h_test = 0xCBF29CE484222325ULL;
  for (int64_t i = 0; i < 5; ++i) h_train = fnv1a(h_train, train_->clip(i).frames);
  for (int64_t i = 0; i < 5; ++i) h_test = fnv1a(h_test, test_->clip(i).frames);
  EXPECT_EQ(h_train, 0xC560A6FCE34BDECAULL) << std::hex << h_train;
  EXPECT_EQ(h_test, 0x0D2364FF149FA203ULL) << std::hex << h_test;
  // Train clip 0, as docs/datasets.md spells it out.
  const M::ClipRecipe r = train_->recipe(0);
  EXPECT_EQ(r.label, 0);
  EXPECT_EQ(r.moving_image, 34504);
  EXPECT_EQ(r.other_image, 51606);
  EXPECT_EQ(r.other_label, 2);
  EXPECT_EQ(r.x0, 7.6875);       // 492 / 64
  EXPECT_EQ(r.y0, 12.15625);      // 778 / 64
  EXPECT_EQ(r.dx, 305.0 / 960);  // X = 305/64 px over 15 frames
  EXPECT_EQ(r.dy, -286.0 / 960);
  EXPECT_EQ(r.other_x[0], 3);
  EXPECT_EQ(r.other_y[0], 11);
  EXPECT_EQ(r.moving_x[0], 8);
  EXPECT_EQ(r.moving_y[0], 12);
  EXPECT_EQ(r.moving_x[15], 12);
  EXPECT_EQ(r.moving_y[15], 8);
}

TEST_F(MovingFashionMnistTest, LabelsExactlyBalancedAndTheMovingGarmentsClass) {
  for (const M* ds : {train_.get(), test_.get()}) {
    std::vector<int64_t> counts(10, 0);
    for (int64_t i = 0; i < ds->size(); ++i) {
      ASSERT_EQ(ds->label(i), i % 10);
      ++counts[static_cast<std::size_t>(ds->label(i))];
    }
    for (int64_t c : counts) EXPECT_EQ(c, ds->size() / 10);
    for (int64_t i = 0; i < ds->size(); i += 7) {
      const M::ClipRecipe r = ds->recipe(i);
      ASSERT_EQ(r.label, ds->label(i));
      ASSERT_EQ(ds->source_label(r.moving_image), r.label) << i;
      ASSERT_EQ(ds->source_label(r.other_image), r.other_label) << i;
      ASSERT_NE(r.other_label, r.label) << i;
    }
  }
}

// Every frame is exactly max(static layer, moving layer at its rounded position), rendered here
// from the split's own IDX file: train clips come from train images, test clips from test images.
TEST_F(MovingFashionMnistTest, FramesAreTheRecipeFromTheSplitsOwnImages) {
  for (bool train : {true, false}) {
    const M& ds = train ? *train_ : *test_;
    const IdxDataset& source = train ? *train_source_ : *test_source_;
    const IdxDataset& other = train ? *test_source_ : *train_source_;
    int64_t max_image = 0;
    for (int64_t i = 0; i < 300; ++i) {
      const M::ClipRecipe r = ds.recipe(i);
      ASSERT_LT(r.moving_image, source.size());
      ASSERT_LT(r.other_image, source.size());
      max_image = std::max({max_image, r.moving_image, r.other_image});
      const auto still = layer(garment(source, r.other_image), r.other_x[0], r.other_y[0]);
      const auto mover = garment(source, r.moving_image);
      const at::Tensor frames = ds.clip(i).frames;
      const auto f = frames.accessor<uint8_t, 4>();
      for (int64_t t = 0; t < kT; ++t) {
        const auto moving = layer(mover, r.moving_x[static_cast<std::size_t>(t)], r.moving_y[static_cast<std::size_t>(t)]);
        for (int64_t p = 0; p < kS * kS; ++p) {
          ASSERT_EQ(f[0][t][p / kS][p % kS], std::max(still[static_cast<std::size_t>(p)], moving[static_cast<std::size_t>(p)]))
              << (train ? "train" : "test") << " clip " << i << " frame " << t << " pixel " << p;
        }
      }
      if (i == 0 && r.moving_image < other.size()) {
        // The other split's image of the same index does not reproduce the clip.
        const auto wrong = layer(garment(other, r.moving_image), r.moving_x[0], r.moving_y[0]);
        bool differs = false;
        for (int64_t p = 0; p < kS * kS && !differs; ++p) {
          differs = f[0][0][p / kS][p % kS] != std::max(still[static_cast<std::size_t>(p)], wrong[static_cast<std::size_t>(p)]);
        }
        EXPECT_TRUE(differs);
      }
    }
    if (train) {
      EXPECT_GE(max_image, 10000);  // draws from the whole 60000-image train file
    }
  }
  for (int64_t i = 0; i < test_->size(); ++i) {
    const M::ClipRecipe r = test_->recipe(i);
    ASSERT_LT(std::max(r.moving_image, r.other_image), 10000) << i;
  }
}

TEST_F(MovingFashionMnistTest, StaticGarmentIdenticalInEveryFrameAndTheMovingOneMoves) {
  for (const M* ds : {train_.get(), test_.get()}) {
    int64_t clips_with_static_pixels = 0;
    for (int64_t i = 0; i < 200; ++i) {
      const M::ClipRecipe r = ds->recipe(i);
      const at::Tensor frames = ds->clip(i).frames;
      const auto f = frames.accessor<uint8_t, 4>();
      // Outside every position of the moving garment, each frame shows the static one alone:
      // identical in every frame, and black outside its box.
      bool some_static_pixel = false;
      for (int64_t y = 0; y < kS; ++y) {
        for (int64_t x = 0; x < kS; ++x) {
          bool touched = false;
          for (int64_t t = 0; t < kT; ++t) touched |= in_box(x, y, r.moving_x[static_cast<std::size_t>(t)], r.moving_y[static_cast<std::size_t>(t)]);
          if (touched) continue;
          if (!in_box(x, y, r.other_x[0], r.other_y[0])) {
            ASSERT_EQ(f[0][0][y][x], 0) << i;
          }
          some_static_pixel |= f[0][0][y][x] != 0;
          for (int64_t t = 1; t < kT; ++t) ASSERT_EQ(f[0][t][y][x], f[0][0][y][x]) << "clip " << i << " frame " << t;
        }
      }
      clips_with_static_pixels += some_static_pixel;
      // The first and last frames differ, and only where the moving garment is in either.
      int64_t changed = 0;
      for (int64_t y = 0; y < kS; ++y) {
        for (int64_t x = 0; x < kS; ++x) {
          if (f[0][0][y][x] == f[0][kT - 1][y][x]) continue;
          ++changed;
          ASSERT_TRUE(in_box(x, y, r.moving_x[0], r.moving_y[0]) || in_box(x, y, r.moving_x[kT - 1], r.moving_y[kT - 1]))
              << "clip " << i << " pixel (" << x << ", " << y << ") changes outside the moving garment";
        }
      }
      EXPECT_GT(changed, 20) << i;
      EXPECT_FALSE(at::equal(frames.select(1, 0), frames.select(1, kT - 1))) << i;
    }
    // Garments overlap (two 14x14 boxes on 28x28, placed independently), but in about 80% of
    // clips some of the static garment lies outside every position of the moving one.
    EXPECT_GE(clips_with_static_pixels, 140);
  }
}

TEST_F(MovingFashionMnistTest, MotionStraightConstantAndInsideTheCanvas) {
  for (const M* ds : {train_.get(), test_.get()}) {
    for (int64_t i = 0; i < ds->size(); ++i) {
      const M::ClipRecipe r = ds->recipe(i);
      ASSERT_GE(r.other_x[0], 0);
      ASSERT_LE(r.other_x[0], M::kMaxOffset);
      ASSERT_GE(r.other_y[0], 0);
      ASSERT_LE(r.other_y[0], M::kMaxOffset);
      const double travel = std::hypot(15 * r.dx, 15 * r.dy);
      ASSERT_GE(travel, M::kMinTravel - 0.02) << i;
      ASSERT_LE(travel, M::kMaxTravel + 0.02) << i;
      ASSERT_GE(r.x0, 0.0);
      ASSERT_GE(r.y0, 0.0);
      for (std::size_t t = 0; t < static_cast<std::size_t>(kT); ++t) {
        ASSERT_GE(r.moving_x[t], 0) << i;
        ASSERT_LE(r.moving_x[t], M::kMaxOffset) << i;
        ASSERT_GE(r.moving_y[t], 0) << i;
        ASSERT_LE(r.moving_y[t], M::kMaxOffset) << i;
        ASSERT_LE(std::abs(static_cast<double>(r.moving_x[t]) - (r.x0 + static_cast<double>(t) * r.dx)), 0.5 + 1e-9) << i;
        ASSERT_LE(std::abs(static_cast<double>(r.moving_y[t]) - (r.y0 + static_cast<double>(t) * r.dy)), 0.5 + 1e-9) << i;
      }
    }
  }
}

TEST_F(MovingFashionMnistTest, GeneratesAClipInWellUnderAMillisecond) {
  const auto start = std::chrono::steady_clock::now();
  int64_t sum = 0;
  constexpr int64_t n = 2000;
  for (int64_t i = 0; i < n; ++i) sum += train_->clip(i).frames.data_ptr<uint8_t>()[0];
  const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() / n;
  std::printf("moving_fashion_mnist: %.2f us per clip (%lld)\n", us, static_cast<long long>(sum));
  EXPECT_LT(us, 1000.0);
}

// ---------------------------------------------------------------- which_moves_first (moving_fashion_mnist_order)

class MovingFashionMnistOrderTest : public MovingFashionMnistTest {
 protected:
  static std::shared_ptr<const M> order(bool train) {
    static const auto train_set = std::make_shared<const M>("", true, 0, M::Task::kWhichMovesFirst);
    static const auto test_set = std::make_shared<const M>("", false, 0, M::Task::kWhichMovesFirst);
    return train ? train_set : test_set;
  }
};

TEST_F(MovingFashionMnistOrderTest, NameDescribeAndPinnedChecksum) {
  EXPECT_STREQ(M::dataset_name(M::Task::kWhichMovesFirst), "moving_fashion_mnist_order");
  EXPECT_EQ(order(false)->describe(), "moving_fashion_mnist_order test: 2000 clips 1x16x28x28, 10 classes (from "
                                      "/usr/share/datasets/fashion-mnist)");
  uint64_t h = 0xCBF29CE484222325ULL;
  for (int64_t i = 0; i < 5; ++i) h = fnv1a(h, order(true)->clip(i).frames);
  EXPECT_EQ(h, 0x80373024DCBE2110ULL) << std::hex << h;
  // The labelled garment and its path are the which_moves clip's: the same first draws.
  const M::ClipRecipe r = order(true)->recipe(0), w = train_->recipe(0);
  EXPECT_EQ(r.moving_image, w.moving_image);
  EXPECT_EQ(r.other_image, w.other_image);
  EXPECT_EQ(r.x0, w.x0);
  EXPECT_EQ(r.dx, w.dx);
  EXPECT_EQ(r.moving_x[0], w.moving_x[0]);
  EXPECT_EQ(r.moving_x[7], w.moving_x[14]);  // path time 2t
  EXPECT_EQ(r.moving_x[15], w.moving_x[15]);
}

// The first garment moves in frames 0-8 only and the second in frames 7-15 only, along straight
// paths inside the canvas; every frame is max(other layer, moving layer) of the split's images.
TEST_F(MovingFashionMnistOrderTest, FirstMovesThenSecondAndFramesAreTheRecipe) {
  for (bool train : {true, false}) {
    const M& ds = *order(train);
    const IdxDataset& source = train ? *train_source_ : *test_source_;
    int64_t first_moved = 0, second_moved = 0;
    for (int64_t i = 0; i < 200; ++i) {
      const M::ClipRecipe r = ds.recipe(i);
      ASSERT_EQ(r.label, i % 10);
      ASSERT_EQ(ds.source_label(r.moving_image), r.label);
      ASSERT_EQ(ds.source_label(r.other_image), r.other_label);
      ASSERT_NE(r.other_label, r.label);
      for (std::size_t t = 0; t < static_cast<std::size_t>(kT); ++t) {
        const double s = std::min(2.0 * static_cast<double>(t), 15.0);
        ASSERT_LE(std::abs(static_cast<double>(r.moving_x[t]) - (r.x0 + s * r.dx)), 0.5 + 1e-9) << i << " " << t;
        ASSERT_LE(std::abs(static_cast<double>(r.moving_y[t]) - (r.y0 + s * r.dy)), 0.5 + 1e-9) << i << " " << t;
        for (int64_t v : {r.moving_x[t], r.moving_y[t], r.other_x[t], r.other_y[t]}) {
          ASSERT_GE(v, 0);
          ASSERT_LE(v, M::kMaxOffset);
        }
        if (t >= 8) {  // the first garment has arrived
          ASSERT_EQ(r.moving_x[t], r.moving_x[8]);
          ASSERT_EQ(r.moving_y[t], r.moving_y[8]);
        }
        if (t <= 7) {  // the second has not left
          ASSERT_EQ(r.other_x[t], r.other_x[0]);
          ASSERT_EQ(r.other_y[t], r.other_y[0]);
        }
      }
      first_moved += r.moving_x[0] != r.moving_x[8] || r.moving_y[0] != r.moving_y[8];
      second_moved += r.other_x[7] != r.other_x[15] || r.other_y[7] != r.other_y[15];
      const auto mover = garment(source, r.moving_image), other = garment(source, r.other_image);
      const at::Tensor frames = ds.clip(i).frames;
      const auto f = frames.accessor<uint8_t, 4>();
      for (int64_t t = 0; t < kT; ++t) {
        const auto tt = static_cast<std::size_t>(t);
        const auto a = layer(other, r.other_x[tt], r.other_y[tt]), b = layer(mover, r.moving_x[tt], r.moving_y[tt]);
        for (int64_t p = 0; p < kS * kS; ++p) {
          ASSERT_EQ(f[0][t][p / kS][p % kS], std::max(a[static_cast<std::size_t>(p)], b[static_cast<std::size_t>(p)]))
              << "clip " << i << " frame " << t << " pixel " << p;
        }
      }
    }
    EXPECT_EQ(first_moved, 200);   // 6-8 px of travel always moves the corner
    EXPECT_EQ(second_moved, 200);
  }
}

// Reversing a clip's frames must give an equally likely clip with the other label, or an
// order-blind model could beat 50%: the two garments' roles are the same law read backwards.
// Over the 10000 train clips, the first garment's start corners have the law of the second's end
// corners and vice versa (both are a path's start or end), and the mean displacement is ~0.
TEST_F(MovingFashionMnistOrderTest, TimeReversalSwapsTheRolesInDistribution) {
  const M& ds = *order(true);
  std::vector<double> first_start(15, 0), second_end(15, 0), first_end(15, 0), second_start(15, 0);
  double mean_dx = 0;
  for (int64_t i = 0; i < ds.size(); ++i) {
    const M::ClipRecipe r = ds.recipe(i);
    ++first_start[static_cast<std::size_t>(r.moving_x[0])];
    ++first_end[static_cast<std::size_t>(r.moving_x[15])];
    ++second_start[static_cast<std::size_t>(r.other_x[0])];
    ++second_end[static_cast<std::size_t>(r.other_x[15])];
    mean_dx += static_cast<double>(r.moving_x[15] - r.moving_x[0]) / static_cast<double>(ds.size());
  }
  // Each histogram has 10000 draws over 15 bins: binomial noise ~sqrt(n p) <= ~35 per bin.
  for (std::size_t b = 0; b < 15; ++b) {
    EXPECT_NEAR(first_start[b], second_end[b], 150) << b;
    EXPECT_NEAR(first_end[b], second_start[b], 150) << b;
    EXPECT_NEAR(first_start[b], first_end[b], 150) << b;
  }
  EXPECT_NEAR(mean_dx, 0.0, 0.15);
}

TEST_F(MovingFashionMnistTest, BadIndicesAreRuntimeErrors) {
  expect_error<RuntimeError>([&] { test_->clip(2000); }, {"clip index 2000", "moving_fashion_mnist test"});
  expect_error<RuntimeError>([&] { test_->recipe(-1); }, {"clip index -1"});
  expect_error<RuntimeError>([&] { test_->label(2000); }, {"clip index 2000"});
}

TEST(MovingFashionMnist, MissingFolderOrFilesAreUsageErrors) {
  TempDir dir;
  const std::string missing = dir / "no-such-folder";
  expect_error<UsageError>([&] { M(missing, true); }, {missing, "dataset-fashion-mnist"});
  expect_error<UsageError>([&] { M(dir.path().string(), false); },
                           {dir.path().string(), "t10k-images-idx3-ubyte", "dataset-fashion-mnist"});
  expect_error<UsageError>([&] { M(dir.path().string(), true, -1); }, {"num_clips"});
}

}  // namespace
}  // namespace sparsevit::data
