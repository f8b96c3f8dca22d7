// Per-sample image transforms on LibTorch tensors, deterministic given a std::mt19937_64, and
// the timm/DeiT train and eval pipelines built from a TransformConfig.
//
// Convention: the building blocks take and return float32 [C, H, W] images with values in
// [0, 1] (the pipelines convert the reader's uint8 [C, H, W] first), except Normalize, whose
// output is the model input. Random draws go through data/random.h, so a seed gives the same
// result with every standard library.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "data/random.h"

namespace sparsevit::data {

// A per-sample transform: image in, image out, randomness from `rng` only.
using Transform = std::function<at::Tensor(const at::Tensor& image, Rng& rng)>;

// Applies the transforms left to right.
Transform compose(std::vector<Transform> transforms);

// ---------------------------------------------------------------- deterministic helpers

// uint8 [C,H,W] -> float32 [0,1]; a floating image is returned as float32 unchanged.
at::Tensor to_float(const at::Tensor& image);

// Bilinear resize of a float [C,H,W] image to height x width, antialiased when shrinking
// (like PIL and torchvision's antialias=True). Returns the input when the size already matches.
at::Tensor resize(const at::Tensor& image, int64_t height, int64_t width);

// Resizes so the shorter side is `size` (the longer one scaled by int(size * long / short),
// as torchvision does).
at::Tensor resize_shorter(const at::Tensor& image, int64_t size);

// The size x size centre (torchvision's rounding; zero padding when the image is smaller).
at::Tensor center_crop(const at::Tensor& image, int64_t size);

// 1 -> 3 channels by repetition, 3 -> 1 by luminance (0.299 R + 0.587 G + 0.114 B),
// unchanged when it already has `channels`. Other combinations are RuntimeErrors.
at::Tensor match_channels(const at::Tensor& image, int64_t channels);

// Luminance of a float [3,H,W] image as [1,H,W] (a 1-channel image is returned as is).
at::Tensor grayscale(const at::Tensor& image);

// ---------------------------------------------------------------- random transforms

struct CropBox {
  int64_t top = 0, left = 0, height = 0, width = 0;
};

// torchvision's RandomResizedCrop: up to 10 tries at an area fraction in `scale` and a
// log-uniform aspect ratio in `ratio`; if none fits, the largest centred crop whose aspect
// ratio is within `ratio`. The crop is then resized (bilinear, antialiased) to size x size.
class RandomResizedCrop {
 public:
  explicit RandomResizedCrop(int64_t size, std::pair<double, double> scale = {0.08, 1.0},
                             std::pair<double, double> ratio = {3.0 / 4.0, 4.0 / 3.0});
  CropBox sample_box(int64_t height, int64_t width, Rng& rng) const;
  at::Tensor operator()(const at::Tensor& image, Rng& rng) const;

 private:
  int64_t size_;
  std::pair<double, double> scale_, ratio_;
};

// Zero-pads each side by `padding`, then takes a random size x size crop (the classic
// CIFAR recipe). Images smaller than size after padding are padded further.
class RandomCropWithPadding {
 public:
  RandomCropWithPadding(int64_t size, int64_t padding);
  at::Tensor operator()(const at::Tensor& image, Rng& rng) const;

 private:
  int64_t size_, padding_;
};

// Mirrors left-right with probability p (one draw per call).
class RandomHorizontalFlip {
 public:
  explicit RandomHorizontalFlip(double p = 0.5);
  at::Tensor operator()(const at::Tensor& image, Rng& rng) const;

 private:
  double p_;
};

// torchvision's ColorJitter without hue: brightness, contrast and saturation factors drawn
// uniformly from [max(0, 1 - x), 1 + x], applied in a random order. Saturation is a no-op on
// 1-channel images. `ColorJitter(0.4)` is timm's `--color_jitter 0.4`.
class ColorJitter {
 public:
  explicit ColorJitter(double strength) : ColorJitter(strength, strength, strength) {}
  ColorJitter(double brightness, double contrast, double saturation);
  at::Tensor operator()(const at::Tensor& image, Rng& rng) const;

 private:
  double brightness_, contrast_, saturation_;
};

// timm's RandomErasing on a normalised [C,H,W] image: with probability p, erase
// randint(1, max_count) boxes, each of area uniform(0.02, 1/3) of the image / count and
// log-uniform aspect ratio in [0.3, 1/0.3] (10 tries each), filled per `mode`: "pixel" (a normal
// value per pixel and channel), "rand" (one normal value per channel) or "const" (zeros).
class RandomErasing {
 public:
  RandomErasing(double probability, std::string mode = "pixel", int64_t max_count = 1);
  at::Tensor operator()(const at::Tensor& image, Rng& rng) const;

 private:
  double probability_;
  std::string mode_;
  int64_t max_count_;
};

// (x - mean[c]) / std[c]; as many values as channels.
class Normalize {
 public:
  Normalize(std::vector<double> mean, std::vector<double> std);
  at::Tensor operator()(const at::Tensor& image) const;
  at::Tensor operator()(const at::Tensor& image, Rng&) const { return (*this)(image); }

 private:
  std::vector<double> mean_, std_;
};

// ---------------------------------------------------------------- pipelines

struct TransformConfig {
  int64_t input_size = 224;  // model input: input_size x input_size
  int64_t in_chans = 3;      // model channels (gray images are repeated, RGB reduced by luminance)
  std::vector<double> mean;  // empty: default_mean_std("", in_chans) (ImageNet)
  std::vector<double> std;
  // Train crop: "rrc" (RandomResizedCrop with scale/ratio), "pad" (resize to input_size if
  // needed, then RandomCropWithPadding), "none" (resize + centre crop, no randomness) or
  // "auto" (rrc above 64 px, pad for the small 28x28 / 32x32 datasets).
  std::string train_crop = "rrc";
  double scale_min = 0.08, scale_max = 1.0;
  double ratio_min = 3.0 / 4.0, ratio_max = 4.0 / 3.0;
  int64_t crop_padding = -1;   // "pad": pixels per side; -1: input_size / 8 (4 for 32, 3 for 28)
  double hflip = 0.5;          // probability
  double color_jitter = 0.4;   // 0: off; ignored when auto_augment is on (as in timm)
  std::string auto_augment;    // timm RandAugment string, e.g. "rand-m9-mstd0.5-inc1"; "" or "none": off
  double re_prob = 0;          // random erasing after Normalize (timm's --reprob); 0: off
  std::string re_mode = "pixel";
  int64_t re_count = 1;
  // Eval: resize the shorter side to floor(input_size / crop_pct), centre-crop input_size.
  // Use 1.0 for datasets already at the model's resolution (28x28, 32x32).
  double crop_pct = 0.875;
};

// The settings for a model input (input_size x input_size, in_chans) on a named dataset: the
// dataset's mean / std, and evaluation on the whole image for small (<= 64 px) inputs.
TransformConfig transform_config_for(const std::string& dataset, int64_t input_size, int64_t in_chans);

// UsageError on an inconsistent config (sizes, ranges, mean/std length, RandAugment string).
void validate(const TransformConfig& config);

// DeiT/timm train pipeline: to float -> channels -> crop -> flip -> RandAugment or colour
// jitter -> Normalize -> random erasing. Accepts uint8 (or float [0,1]) [C,H,W]; returns float32
// [in_chans, input_size, input_size].
Transform build_train_transform(const TransformConfig& config);

// Eval pipeline: to float -> channels -> resize shorter side -> centre crop -> Normalize.
Transform build_eval_transform(const TransformConfig& config);

}  // namespace sparsevit::data
