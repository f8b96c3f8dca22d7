// ImageFolder trees of JPEG / PNG files (ImageNet, Tiny-ImageNet and the like).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/dataset.h"

namespace sparsevit::data {

class ImageFolderDataset : public Dataset {
 public:
  // Every *.jpg, *.jpeg, *.png (any case) below `dir/<class>/` (searched recursively, so
  // Tiny-ImageNet's `train/<wnid>/images/` works), labelled by the position of <class> in
  // `classes` (when empty: the sorted subfolder names of `dir`). Images are decoded lazily
  // in get() to `channels` (3: RGB, 1: gray). UsageError when no images are found.
  ImageFolderDataset(const std::string& dir, std::vector<std::string> classes = {}, int64_t channels = 3);

  // Builds from explicit (file, label) lists (e.g. Tiny-ImageNet's val annotations).
  ImageFolderDataset(std::string root, std::vector<std::string> classes, std::vector<std::string> files,
                     std::vector<int64_t> labels, int64_t channels = 3);

  // The split of `root`: `root/train` for training; `root/val` (or `root/test`) for
  // evaluation; `root` itself when it has neither split folder. Class names always come
  // from the training folder when it exists, so both splits share indices. A Tiny-ImageNet
  // `val/images` + `val/val_annotations.txt` layout is read through the annotations.
  static std::shared_ptr<const ImageFolderDataset> from_root(const std::string& root, bool train, int64_t channels = 3);

  int64_t size() const override { return static_cast<int64_t>(files_.size()); }
  Sample get(int64_t index) const override;  // RuntimeError naming the file if it cannot be decoded
  int64_t label(int64_t index) const override;
  int64_t num_classes() const override { return static_cast<int64_t>(classes_.size()); }
  int64_t channels() const override { return channels_; }
  std::string describe() const override;

  const std::vector<std::string>& classes() const { return classes_; }
  const std::string& file(int64_t index) const { return files_.at(static_cast<std::size_t>(index)); }

 private:
  std::string root_;
  std::vector<std::string> classes_;
  std::vector<std::string> files_;
  std::vector<int64_t> labels_;
  int64_t channels_ = 3;
};

// True for names ending in .jpg / .jpeg / .png, ignoring case.
bool has_image_extension(const std::string& name);

}  // namespace sparsevit::data
