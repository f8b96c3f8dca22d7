#include "data/image_folder_dataset.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "data/image_codec.h"
#include "util/errors.h"

namespace sparsevit::data {

namespace fs = std::filesystem;

namespace {

bool is_dir(const fs::path& p) {
  std::error_code ec;
  return fs::is_directory(p, ec);
}

std::vector<std::string> sorted_subfolders(const fs::path& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(dir, fs::directory_options::follow_directory_symlink, ec), end; !ec && it != end;
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!name.empty() && name[0] != '.' && is_dir(it->path())) names.push_back(name);
  }
  if (ec) throw RuntimeError("cannot list '" + dir.string() + "': " + ec.message());
  std::sort(names.begin(), names.end());
  return names;
}

// Every image file below `dir`, sorted by path.
std::vector<std::string> image_files_below(const fs::path& dir) {
  std::vector<std::string> files;
  std::error_code ec;
  const auto options = fs::directory_options::follow_directory_symlink;
  for (fs::recursive_directory_iterator it(dir, options, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!name.empty() && name[0] == '.') {
      if (it->is_directory(ec)) it.disable_recursion_pending();
      continue;
    }
    if (has_image_extension(name) && !it->is_directory(ec)) files.push_back(it->path().string());
  }
  if (ec) throw RuntimeError("cannot list '" + dir.string() + "': " + ec.message());
  std::sort(files.begin(), files.end());
  return files;
}

// Tiny-ImageNet's val/: images/ + val_annotations.txt ("file<TAB>wnid<TAB>bbox...").
std::shared_ptr<const ImageFolderDataset> read_annotated_split(const fs::path& split, std::vector<std::string> classes,
                                                               int64_t channels) {
  const fs::path annotations = split / "val_annotations.txt";
  std::ifstream in(annotations);
  if (!in) throw RuntimeError("cannot read '" + annotations.string() + "'");
  std::map<std::string, int64_t> index;
  for (std::size_t i = 0; i < classes.size(); ++i) index[classes[i]] = static_cast<int64_t>(i);
  std::vector<std::string> files;
  std::vector<int64_t> labels;
  std::string line;
  for (int64_t line_no = 1; std::getline(in, line); ++line_no) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    std::istringstream fields(line);
    std::string file, wnid;
    if (!(fields >> file >> wnid)) {
      throw RuntimeError("invalid line " + std::to_string(line_no) + " in '" + annotations.string() + "'");
    }
    const auto it = index.find(wnid);
    if (it == index.end()) {
      throw RuntimeError("'" + annotations.string() + "' line " + std::to_string(line_no) + ": class '" + wnid +
                         "' is not a training class");
    }
    files.push_back((split / "images" / file).string());
    labels.push_back(it->second);
  }
  return std::make_shared<ImageFolderDataset>(split.string(), std::move(classes), std::move(files), std::move(labels),
                                              channels);
}

}  // namespace

bool has_image_extension(const std::string& name) {
  const auto dot = name.rfind('.');
  if (dot == std::string::npos) return false;
  std::string ext = name.substr(dot + 1);
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return ext == "jpg" || ext == "jpeg" || ext == "png";
}

ImageFolderDataset::ImageFolderDataset(const std::string& dir, std::vector<std::string> classes, int64_t channels)
    : root_(dir), classes_(std::move(classes)), channels_(channels) {
  if (channels_ != 1 && channels_ != 3) throw UsageError("ImageFolderDataset: channels must be 1 or 3");
  if (!is_dir(dir)) throw UsageError("image folder '" + dir + "' does not exist");
  const std::vector<std::string> present = sorted_subfolders(dir);
  if (classes_.empty()) classes_ = present;
  if (classes_.empty()) throw UsageError("image folder '" + dir + "' has no class subfolders");
  std::map<std::string, int64_t> index;
  for (std::size_t i = 0; i < classes_.size(); ++i) index[classes_[i]] = static_cast<int64_t>(i);
  for (const std::string& name : present) {
    const auto it = index.find(name);
    if (it == index.end()) {
      throw UsageError("class folder '" + (fs::path(dir) / name).string() + "' is not one of the " +
                       std::to_string(classes_.size()) + " training classes");
    }
    for (std::string& file : image_files_below(fs::path(dir) / name)) {
      files_.push_back(std::move(file));
      labels_.push_back(it->second);
    }
  }
  if (files_.empty()) throw UsageError("no .jpg/.jpeg/.png images found under '" + dir + "'");
}

