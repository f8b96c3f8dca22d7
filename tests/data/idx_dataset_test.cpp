#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "data/dataset.h"
#include "data/file_bytes.h"
#include "data/idx_dataset.h"
#include "data_test_util.h"

namespace sparsevit::data {
namespace {

using testing::TempDir;
using testing::expect_error;
using testing::write_file;

void write_split(const TempDir& dir, const std::string& prefix, uint32_t n, bool gz, uint32_t rows = 5,
                 uint32_t cols = 4) {
  auto images = testing::idx_images(n, rows, cols);
  auto labels = testing::idx_labels(n);
  const std::string suffix = gz ? ".gz" : "";
  write_file(dir / (prefix + "-images-idx3-ubyte" + suffix), gz ? testing::gzip(images) : images);
  write_file(dir / (prefix + "-labels-idx1-ubyte" + suffix), gz ? testing::gzip(labels) : labels);
}

void expect_fixture_samples(const Dataset& ds, uint32_t n, uint32_t rows, uint32_t cols) {
  ASSERT_EQ(ds.size(), n);
  EXPECT_EQ(ds.channels(), 1);
  EXPECT_EQ(ds.num_classes(), 10);
  for (int64_t i = 0; i < ds.size(); ++i) {
    const Sample s = ds.get(i);
    ASSERT_EQ(s.image.sizes(), (at::IntArrayRef{1, rows, cols}));
    ASSERT_EQ(s.image.scalar_type(), at::kByte);
    EXPECT_EQ(s.label, i % 10);
    EXPECT_EQ(ds.label(i), i % 10);
    const auto a = s.image.accessor<uint8_t, 3>();
    for (uint32_t r = 0; r < rows; ++r)
      for (uint32_t c = 0; c < cols; ++c) ASSERT_EQ(a[0][r][c], testing::fixture_pixel(i, r, c));
  }
}

TEST(IdxDataset, PlainFilesRoundTrip) {
  TempDir dir;
  write_split(dir, "train", 13, false);
  write_split(dir, "t10k", 7, false);
  auto train = IdxDataset::from_folder(dir.path().string(), true, "MNIST");
  auto test = IdxDataset::from_folder(dir.path().string(), false, "MNIST");
  expect_fixture_samples(*train, 13, 5, 4);
  expect_fixture_samples(*test, 7, 5, 4);
  EXPECT_NE(train->describe().find("MNIST train: 13 images 1x5x4"), std::string::npos) << train->describe();
}

TEST(IdxDataset, GzipFilesRoundTrip) {
  TempDir dir;
  write_split(dir, "train", 21, true, 6, 3);
  auto ds = IdxDataset::from_folder(dir.path().string(), true);
  expect_fixture_samples(*ds, 21, 6, 3);
}

TEST(IdxDataset, ConcatenatedGzipMembers) {
  const std::vector<uint8_t> a = {1, 2, 3}, b = {4, 5};
  auto ga = testing::gzip(a), gb = testing::gzip(b);
  ga.insert(ga.end(), gb.begin(), gb.end());
  EXPECT_EQ(gunzip(ga, "x"), (std::vector<uint8_t>{1, 2, 3, 4, 5}));
}

TEST(IdxDataset, WrongMagicNamesTheFile) {
  TempDir dir;
  write_split(dir, "train", 4, false);
  write_file(dir / "train-images-idx3-ubyte", testing::idx_images(4, 5, 4, 2049));
  expect_error<RuntimeError>([&] { IdxDataset::from_folder(dir.path().string(), true); },
                             {"train-images-idx3-ubyte", "magic number 2049", "2051"});
  write_split(dir, "t10k", 4, false);
  write_file(dir / "t10k-labels-idx1-ubyte", testing::idx_labels(4, 10, 1234));
  expect_error<RuntimeError>([&] { IdxDataset::from_folder(dir.path().string(), false); },
                             {"t10k-labels-idx1-ubyte", "magic number 1234"});
}

TEST(IdxDataset, TruncatedAndOversizedFiles) {
  TempDir dir;
  write_split(dir, "train", 4, false);
  auto images = testing::idx_images(4, 5, 4);
  images.resize(images.size() - 3);
  write_file(dir / "train-images-idx3-ubyte", images);
  expect_error<RuntimeError>([&] { IdxDataset::from_folder(dir.path().string(), true); },
                             {"train-images-idx3-ubyte", "truncated"});
  images = testing::idx_images(4, 5, 4);
  images.push_back(0);
  write_file(dir / "train-images-idx3-ubyte", images);
  expect_error<RuntimeError>([&] { IdxDataset::from_folder(dir.path().string(), true); },
                             {"train-images-idx3-ubyte", "1 bytes beyond"});
  write_file(dir / "train-images-idx3-ubyte", {0, 0, 8});
  expect_error<RuntimeError>([&] { IdxDataset::from_folder(dir.path().string(), true); },
                             {"train-images-idx3-ubyte", "truncated header"});
}

TEST(IdxDataset, CountMismatchNamesBothFiles) {
  TempDir dir;
  write_file(dir / "train-images-idx3-ubyte", testing::idx_images(5, 2, 2));
  write_file(dir / "train-labels-idx1-ubyte", testing::idx_labels(6));
  expect_error<RuntimeError>([&] { IdxDataset::from_folder(dir.path().string(), true); },
                             {"train-images-idx3-ubyte", "train-labels-idx1-ubyte", "5 images", "6 labels"});
}

TEST(IdxDataset, LabelOutOfRange) {
  TempDir dir;
  write_file(dir / "train-images-idx3-ubyte", testing::idx_images(3, 2, 2));
  auto labels = testing::idx_labels(3);
  labels.back() = 10;
  write_file(dir / "train-labels-idx1-ubyte", labels);
  expect_error<RuntimeError>([&] { IdxDataset::from_folder(dir.path().string(), true); },
                             {"train-labels-idx1-ubyte", "label 10 of sample 2"});
}

TEST(IdxDataset, BadGzipNamesTheFile) {
  TempDir dir;
  write_split(dir, "train", 30, true);
  // Truncated gzip stream.
  auto gz = testing::gzip(testing::idx_images(30, 5, 4));
  gz.resize(gz.size() / 2);
  write_file(dir / "train-images-idx3-ubyte.gz", gz);
  expect_error<RuntimeError>([&] { IdxDataset::from_folder(dir.path().string(), true); },
                             {"train-images-idx3-ubyte.gz", "truncated"});
  // Corrupt deflate data behind a valid header.
  gz = testing::gzip(testing::idx_images(30, 5, 4));
  for (std::size_t i = 12; i < gz.size() - 8; ++i) gz[i] = static_cast<uint8_t>(gz[i] ^ 0xA5);
  write_file(dir / "train-images-idx3-ubyte.gz", gz);
  expect_error<RuntimeError>([&] { IdxDataset::from_folder(dir.path().string(), true); },
                             {"train-images-idx3-ubyte.gz", "gzip"});
  // Not gzip at all, but named .gz.
  write_file(dir / "train-images-idx3-ubyte.gz", testing::idx_images(30, 5, 4));
  expect_error<RuntimeError>([&] { IdxDataset::from_folder(dir.path().string(), true); },
                             {"train-images-idx3-ubyte.gz", "not a gzip file"});
}

TEST(IdxDataset, MissingFilesAreUsageErrors) {
  TempDir dir;
  expect_error<UsageError>([&] { IdxDataset::from_folder(dir.path().string(), true, "Fashion-MNIST"); },
                           {"Fashion-MNIST", "train-images-idx3-ubyte", dir.path().string()});
}

TEST(IdxDataset, FashionMnistFromDebianPackage) {
  const std::string path = default_data_path("fashion_mnist");
  if (find_idx_file(path, "t10k-images-idx3-ubyte").empty()) GTEST_SKIP() << "dataset-fashion-mnist not installed";
  auto test = make_dataset("fashion_mnist", "", false);
  ASSERT_EQ(test->size(), 10000);
  EXPECT_EQ(test->num_classes(), 10);
  const Sample s = test->get(0);
  EXPECT_EQ(s.image.sizes(), (at::IntArrayRef{1, 28, 28}));
  EXPECT_EQ(s.label, 9);  // the first test image is an ankle boot
  std::vector<int64_t> counts(10, 0);
  for (int64_t i = 0; i < test->size(); ++i) ++counts[static_cast<std::size_t>(test->label(i))];
  for (int64_t c : counts) EXPECT_EQ(c, 1000);
  // The pixel mean matches the published statistic (0.2860 over the training set).
  std::vector<at::Tensor> images;
  for (int64_t i = 0; i < 2000; ++i) images.push_back(test->get(i).image);
  const double mean = at::stack(images).to(at::kFloat).mean().item<double>() / 255.0;
  EXPECT_NEAR(mean, 0.286, 0.01);
}

}  // namespace
}  // namespace sparsevit::data
