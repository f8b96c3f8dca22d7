#include "data/fashion_mnist_frames.h"

#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <set>

#include "data/dataset.h"
#include "data/idx_dataset.h"
#include "data/moving_fashion_mnist.h"
#include "util/errors.h"

namespace sparsevit::data {
namespace {

using M = MovingFashionMnist;

bool fashion_installed() {
  return !find_idx_file(default_data_path("fashion_mnist"), "t10k-images-idx3-ubyte").empty();
}

// Where the garment's box starts: the first row and column with a nonzero byte can only be at or
// after the corner, so render at every corner and compare instead of inferring.
int64_t corner_of(const FashionMnistFrames& ds, const Sample& s, int64_t index) {
  for (int64_t y = 0; y <= M::kMaxOffset; ++y)
    for (int64_t x = 0; x <= M::kMaxOffset; ++x)
      if (at::equal(ds.render(index, x, y).image, s.image)) return y * 100 + x;
  return -1;
}

class FashionMnistFramesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fashion_installed()) GTEST_SKIP() << "dataset-fashion-mnist not installed";
  }
};

// Every sample is the clips' garment of the same image, byte for byte, alone on black, with the
// image's Fashion-MNIST label; the factory, the sizes and the normalisation are the video's.
TEST_F(FashionMnistFramesTest, TheClipsGarmentsWithTheirLabels) {
  const auto test = make_dataset("fashion_mnist_frames", "", false);
  const auto train = make_dataset("fashion_mnist_frames", "", true);
  const auto source = IdxDataset::from_folder(default_data_path("fashion_mnist"), false, "Fashion-MNIST");
  const M clips("", false, 10);
  EXPECT_EQ(test->size(), 10000);
  EXPECT_EQ(train->size(), 60000);
  EXPECT_EQ(test->num_classes(), 10);
  EXPECT_EQ(test->channels(), 1);
  EXPECT_EQ(test->describe(), "fashion_mnist_frames test: 10000 images 1x28x28 (14x14 garments), 10 classes (from "
                              "/usr/share/datasets/fashion-mnist)");
  const MeanStd norm = default_mean_std("fashion_mnist_frames", 1);
  EXPECT_EQ(norm.mean, std::vector<double>{0.45});
  EXPECT_EQ(norm.std, std::vector<double>{0.225});
  const auto& frames = dynamic_cast<const FashionMnistFrames&>(*test);
  for (int64_t i = 0; i < 300; ++i) {
    const Sample s = test->get(i);
    ASSERT_EQ(s.image.sizes(), (at::IntArrayRef{1, 28, 28}));
    ASSERT_EQ(s.label, source->get(i).label);
    ASSERT_EQ(test->label(i), s.label);
    const int64_t c = corner_of(frames, s, i);
    ASSERT_GE(c, 0) << i;
    const int64_t x = c % 100, y = c / 100;
    // The garment is MovingFashionMnist's 2x2 average of the same image.
    const auto a = s.image.accessor<uint8_t, 3>();
    const uint8_t* g = clips.garment(i);
    int64_t outside = 0;
    for (int64_t r = 0; r < 28; ++r)
      for (int64_t col = 0; col < 28; ++col) {
        const bool in = r >= y && r < y + 14 && col >= x && col < x + 14;
        if (in) ASSERT_EQ(a[0][r][col], g[(r - y) * 14 + (col - x)]);
        else outside += a[0][r][col];
      }
    ASSERT_EQ(outside, 0) << i;
  }
}

// Evaluation places a garment the same way every time; training draws a new place from the
// loader's generator (so epochs differ), and both spread over the canvas.
TEST_F(FashionMnistFramesTest, EvaluationFixedTrainingDrawnFromTheLoadersGenerator) {
  const FashionMnistFrames test("", false), train("", true);
  std::set<int64_t> eval_corners, train_corners;
  for (int64_t i = 0; i < 200; ++i) {
    Rng a(mix_seed(7, static_cast<uint64_t>(i))), b(mix_seed(8, static_cast<uint64_t>(i)));
    ASSERT_TRUE(at::equal(test.get(i).image, test.get(i, a).image));
    ASSERT_TRUE(at::equal(test.get(i).image, test.get(i).image));
    eval_corners.insert(corner_of(test, test.get(i), i));
    Rng a2(mix_seed(7, static_cast<uint64_t>(i)));
    const Sample first = train.get(i, a2);
    Rng a3(mix_seed(7, static_cast<uint64_t>(i)));
    ASSERT_TRUE(at::equal(first.image, train.get(i, a3).image));  // same generator, same sample
    train_corners.insert(corner_of(train, first, i));
  }
  int64_t moved = 0;
  for (int64_t i = 0; i < 50; ++i) {
    Rng a(mix_seed(7, static_cast<uint64_t>(i))), b(mix_seed(8, static_cast<uint64_t>(i)));
    moved += !at::equal(train.get(i, a).image, train.get(i, b).image);
  }
  EXPECT_GE(moved, 45);
  EXPECT_GE(eval_corners.size(), 60u);
  EXPECT_GE(train_corners.size(), 60u);
}

TEST_F(FashionMnistFramesTest, BadIndicesAndCornersAreRuntimeErrors) {
  const FashionMnistFrames test("", false);
  EXPECT_THROW(test.get(10000), RuntimeError);
  EXPECT_THROW(test.label(-1), RuntimeError);
  EXPECT_THROW(test.render(0, 15, 0), RuntimeError);
  EXPECT_THROW(FashionMnistFrames("/no/such/folder", true), UsageError);
}

}  // namespace
}  // namespace sparsevit::data
