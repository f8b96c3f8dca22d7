#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "data/cifar_dataset.h"
#include "data/dataset.h"
#include "data_test_util.h"

namespace sparsevit::data {
namespace {

using testing::TempDir;
using testing::expect_error;
using testing::write_file;

uint8_t pixel(int64_t record, int64_t c, int64_t y, int64_t x) {
  return static_cast<uint8_t>((record * 11 + c * 50 + y * 3 + x) % 256);
}

// `n` records starting at global record number `first`; CIFAR-100 gets coarse = 99 - fine.
std::vector<uint8_t> records(int64_t first, int64_t n, bool cifar100) {
  std::vector<uint8_t> b;
  for (int64_t r = first; r < first + n; ++r) {
    const auto fine = static_cast<uint8_t>(r % (cifar100 ? 100 : 10));
    if (cifar100) b.push_back(static_cast<uint8_t>(19 - fine % 20));
    b.push_back(fine);
    for (int64_t c = 0; c < 3; ++c)
      for (int64_t y = 0; y < 32; ++y)
        for (int64_t x = 0; x < 32; ++x) b.push_back(pixel(r, c, y, x));
  }
  return b;
}

void expect_records(const Dataset& ds, int64_t n, int64_t classes) {
  ASSERT_EQ(ds.size(), n);
  EXPECT_EQ(ds.channels(), 3);
  EXPECT_EQ(ds.num_classes(), classes);
  for (int64_t r = 0; r < n; ++r) {
    const Sample s = ds.get(r);
    ASSERT_EQ(s.image.sizes(), (at::IntArrayRef{3, 32, 32}));
    EXPECT_EQ(s.label, r % classes);
    const auto a = s.image.accessor<uint8_t, 3>();
    for (int64_t c = 0; c < 3; ++c) {
      EXPECT_EQ(a[c][0][0], pixel(r, c, 0, 0));
      EXPECT_EQ(a[c][31][17], pixel(r, c, 31, 17));
    }
  }
}

TEST(CifarDataset, Cifar10BatchesInOrder) {
  TempDir dir;
  const std::string sub = (dir.path() / "cifar-10-batches-bin").string();
  for (int i = 1; i <= 5; ++i) write_file(sub + "/data_batch_" + std::to_string(i) + ".bin", records((i - 1) * 3, 3, false));
  write_file(sub + "/test_batch.bin", records(0, 4, false));
  // Accepts both the parent folder and the batches folder itself.
  auto train = make_dataset("cifar10", dir.path().string(), true);
  expect_records(*train, 15, 10);
  auto test = make_dataset("cifar10", sub, false);
  expect_records(*test, 4, 10);
  EXPECT_NE(train->describe().find("CIFAR-10 train: 15 images"), std::string::npos) << train->describe();
}

TEST(CifarDataset, Cifar100UsesFineLabels) {
  TempDir dir;
  write_file(dir / "train.bin", records(0, 120, true));
  write_file(dir / "test.bin", records(0, 5, true));
  auto train = make_dataset("cifar100", dir.path().string(), true);
  expect_records(*train, 120, 100);
  EXPECT_EQ(train->label(105), 5);
}

TEST(CifarDataset, TruncatedFileNamesIt) {
  TempDir dir;
  auto bytes = records(0, 3, false);
  bytes.pop_back();
  write_file(dir / "test_batch.bin", bytes);
  expect_error<RuntimeError>([&] { make_dataset("cifar10", dir.path().string(), false); },
                             {"test_batch.bin", "3073-byte records"});
  write_file(dir / "test_batch.bin", records(0, 3, true));
  expect_error<RuntimeError>([&] { make_dataset("cifar10", dir.path().string(), false); },
                             {"test_batch.bin", "CIFAR-100 records?"});
  write_file(dir / "test_batch.bin", {});
  expect_error<RuntimeError>([&] { make_dataset("cifar10", dir.path().string(), false); }, {"test_batch.bin"});
}

TEST(CifarDataset, LabelOutOfRange) {
  TempDir dir;
  auto bytes = records(0, 2, false);
  bytes[3073] = 10;  // second record's label
  write_file(dir / "test_batch.bin", bytes);
  expect_error<RuntimeError>([&] { make_dataset("cifar10", dir.path().string(), false); },
                             {"test_batch.bin", "record 1 has label 10"});
}

TEST(CifarDataset, MissingBatchesAreUsageErrors) {
  TempDir dir;
  write_file(dir / "data_batch_1.bin", records(0, 1, false));
  expect_error<UsageError>([&] { make_dataset("cifar10", dir.path().string(), true); },
                           {"missing data_batch_2.bin"});
  expect_error<UsageError>([&] { make_dataset("cifar10", dir.path().string(), false); }, {"test_batch.bin"});
}

}  // namespace
}  // namespace sparsevit::data
