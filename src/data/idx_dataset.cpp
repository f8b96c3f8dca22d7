#include "data/idx_dataset.h"

#include <cstring>
#include <filesystem>

#include "data/file_bytes.h"
#include "util/errors.h"

namespace sparsevit::data {

namespace fs = std::filesystem;

namespace {

constexpr uint32_t kImagesMagic = 2051;  // 0x00000803: unsigned bytes, 3 dimensions
constexpr uint32_t kLabelsMagic = 2049;  // 0x00000801: unsigned bytes, 1 dimension

uint32_t read_be32(const std::vector<uint8_t>& b, std::size_t offset) {
  return (static_cast<uint32_t>(b[offset]) << 24) | (static_cast<uint32_t>(b[offset + 1]) << 16) |
         (static_cast<uint32_t>(b[offset + 2]) << 8) | static_cast<uint32_t>(b[offset + 3]);
}

[[noreturn]] void bad_file(const std::string& path, const std::string& reason) {
  throw RuntimeError("invalid IDX file '" + path + "': " + reason);
}

void check_magic(const std::vector<uint8_t>& bytes, const std::string& path, uint32_t expected, const char* kind) {
  if (bytes.size() < 4) bad_file(path, "truncated header (" + std::to_string(bytes.size()) + " bytes)");
  const uint32_t magic = read_be32(bytes, 0);
  if (magic != expected) {
    std::string reason = "magic number " + std::to_string(magic) + ", expected " + std::to_string(expected) + " for " +
                         kind;
    if (magic == kImagesMagic || magic == kLabelsMagic) reason += " (images and labels swapped?)";
    bad_file(path, reason);
  }
}

void check_length(const std::vector<uint8_t>& bytes, const std::string& path, uint64_t expected) {
  if (bytes.size() < expected) {
    bad_file(path, "truncated: " + std::to_string(bytes.size()) + " bytes, the header promises " +
                       std::to_string(expected));
  }
  if (bytes.size() > expected) {
    bad_file(path, std::to_string(bytes.size() - expected) + " bytes beyond the " + std::to_string(expected) +
                       " the header describes");
  }
}

}  // namespace

IdxDataset::IdxDataset(const std::string& images_path, const std::string& labels_path, std::string display_name,
                       int64_t num_classes)
    : images_path_(images_path),
      labels_path_(labels_path),
      display_name_(std::move(display_name)),
      num_classes_(num_classes) {
  if (num_classes_ < 1 || num_classes_ > 256) throw UsageError("IdxDataset: num_classes must be in [1, 256]");

  images_ = read_maybe_gzip(images_path_);
  check_magic(images_, images_path_, kImagesMagic, "images");
  if (images_.size() < 16) bad_file(images_path_, "truncated header (" + std::to_string(images_.size()) + " bytes)");
  const uint32_t n = read_be32(images_, 4), rows = read_be32(images_, 8), cols = read_be32(images_, 12);
  if (rows == 0 || cols == 0 || rows > 65536 || cols > 65536) {
    bad_file(images_path_, "implausible image size " + std::to_string(rows) + "x" + std::to_string(cols));
  }
  check_length(images_, images_path_, 16 + static_cast<uint64_t>(n) * rows * cols);

  labels_ = read_maybe_gzip(labels_path_);
  check_magic(labels_, labels_path_, kLabelsMagic, "labels");
  if (labels_.size() < 8) bad_file(labels_path_, "truncated header (" + std::to_string(labels_.size()) + " bytes)");
  const uint32_t n_labels = read_be32(labels_, 4);
  check_length(labels_, labels_path_, 8 + static_cast<uint64_t>(n_labels));
  if (n_labels != n) {
    throw RuntimeError("IDX count mismatch: '" + images_path_ + "' holds " + std::to_string(n) + " images but '" +
                       labels_path_ + "' holds " + std::to_string(n_labels) + " labels");
  }
  for (uint32_t i = 0; i < n_labels; ++i) {
    if (labels_[8 + i] >= num_classes_) {
      bad_file(labels_path_, "label " + std::to_string(labels_[8 + i]) + " of sample " + std::to_string(i) +
                                 " is outside [0, " + std::to_string(num_classes_) + ")");
    }
  }
  count_ = n;
  rows_ = rows;
  cols_ = cols;
}

std::string find_idx_file(const std::string& folder, const std::string& stem) {
  for (const char* suffix : {"", ".gz"}) {
    const fs::path p = fs::path(folder) / (stem + suffix);
    std::error_code ec;
    if (fs::is_regular_file(p, ec)) return p.string();
  }
  return "";
}

std::shared_ptr<const IdxDataset> IdxDataset::from_folder(const std::string& folder, bool train,
                                                          std::string display_name, int64_t num_classes) {
  const std::string prefix = train ? "train" : "t10k";
  const std::string images = find_idx_file(folder, prefix + "-images-idx3-ubyte");
  const std::string labels = find_idx_file(folder, prefix + "-labels-idx1-ubyte");
  if (images.empty() || labels.empty()) {
    throw UsageError("no " + display_name + (train ? " training" : " test") + " set in '" + folder + "' (expected " +
                     prefix + "-images-idx3-ubyte[.gz] and " + prefix + "-labels-idx1-ubyte[.gz])");
  }
  auto ds = std::make_shared<IdxDataset>(images, labels, display_name, num_classes);
  ds->display_name_ = display_name + (train ? " train" : " test");
  return ds;
}

Sample IdxDataset::get(int64_t index) const {
  check_index(*this, index);
  at::Tensor image = at::empty({1, rows_, cols_}, at::TensorOptions().dtype(at::kByte));
  const std::size_t pixels = static_cast<std::size_t>(rows_ * cols_);
  std::memcpy(image.data_ptr<uint8_t>(), images_.data() + 16 + static_cast<std::size_t>(index) * pixels, pixels);
  return Sample{image, label(index)};
}

int64_t IdxDataset::label(int64_t index) const {
  check_index(*this, index);
  return labels_[8 + static_cast<std::size_t>(index)];
}

std::string IdxDataset::describe() const {
  return display_name_ + ": " + std::to_string(count_) + " images 1x" + std::to_string(rows_) + "x" +
         std::to_string(cols_) + ", " + std::to_string(num_classes_) + " classes (" +
         fs::path(images_path_).parent_path().string() + ")";
}

}  // namespace sparsevit::data
