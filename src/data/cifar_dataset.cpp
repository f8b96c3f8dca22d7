#include "data/cifar_dataset.h"

#include <cstring>
#include <filesystem>

#include "util/errors.h"
#include "util/file_bytes.h"

namespace sparsevit::data {

namespace fs = std::filesystem;

CifarDataset::CifarDataset(const std::vector<std::string>& files, Variant variant, std::string description)
    : variant_(variant), description_(std::move(description)) {
  if (files.empty()) throw UsageError("CifarDataset: no files given");
  const int64_t record = record_bytes();
  const int64_t classes = num_classes();
  for (const std::string& path : files) {
    std::vector<uint8_t> bytes = read_file_bytes(path);
    const int64_t size = static_cast<int64_t>(bytes.size());
    if (size == 0 || size % record != 0) {
      const int64_t other = variant_ == Variant::kCifar10 ? 2 + kImageBytes : 1 + kImageBytes;
      std::string hint;
      if (size > 0 && size % other == 0) {
        hint = variant_ == Variant::kCifar10 ? " (CIFAR-100 records?)" : " (CIFAR-10 records?)";
      }
      throw RuntimeError("invalid CIFAR file '" + path + "': " + std::to_string(size) +
                         " bytes is not a whole number of " + std::to_string(record) + "-byte records" + hint);
    }
    for (int64_t r = 0; r < size / record; ++r) {
      const int64_t label = bytes[static_cast<std::size_t>(r * record + label_bytes() - 1)];
      if (label >= classes) {
        throw RuntimeError("invalid CIFAR file '" + path + "': record " + std::to_string(r) + " has label " +
                           std::to_string(label) + ", outside [0, " + std::to_string(classes) + ")");
      }
    }
    if (records_.empty()) {
      records_ = std::move(bytes);
    } else {
      records_.insert(records_.end(), bytes.begin(), bytes.end());
    }
  }
  count_ = static_cast<int64_t>(records_.size()) / record;
  if (description_.empty()) description_ = variant_ == Variant::kCifar10 ? "CIFAR-10" : "CIFAR-100";
  folder_ = fs::path(files.front()).parent_path().string();
}

std::shared_ptr<const CifarDataset> CifarDataset::from_folder(const std::string& folder, Variant variant, bool train) {
  const bool c10 = variant == Variant::kCifar10;
  std::vector<std::string> names;
  if (c10) {
    if (train) {
      for (int i = 1; i <= 5; ++i) names.push_back("data_batch_" + std::to_string(i) + ".bin");
    } else {
      names.push_back("test_batch.bin");
    }
  } else {
    names.push_back(train ? "train.bin" : "test.bin");
  }
  const std::string sub = c10 ? "cifar-10-batches-bin" : "cifar-100-binary";
  std::error_code ec;
  for (const fs::path& dir : {fs::path(folder), fs::path(folder) / sub}) {
    std::vector<std::string> files;
    for (const auto& name : names) {
      if (fs::is_regular_file(dir / name, ec)) files.push_back((dir / name).string());
    }
    if (files.empty()) continue;
    if (files.size() != names.size()) {
      std::string missing;
      for (const auto& name : names) {
        if (!fs::is_regular_file(dir / name, ec)) missing += (missing.empty() ? "" : ", ") + name;
      }
      throw UsageError("incomplete " + std::string(c10 ? "CIFAR-10" : "CIFAR-100") + " folder '" + dir.string() +
                       "': missing " + missing);
    }
    const std::string description = std::string(c10 ? "CIFAR-10" : "CIFAR-100") + (train ? " train" : " test");
    return std::make_shared<CifarDataset>(files, variant, description);
  }
  std::string expected = names.size() > 1 ? "data_batch_1..5.bin" : names[0];
  throw UsageError("no " + std::string(c10 ? "CIFAR-10" : "CIFAR-100") + (train ? " training" : " test") +
                   " batches in '" + folder + "' (expected " + expected + " there or in " + sub + "/)");
}

Sample CifarDataset::get(int64_t index) const {
  check_index(*this, index);
  at::Tensor image = at::empty({3, 32, 32}, at::TensorOptions().dtype(at::kByte));
  const std::size_t offset = static_cast<std::size_t>(index * record_bytes() + label_bytes());
  std::memcpy(image.data_ptr<uint8_t>(), records_.data() + offset, kImageBytes);
  return Sample{image, label(index)};
}

int64_t CifarDataset::label(int64_t index) const {
  check_index(*this, index);
  return records_[static_cast<std::size_t>(index * record_bytes() + label_bytes() - 1)];
}

std::string CifarDataset::describe() const {
  return description_ + ": " + std::to_string(count_) + " images 3x32x32, " + std::to_string(num_classes()) +
         " classes (" + folder_ + ")";
}

}  // namespace sparsevit::data
