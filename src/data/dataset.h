// The dataset interface every reader implements, subsets for quick runs, and the factory
// that maps `--dataset NAME --data_path DIR` to a reader.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/random.h"

namespace sparsevit::data {

// One example: the image as stored (uint8 [C, H, W]) and its class index.
struct Sample {
  at::Tensor image;
  int64_t label = 0;
};

// A finite, indexable set of labelled images. `get` and `label` must be safe to call from
// several threads at once (the loader's workers do); readers keep no mutable state.
class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;
  // uint8 [channels(), H, W] (H, W may vary between samples of an image folder) + label.
  virtual Sample get(int64_t index) const = 0;
  // The sample as the loader draws it: readers whose samples are random crops of a larger
  // item (video clips' windows) draw from `rng`, the loader's per-sample generator.
  virtual Sample get(int64_t index, Rng& rng) const { return get(index); }
  // The label alone, without decoding the image (subsets and stratification use it).
  virtual int64_t label(int64_t index) const { return get(index).label; }
  virtual int64_t num_classes() const = 0;
  virtual int64_t channels() const = 0;
  // One line for logs: "Fashion-MNIST train: 60000 images 1x28x28, 10 classes (DIR)".
  virtual std::string describe() const = 0;
};

// Bounds check shared by the readers: RuntimeError on a bad index.
void check_index(const Dataset& dataset, int64_t index);

// The samples `indices` of `base`, in that order.
class Subset : public Dataset {
 public:
  Subset(std::shared_ptr<const Dataset> base, std::vector<int64_t> indices);
  int64_t size() const override { return static_cast<int64_t>(indices_.size()); }
  Sample get(int64_t index) const override;
  Sample get(int64_t index, Rng& rng) const override;
  int64_t label(int64_t index) const override;
  int64_t num_classes() const override { return base_->num_classes(); }
  int64_t channels() const override { return base_->channels(); }
  std::string describe() const override;
  const std::vector<int64_t>& indices() const { return indices_; }
  const Dataset& base() const { return *base_; }

 private:
  std::shared_ptr<const Dataset> base_;
  std::vector<int64_t> indices_;
};

// The first n samples (all when n <= 0 or n >= size).
std::shared_ptr<const Dataset> take_first(std::shared_ptr<const Dataset> base, int64_t n);

// n samples balanced over the classes: classes take turns, each contributing its samples in
// index order, and the chosen indices keep dataset order. Deterministic (no seed), and close
// to "the first n" on datasets stored in random order, but still covers every class on
// class-sorted ones (image folders). All when n <= 0 or n >= size.
std::shared_ptr<const Dataset> take_balanced(std::shared_ptr<const Dataset> base, int64_t n);

// What `--max_train_samples` / `--max_eval_samples` apply: take_balanced.
std::shared_ptr<const Dataset> max_samples(std::shared_ptr<const Dataset> base, int64_t n);

// ---------------------------------------------------------------- factory

// fashion_mnist, fashion_mnist_frames, mnist, cifar10, cifar100, image_folder, imagenet.
const std::vector<std::string>& dataset_names();

// Where a dataset lives when --data_path is not given: /usr/share/datasets/fashion-mnist for
// fashion_mnist (Debian's dataset-fashion-mnist), "" for the others.
std::string default_data_path(const std::string& name);

// `path`, or default_data_path(name) when it is ""; a UsageError "--data_path is required for
// dataset 'NAME'" when neither is given. Every reader of --data_path goes through it.
std::string resolve_data_path(const std::string& name, const std::string& path);

// The reader for `name` over `path` ("" : default_data_path). Unknown names ("did you mean"),
// a missing path or a folder without the expected files are UsageErrors; corrupt files are
// RuntimeErrors naming the file.
std::shared_ptr<const Dataset> make_dataset(const std::string& name, const std::string& path, bool train);

// `--dataset auto` (the default): fashion_mnist without a path (the embedded data); with one, the
// layout decides: train/ (+ val/) class folders -> imagenet (MAE's scripts pass only --data_path),
// IDX files -> fashion_mnist. Other names are returned unchanged. UsageError when the folder says nothing.
std::string resolve_dataset_name(const std::string& name, const std::string& path);

// Normalisation statistics (per channel, in [0,1] units) for `channels` channels of a
// dataset: Fashion-MNIST (0.2860 / 0.3530), MNIST (0.1307 / 0.3081), CIFAR-10/100, else
// ImageNet's (0.485, 0.456, 0.406) / (0.229, 0.224, 0.225) (their average for 1 channel).
// Gray datasets repeat their statistic when the model wants 3 channels.
struct MeanStd {
  std::vector<double> mean;
  std::vector<double> std;
};
MeanStd default_mean_std(const std::string& dataset_name, int64_t channels);

}  // namespace sparsevit::data
