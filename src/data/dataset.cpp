#include "data/dataset.h"

#include <algorithm>
#include <filesystem>
#include <numeric>

#include "data/cifar_dataset.h"
#include "data/fashion_mnist_frames.h"
#include "data/idx_dataset.h"
#include "data/image_folder_dataset.h"
#include "util/did_you_mean.h"
#include "util/errors.h"

namespace sparsevit::data {

namespace fs = std::filesystem;

void check_index(const Dataset& dataset, int64_t index) {
  if (index < 0 || index >= dataset.size()) {
    throw RuntimeError("sample index " + std::to_string(index) + " out of range for " + dataset.describe());
  }
}

// ---------------------------------------------------------------- Subset

Subset::Subset(std::shared_ptr<const Dataset> base, std::vector<int64_t> indices)
    : base_(std::move(base)), indices_(std::move(indices)) {
  if (!base_) throw UsageError("Subset: null dataset");
  const int64_t n = base_->size();
  for (int64_t i : indices_) {
    if (i < 0 || i >= n) {
      throw UsageError("Subset: index " + std::to_string(i) + " out of range for a dataset of " + std::to_string(n));
    }
  }
}

Sample Subset::get(int64_t index) const {
  check_index(*this, index);
  return base_->get(indices_[static_cast<std::size_t>(index)]);
}

Sample Subset::get(int64_t index, Rng& rng) const {
  check_index(*this, index);
  return base_->get(indices_[static_cast<std::size_t>(index)], rng);
}

int64_t Subset::label(int64_t index) const {
  check_index(*this, index);
  return base_->label(indices_[static_cast<std::size_t>(index)]);
}

std::string Subset::describe() const {
  return std::to_string(size()) + " of " + base_->describe();
}

std::shared_ptr<const Dataset> take_first(std::shared_ptr<const Dataset> base, int64_t n) {
  if (!base) throw UsageError("take_first: null dataset");
  if (n <= 0 || n >= base->size()) return base;
  std::vector<int64_t> indices(static_cast<std::size_t>(n));
  std::iota(indices.begin(), indices.end(), int64_t{0});
  return std::make_shared<Subset>(std::move(base), std::move(indices));
}

std::shared_ptr<const Dataset> take_balanced(std::shared_ptr<const Dataset> base, int64_t n) {
  if (!base) throw UsageError("take_balanced: null dataset");
  const int64_t total = base->size();
  if (n <= 0 || n >= total) return base;
  // Per class, its indices in order; classes then take turns.
  std::vector<std::vector<int64_t>> by_class;
  for (int64_t i = 0; i < total; ++i) {
    const int64_t label = base->label(i);
    if (label < 0) throw RuntimeError("negative label in " + base->describe());
    if (static_cast<std::size_t>(label) >= by_class.size()) by_class.resize(static_cast<std::size_t>(label) + 1);
    by_class[static_cast<std::size_t>(label)].push_back(i);
  }
  std::vector<int64_t> chosen;
  chosen.reserve(static_cast<std::size_t>(n));
  for (std::size_t round = 0; static_cast<int64_t>(chosen.size()) < n; ++round) {
    for (const auto& members : by_class) {
      if (round < members.size() && static_cast<int64_t>(chosen.size()) < n) chosen.push_back(members[round]);
    }
  }
  std::sort(chosen.begin(), chosen.end());
  return std::make_shared<Subset>(std::move(base), std::move(chosen));
}

std::shared_ptr<const Dataset> max_samples(std::shared_ptr<const Dataset> base, int64_t n) {
  return take_balanced(std::move(base), n);
}

// ---------------------------------------------------------------- factory

const std::vector<std::string>& dataset_names() {
  static const std::vector<std::string> names = {"fashion_mnist", "fashion_mnist_frames", "mnist", "cifar10",
                                                  "cifar100", "image_folder", "imagenet"};
  return names;
}

namespace {

void check_name(const std::string& name) {
  const auto& names = dataset_names();
  if (std::find(names.begin(), names.end(), name) == names.end()) {
    throw UsageError(unknown_name_message("dataset", name, names));
  }
}

}  // namespace

std::string default_data_path(const std::string& name) {
  check_name(name);
  if (name == "fashion_mnist" || name == "fashion_mnist_frames") return "/usr/share/datasets/fashion-mnist";
  return "";
}

std::string resolve_data_path(const std::string& name, const std::string& path) {
  if (!path.empty()) return path;
  std::string dir = default_data_path(name);
  if (dir.empty()) throw UsageError("--data_path is required for dataset '" + name + "'");
  return dir;
}

std::string resolve_dataset_name(const std::string& name, const std::string& path) {
  if (name != "auto") return name;
  if (path.empty()) return "fashion_mnist";
  std::error_code ec;
  if (fs::is_directory(fs::path(path) / "train", ec)) return "imagenet";
  for (const char* idx : {"train-images-idx3-ubyte", "train-images-idx3-ubyte.gz"})
    if (fs::exists(fs::path(path) / idx, ec)) return "fashion_mnist";
  throw UsageError("cannot tell which dataset '" + path + "' holds: pass --dataset (one of " +
                   [] {
                     std::string list;
                     for (const auto& n : dataset_names()) list += (list.empty() ? "" : ", ") + n;
                     return list;
                   }() + ")");
}

std::shared_ptr<const Dataset> make_dataset(const std::string& name, const std::string& path, bool train) {
  check_name(name);
  const std::string dir = resolve_data_path(name, path);
  std::error_code ec;
  if (!fs::exists(dir, ec)) {
    std::string msg = "data path '" + dir + "' does not exist";
    if (path.empty() && default_data_path(name) == default_data_path("fashion_mnist")) msg += " (install Debian's dataset-fashion-mnist or pass --data_path)";
    throw UsageError(msg);
  }
  if (!fs::is_directory(dir, ec)) throw UsageError("data path '" + dir + "' is not a folder");
  if (name == "fashion_mnist") return IdxDataset::from_folder(dir, train, "Fashion-MNIST", 10);
  if (name == "fashion_mnist_frames") return std::make_shared<FashionMnistFrames>(dir, train);
  if (name == "mnist") return IdxDataset::from_folder(dir, train, "MNIST", 10);
  if (name == "cifar10") return CifarDataset::from_folder(dir, CifarDataset::Variant::kCifar10, train);
  if (name == "cifar100") return CifarDataset::from_folder(dir, CifarDataset::Variant::kCifar100, train);
  if (name == "imagenet") {
    // MAE's build_dataset: ImageFolder(data_path/train) and ImageFolder(data_path/val).
    const fs::path split = fs::path(dir) / (train ? "train" : "val");
    if (!fs::is_directory(split, ec))
      throw UsageError("dataset imagenet: '" + split.string() + "' is not a folder (expected train/ and val/ with one "
                       "subfolder per class under --data_path)");
  }
  return ImageFolderDataset::from_root(dir, train, 3);
}

MeanStd default_mean_std(const std::string& dataset_name, int64_t channels) {
  if (channels != 1 && channels != 3) {
    throw UsageError("default_mean_std: channels must be 1 or 3, got " + std::to_string(channels));
  }
  auto gray = [channels](double mean, double std) {
    return MeanStd{std::vector<double>(static_cast<std::size_t>(channels), mean),
                   std::vector<double>(static_cast<std::size_t>(channels), std)};
  };
  if (dataset_name == "fashion_mnist") return gray(0.2860, 0.3530);
  if (dataset_name == "mnist") return gray(0.1307, 0.3081);
  // TimeSformer's DATA.MEAN / DATA.STD, what the video pipeline normalises the clips with: the
  // image ViT pretrained here sees its garments as the TimeSformer started from it will (as
  // ImageNet's statistics are close to TimeSformer's).
  if (dataset_name == "fashion_mnist_frames") return gray(0.45, 0.225);
  MeanStd rgb;
  if (dataset_name == "cifar10") {
    rgb = {{0.4914, 0.4822, 0.4465}, {0.2470, 0.2435, 0.2616}};
  } else if (dataset_name == "cifar100") {
    rgb = {{0.5071, 0.4865, 0.4409}, {0.2673, 0.2564, 0.2762}};
  } else {
    rgb = {{0.485, 0.456, 0.406}, {0.229, 0.224, 0.225}};
  }
  if (channels == 3) return rgb;
  // One channel: the average over the three, as timm does for 1-channel models.
  return MeanStd{{(rgb.mean[0] + rgb.mean[1] + rgb.mean[2]) / 3}, {(rgb.std[0] + rgb.std[1] + rgb.std[2]) / 3}};
}

}  // namespace sparsevit::data
