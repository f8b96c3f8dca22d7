#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <set>

#include "data/dataset.h"
#include "data_test_util.h"

namespace sparsevit::data {
namespace {

using testing::TempDir;
using testing::expect_error;

// A synthetic dataset: label = class_of(i), image filled with i.
class FakeDataset : public Dataset {
 public:
  FakeDataset(int64_t n, std::function<int64_t(int64_t)> class_of, int64_t classes)
      : n_(n), class_of_(std::move(class_of)), classes_(classes) {}
  int64_t size() const override { return n_; }
  Sample get(int64_t i) const override {
    check_index(*this, i);
    return {at::full({1, 2, 2}, static_cast<uint8_t>(i % 256), at::TensorOptions().dtype(at::kByte)), class_of_(i)};
  }
  int64_t num_classes() const override { return classes_; }
  int64_t channels() const override { return 1; }
  std::string describe() const override { return "fake"; }

 private:
  int64_t n_;
  std::function<int64_t(int64_t)> class_of_;
  int64_t classes_;
};

TEST(Dataset, UnknownNameSuggestsTheClosest) {
  expect_error<UsageError>([] { make_dataset("fashion_mnsit", "/tmp", true); },
                           {"unknown dataset 'fashion_mnsit'", "did you mean 'fashion_mnist'"});
  expect_error<UsageError>([] { default_data_path("cifar1000"); }, {"cifar100"});
}

TEST(Dataset, DefaultPaths) {
  EXPECT_EQ(default_data_path("fashion_mnist"), "/usr/share/datasets/fashion-mnist");
  EXPECT_EQ(default_data_path("cifar10"), "");
  expect_error<UsageError>([] { make_dataset("cifar10", "", true); }, {"cifar10", "--data_path"});
}

TEST(Dataset, MissingPathIsAUsageErrorNamingIt) {
  expect_error<UsageError>([] { make_dataset("mnist", "/nonexistent/mnist_dir", true); },
                           {"/nonexistent/mnist_dir", "does not exist"});
  TempDir dir;
  expect_error<UsageError>([&] { make_dataset("cifar100", dir.path().string(), false); },
                           {"CIFAR-100", "test.bin", dir.path().string()});
  expect_error<UsageError>([&] { make_dataset("image_folder", dir.path().string(), true); },
                           {dir.path().string(), "no class subfolders"});
}

TEST(Dataset, TakeFirst) {
  auto base = std::make_shared<FakeDataset>(10, [](int64_t i) { return i % 3; }, 3);
  auto sub = take_first(base, 4);
  ASSERT_EQ(sub->size(), 4);
  for (int64_t i = 0; i < 4; ++i) EXPECT_EQ(sub->get(i).image[0][0][0].item<int>(), i);
  EXPECT_EQ(take_first(base, 0).get(), base.get());
  EXPECT_EQ(take_first(base, 99).get(), base.get());
  EXPECT_THROW(sub->get(4), RuntimeError);
  EXPECT_NE(sub->describe().find("4 of fake"), std::string::npos);
}

TEST(Dataset, TakeBalancedCoversEveryClassOfASortedDataset) {
  // Class-sorted like an image folder: 0..9 class 0, 10..19 class 1, 20..29 class 2.
  auto base = std::make_shared<FakeDataset>(30, [](int64_t i) { return i / 10; }, 3);
  auto sub = std::dynamic_pointer_cast<const Subset>(max_samples(base, 7));
  ASSERT_TRUE(sub);
  EXPECT_EQ(sub->indices(), (std::vector<int64_t>{0, 1, 2, 10, 11, 20, 21}));
  std::vector<int64_t> per_class(3, 0);
  for (int64_t i = 0; i < sub->size(); ++i) ++per_class[static_cast<std::size_t>(sub->label(i))];
  EXPECT_EQ(per_class, (std::vector<int64_t>{3, 2, 2}));
  // On an interleaved dataset it is exactly the first n.
  auto mixed = std::make_shared<FakeDataset>(30, [](int64_t i) { return i % 3; }, 3);
  auto first = std::dynamic_pointer_cast<const Subset>(take_balanced(mixed, 9));
  EXPECT_EQ(first->indices(), (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8}));
}

TEST(Dataset, DefaultMeanStd) {
  const MeanStd f = default_mean_std("fashion_mnist", 1);
  EXPECT_EQ(f.mean, (std::vector<double>{0.2860}));
  EXPECT_EQ(f.std, (std::vector<double>{0.3530}));
  EXPECT_EQ(default_mean_std("fashion_mnist", 3).mean, (std::vector<double>{0.2860, 0.2860, 0.2860}));
  const MeanStd in = default_mean_std("image_folder", 3);
  EXPECT_EQ(in.mean, (std::vector<double>{0.485, 0.456, 0.406}));
  EXPECT_EQ(in.std, (std::vector<double>{0.229, 0.224, 0.225}));
  EXPECT_EQ(default_mean_std("cifar10", 3).mean.size(), 3u);
  EXPECT_EQ(default_mean_std("", 1).mean.size(), 1u);
  EXPECT_THROW(default_mean_std("", 2), UsageError);
}

}  // namespace
}  // namespace sparsevit::data
