// CIFAR-10 / CIFAR-100 binary batches.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/dataset.h"

namespace sparsevit::data {

class CifarDataset : public Dataset {
 public:
  enum class Variant { kCifar10, kCifar100 };

  // Records of 1 label byte + 3072 pixel bytes (CIFAR-10) or coarse + fine label bytes + 3072
  // (CIFAR-100; the fine label is used), pixels as R, G, B planes of 32x32. A file whose
  // length is not a multiple of the record size, or an out-of-range label, is a RuntimeError
  // naming the file.
  CifarDataset(const std::vector<std::string>& files, Variant variant, std::string description = "");

  // data_batch_1..5.bin / test_batch.bin (CIFAR-10) or train.bin / test.bin (CIFAR-100) in
  // `folder`, or in its `cifar-10-batches-bin` / `cifar-100-binary` subfolder.
  // UsageError when the files are not there.
  static std::shared_ptr<const CifarDataset> from_folder(const std::string& folder, Variant variant, bool train);

  int64_t size() const override { return count_; }
  Sample get(int64_t index) const override;
  int64_t label(int64_t index) const override;
  int64_t num_classes() const override { return variant_ == Variant::kCifar10 ? 10 : 100; }
  int64_t channels() const override { return 3; }
  std::string describe() const override;

  static constexpr int64_t kImageBytes = 3 * 32 * 32;

 private:
  int64_t label_bytes() const { return variant_ == Variant::kCifar10 ? 1 : 2; }
  int64_t record_bytes() const { return label_bytes() + kImageBytes; }

  Variant variant_;
  std::string description_;
  std::string folder_;
  int64_t count_ = 0;
  std::vector<uint8_t> records_;  // every file's records, concatenated
};

}  // namespace sparsevit::data