ImageFolderDataset::ImageFolderDataset(std::string root, std::vector<std::string> classes,
                                       std::vector<std::string> files, std::vector<int64_t> labels, int64_t channels)
    : root_(std::move(root)),
      classes_(std::move(classes)),
      files_(std::move(files)),
      labels_(std::move(labels)),
      channels_(channels) {
  if (channels_ != 1 && channels_ != 3) throw UsageError("ImageFolderDataset: channels must be 1 or 3");
  if (files_.size() != labels_.size()) throw UsageError("ImageFolderDataset: files and labels differ in length");
  if (files_.empty()) throw UsageError("no images listed for '" + root_ + "'");
  for (int64_t label : labels_) {
    if (label < 0 || label >= static_cast<int64_t>(classes_.size())) {
      throw UsageError("ImageFolderDataset: label " + std::to_string(label) + " outside the class list");
    }
  }
}

std::shared_ptr<const ImageFolderDataset> ImageFolderDataset::from_root(const std::string& root, bool train,
                                                                        int64_t channels) {
  const fs::path base(root);
  const fs::path train_dir = base / "train";
  const bool has_train = is_dir(train_dir);
  fs::path eval_dir;
  for (const char* name : {"val", "test"}) {
    if (eval_dir.empty() && is_dir(base / name)) eval_dir = base / name;
  }
  if (train) {
    if (has_train) return std::make_shared<ImageFolderDataset>(train_dir.string(), std::vector<std::string>{}, channels);
    if (!eval_dir.empty()) {
      throw UsageError("image folder '" + root + "' has " + eval_dir.filename().string() + "/ but no train/ folder");
    }
    return std::make_shared<ImageFolderDataset>(root, std::vector<std::string>{}, channels);
  }
  if (eval_dir.empty()) {
    if (has_train) throw UsageError("image folder '" + root + "' has train/ but no val/ or test/ folder");
    return std::make_shared<ImageFolderDataset>(root, std::vector<std::string>{}, channels);
  }
  std::vector<std::string> classes = has_train ? sorted_subfolders(train_dir) : std::vector<std::string>{};
  std::error_code ec;
  if (!classes.empty() && is_dir(eval_dir / "images") && fs::is_regular_file(eval_dir / "val_annotations.txt", ec)) {
    return read_annotated_split(eval_dir, std::move(classes), channels);
  }
  return std::make_shared<ImageFolderDataset>(eval_dir.string(), std::move(classes), channels);
}

Sample ImageFolderDataset::get(int64_t index) const {
  check_index(*this, index);
  const std::string& path = files_[static_cast<std::size_t>(index)];
  const Image image = read_image(path, static_cast<int>(channels_));
  at::Tensor hwc = at::empty({image.height, image.width, image.channels}, at::TensorOptions().dtype(at::kByte));
  std::memcpy(hwc.data_ptr<uint8_t>(), image.pixels.data(), image.pixels.size());
  return Sample{hwc.permute({2, 0, 1}).contiguous(), labels_[static_cast<std::size_t>(index)]};
}

int64_t ImageFolderDataset::label(int64_t index) const {
  check_index(*this, index);
  return labels_[static_cast<std::size_t>(index)];
}

std::string ImageFolderDataset::describe() const {
  return "image folder: " + std::to_string(files_.size()) + " images, " + std::to_string(classes_.size()) +
         " classes, " + std::to_string(channels_) + " channels (" + root_ + ")";
}

}  // namespace sparsevit::data
