// IDX files (MNIST, Fashion-MNIST): `*-images-idx3-ubyte[.gz]` + `*-labels-idx1-ubyte[.gz]`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/dataset.h"

namespace sparsevit::data {

class IdxDataset : public Dataset {
 public:
  // Reads an image file (magic 2051, uint8, [N, H, W]) and a label file (magic 2049, uint8,
  // [N]), each gzip-compressed or plain. Wrong magic, bad dimensions, truncated or oversized
  // files, a count mismatch or a label >= num_classes are RuntimeErrors naming the file.
  IdxDataset(const std::string& images_path, const std::string& labels_path, std::string display_name = "IDX",
             int64_t num_classes = 10);

  // The train (`train-`) or test (`t10k-`) split in `folder`, plain or .gz (the plain file
  // wins when both exist). UsageError when the folder lacks the files.
  static std::shared_ptr<const IdxDataset> from_folder(const std::string& folder, bool train,
                                                       std::string display_name = "IDX", int64_t num_classes = 10);

  int64_t size() const override { return count_; }
  Sample get(int64_t index) const override;
  int64_t label(int64_t index) const override;
  int64_t num_classes() const override { return num_classes_; }
  int64_t channels() const override { return 1; }
  std::string describe() const override;

  int64_t height() const { return rows_; }
  int64_t width() const { return cols_; }
  const std::string& images_path() const { return images_path_; }
  const std::string& labels_path() const { return labels_path_; }

 private:
  std::string images_path_, labels_path_, display_name_;
  int64_t num_classes_ = 10;
  int64_t count_ = 0, rows_ = 0, cols_ = 0;
  std::vector<uint8_t> images_;  // the whole decompressed file; pixels start at byte 16
  std::vector<uint8_t> labels_;  // the whole decompressed file; labels start at byte 8
};

// Locates `<prefix>-images-idx3-ubyte[.gz]` in folder ("" when absent).
std::string find_idx_file(const std::string& folder, const std::string& stem);

}  // namespace sparsevit::data
