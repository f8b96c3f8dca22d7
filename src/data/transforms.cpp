#include "data/transforms.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <array>
#include <cmath>

#include "data/image_blend.h"
#include "data/dataset.h"
#include "data/rand_augment.h"
#include "util/errors.h"

namespace sparsevit::data {

namespace {

void check_image(const at::Tensor& image, const char* what) {
  if (!image.defined() || image.dim() != 3 || image.size(0) < 1 || image.size(1) < 1 || image.size(2) < 1) {
    throw RuntimeError(std::string(what) + ": expected a [C, H, W] image, got " +
                       (image.defined() ? std::to_string(image.dim()) + "-d tensor" : std::string("undefined")));
  }
}

// Python's round() (half to even), which torchvision's crop arithmetic uses.
int64_t round_half_even(double x) { return static_cast<int64_t>(std::nearbyint(x)); }

at::Tensor crop(const at::Tensor& image, const CropBox& box) {
  return image.slice(1, box.top, box.top + box.height).slice(2, box.left, box.left + box.width);
}

}  // namespace

Transform compose(std::vector<Transform> transforms) {
  for (const auto& t : transforms) {
    if (!t) throw UsageError("compose: empty transform");
  }
  return [transforms = std::move(transforms)](const at::Tensor& image, Rng& rng) {
    at::Tensor x = image;
    for (const auto& t : transforms) x = t(x, rng);
    return x;
  };
}

at::Tensor to_float(const at::Tensor& image) {
  check_image(image, "to_float");
  if (image.scalar_type() == at::kByte) return image.to(at::kFloat).div_(255.0);
  if (!at::isFloatingType(image.scalar_type())) {
    throw RuntimeError("to_float: expected a uint8 or floating image, got " + std::string(image.dtype().name()));
  }
  return image.to(at::kFloat);
}

at::Tensor resize(const at::Tensor& image, int64_t height, int64_t width) {
  check_image(image, "resize");
  if (height < 1 || width < 1) throw RuntimeError("resize: target size must be positive");
  if (image.size(1) == height && image.size(2) == width) return image;
  const at::Tensor batch = image.to(at::kFloat).unsqueeze(0);
  // The antialiased kernel equals plain bilinear when enlarging and low-passes when shrinking.
  return at::_upsample_bilinear2d_aa(batch, {height, width}, /*align_corners=*/false).squeeze(0);
}

at::Tensor resize_shorter(const at::Tensor& image, int64_t size) {
  check_image(image, "resize_shorter");
  const int64_t h = image.size(1), w = image.size(2);
  if (h <= w) return resize(image, size, static_cast<int64_t>(static_cast<double>(size) * w / h));
  return resize(image, static_cast<int64_t>(static_cast<double>(size) * h / w), size);
}

at::Tensor center_crop(const at::Tensor& image, int64_t size) {
  check_image(image, "center_crop");
  at::Tensor x = image;
  const int64_t h = x.size(1), w = x.size(2);
  if (h < size || w < size) {
    // torchvision pads (left/top get the smaller half) before cropping.
    const int64_t ph = std::max<int64_t>(0, size - h), pw = std::max<int64_t>(0, size - w);
    x = at::constant_pad_nd(x, {pw / 2, (pw + 1) / 2, ph / 2, (ph + 1) / 2}, 0);
  }
  const int64_t top = round_half_even((x.size(1) - size) / 2.0);
  const int64_t left = round_half_even((x.size(2) - size) / 2.0);
  return crop(x, {top, left, size, size});
}

at::Tensor grayscale(const at::Tensor& image) {
  check_image(image, "grayscale");
  if (image.size(0) == 1) return image;
  if (image.size(0) != 3) throw RuntimeError("grayscale: expected 1 or 3 channels, got " + std::to_string(image.size(0)));
  return (image[0] * 0.299 + image[1] * 0.587 + image[2] * 0.114).unsqueeze(0);
}

at::Tensor match_channels(const at::Tensor& image, int64_t channels) {
  check_image(image, "match_channels");
  const int64_t c = image.size(0);
  if (c == channels) return image;
  if (c == 1 && channels == 3) return image.repeat({3, 1, 1});
  if (c == 3 && channels == 1) {
    if (image.scalar_type() == at::kByte) {
      return grayscale(image.to(at::kFloat)).round_().clamp_(0, 255).to(at::kByte);
    }
    return grayscale(image);
  }
  throw RuntimeError("cannot convert a " + std::to_string(c) + "-channel image to " + std::to_string(channels) +
                     " channels");
}

// ---------------------------------------------------------------- RandomResizedCrop

RandomResizedCrop::RandomResizedCrop(int64_t size, std::pair<double, double> scale, std::pair<double, double> ratio)
    : size_(size), scale_(scale), ratio_(ratio) {
  if (size_ < 1) throw UsageError("RandomResizedCrop: size must be positive");
  if (!(scale_.first > 0 && scale_.first <= scale_.second && scale_.second <= 1.0)) {
    throw UsageError("RandomResizedCrop: scale must satisfy 0 < min <= max <= 1");
  }
  if (!(ratio_.first > 0 && ratio_.first <= ratio_.second)) {
    throw UsageError("RandomResizedCrop: ratio must satisfy 0 < min <= max");
  }
}

CropBox RandomResizedCrop::sample_box(int64_t height, int64_t width, Rng& rng) const {
  const double area = static_cast<double>(height) * static_cast<double>(width);
  const double log_lo = std::log(ratio_.first), log_hi = std::log(ratio_.second);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target_area = area * uniform(rng, scale_.first, scale_.second);
    const double aspect = std::exp(uniform(rng, log_lo, log_hi));
    const int64_t w = round_half_even(std::sqrt(target_area * aspect));
    const int64_t h = round_half_even(std::sqrt(target_area / aspect));
    if (w > 0 && h > 0 && w <= width && h <= height) {
      const int64_t top = randint(rng, 0, height - h + 1);
      const int64_t left = randint(rng, 0, width - w + 1);
      return {top, left, h, w};
    }
  }
  // Fallback: the whole image, trimmed to the nearest allowed aspect ratio, centred.
  const double in_ratio = static_cast<double>(width) / static_cast<double>(height);
  int64_t w = width, h = height;
  if (in_ratio < ratio_.first) {
    h = std::max<int64_t>(1, round_half_even(static_cast<double>(w) / ratio_.first));
  } else if (in_ratio > ratio_.second) {
    w = std::max<int64_t>(1, round_half_even(static_cast<double>(h) * ratio_.second));
  }
  h = std::min(h, height);
  w = std::min(w, width);
  return {(height - h) / 2, (width - w) / 2, h, w};
}

at::Tensor RandomResizedCrop::operator()(const at::Tensor& image, Rng& rng) const {
  check_image(image, "RandomResizedCrop");
  const CropBox box = sample_box(image.size(1), image.size(2), rng);
  return resize(crop(image, box), size_, size_);
}

// ---------------------------------------------------------------- RandomCropWithPadding

RandomCropWithPadding::RandomCropWithPadding(int64_t size, int64_t padding) : size_(size), padding_(padding) {
  if (size_ < 1) throw UsageError("RandomCropWithPadding: size must be positive");
  if (padding_ < 0) throw UsageError("RandomCropWithPadding: padding must be >= 0");
}

at::Tensor RandomCropWithPadding::operator()(const at::Tensor& image, Rng& rng) const {
  check_image(image, "RandomCropWithPadding");
  const int64_t h = image.size(1), w = image.size(2);
  const int64_t extra_h = std::max<int64_t>(0, size_ - (h + 2 * padding_));
  const int64_t extra_w = std::max<int64_t>(0, size_ - (w + 2 * padding_));
  at::Tensor x = image;
  if (padding_ > 0 || extra_h > 0 || extra_w > 0) {
    x = at::constant_pad_nd(image, {padding_ + extra_w / 2, padding_ + (extra_w + 1) / 2, padding_ + extra_h / 2,
                                    padding_ + (extra_h + 1) / 2},
                            0);
  }
  const int64_t top = randint(rng, 0, x.size(1) - size_ + 1);
  const int64_t left = randint(rng, 0, x.size(2) - size_ + 1);
  return crop(x, {top, left, size_, size_});
}

// ---------------------------------------------------------------- flip, jitter, normalise

RandomHorizontalFlip::RandomHorizontalFlip(double p) : p_(p) {
  if (!(p_ >= 0 && p_ <= 1)) throw UsageError("RandomHorizontalFlip: p must be in [0, 1]");
}

at::Tensor RandomHorizontalFlip::operator()(const at::Tensor& image, Rng& rng) const {
  check_image(image, "RandomHorizontalFlip");
  // One draw whatever p is, so the stream does not depend on p.
  const bool flip = uniform01(rng) < p_;
  return flip ? image.flip({2}) : image;
}

ColorJitter::ColorJitter(double brightness, double contrast, double saturation)
    : brightness_(brightness), contrast_(contrast), saturation_(saturation) {
  if (brightness_ < 0 || contrast_ < 0 || saturation_ < 0) throw UsageError("ColorJitter: strengths must be >= 0");
}

at::Tensor ColorJitter::operator()(const at::Tensor& image, Rng& rng) const {
  check_image(image, "ColorJitter");
  std::vector<int> order = {0, 1, 2};
  fisher_yates(order, rng);
  auto factor = [&rng](double s) { return uniform(rng, std::max(0.0, 1.0 - s), 1.0 + s); };
  const std::array<double, 3> factors = {factor(brightness_), factor(contrast_), factor(saturation_)};
  at::Tensor x = image;
  for (int op : order) {
    const double f = factors[static_cast<std::size_t>(op)];
    if (op == 0) {
      if (brightness_ > 0) x = (x * f).clamp_(0.0, 1.0);
    } else if (op == 1) {
      if (contrast_ > 0) x = blend(x, grayscale(x).mean(), f);
    } else if (saturation_ > 0 && x.size(0) == 3) {
      x = blend(x, grayscale(x), f);
    }
  }
  return x;
}

Normalize::Normalize(std::vector<double> mean, std::vector<double> std) : mean_(std::move(mean)), std_(std::move(std)) {
  if (mean_.empty() || mean_.size() != std_.size()) {
    throw UsageError("Normalize: mean and std need the same, non-zero number of values");
  }
  for (double s : std_) {
    if (!(s > 0)) throw UsageError("Normalize: std values must be > 0");
  }
}

RandomErasing::RandomErasing(double probability, std::string mode, int64_t max_count)
    : probability_(probability), mode_(std::move(mode)), max_count_(max_count) {
  if (!(probability >= 0 && probability <= 1)) throw UsageError("random erasing probability must be in [0, 1]");
  if (mode_ != "pixel" && mode_ != "rand" && mode_ != "const")
    throw UsageError("random erasing mode must be pixel, rand or const, got '" + mode_ + "'");
  if (max_count < 1) throw UsageError("random erasing count must be >= 1");
}

at::Tensor RandomErasing::operator()(const at::Tensor& image, Rng& rng) const {
  if (uniform01(rng) > probability_) return image;  // timm: random.random() > probability
  at::Tensor out = image.clone();
  const int64_t channels = out.size(0), height = out.size(1), width = out.size(2);
  const int64_t count = max_count_ == 1 ? 1 : randint(rng, 1, max_count_ + 1);
  const double area = static_cast<double>(height * width) / static_cast<double>(count);
  const double log_min = std::log(0.3), log_max = std::log(1.0 / 0.3);
  for (int64_t n = 0; n < count; ++n) {
    for (int attempt = 0; attempt < 10; ++attempt) {
      const double target = uniform(rng, 0.02, 1.0 / 3.0) * area;
      const double aspect = std::exp(uniform(rng, log_min, log_max));
      const auto h = static_cast<int64_t>(std::lround(std::sqrt(target * aspect)));
      const auto w = static_cast<int64_t>(std::lround(std::sqrt(target / aspect)));
      if (w >= width || h >= height || w < 1 || h < 1) continue;
      const int64_t top = randint(rng, 0, height - h + 1), left = randint(rng, 0, width - w + 1);
      at::Tensor box = out.narrow(1, top, h).narrow(2, left, w);
      if (mode_ == "const") {
        box.zero_();
      } else {
        at::Tensor fill = at::empty(mode_ == "pixel" ? std::vector<int64_t>{channels, h, w} : std::vector<int64_t>{channels, 1, 1},
                                    at::kDouble);
        double* v = fill.data_ptr<double>();
        for (int64_t i = 0; i < fill.numel(); ++i) v[i] = normal(rng, 0.0, 1.0);
        box.copy_(fill.to(out.scalar_type()).expand_as(box));
      }
      break;
    }
  }
  return out;
}

at::Tensor Normalize::operator()(const at::Tensor& image) const {
  check_image(image, "Normalize");
  const int64_t c = image.size(0);
  if (c != static_cast<int64_t>(mean_.size())) {
    throw RuntimeError("Normalize: " + std::to_string(mean_.size()) + " mean/std values for a " + std::to_string(c) +
                       "-channel image");
  }
  std::vector<float> mean(mean_.begin(), mean_.end()), inv(std_.size());
  for (std::size_t i = 0; i < std_.size(); ++i) inv[i] = static_cast<float>(1.0 / std_[i]);
  const auto opts = at::TensorOptions().dtype(at::kFloat);
  const at::Tensor m = at::tensor(mean, opts).view({c, 1, 1});
  const at::Tensor s = at::tensor(inv, opts).view({c, 1, 1});
  return (image.to(at::kFloat) - m) * s;
}

// ---------------------------------------------------------------- pipelines

namespace {

MeanStd resolved_mean_std(const TransformConfig& c) {
  if (c.mean.empty() && c.std.empty()) return default_mean_std("", c.in_chans);
  return {c.mean, c.std};
}

bool augment_on(const std::string& aa) { return !aa.empty() && aa != "none"; }

Transform head(int64_t channels) {
  return [channels](const at::Tensor& image, Rng&) { return match_channels(to_float(image), channels); };
}

}  // namespace

TransformConfig transform_config_for(const std::string& dataset, int64_t input_size, int64_t in_chans) {
  TransformConfig tc;
  tc.input_size = input_size;
  tc.in_chans = in_chans;
  const MeanStd ms = default_mean_std(dataset, in_chans);
  tc.mean = ms.mean;
  tc.std = ms.std;
  if (input_size <= 64) tc.crop_pct = 1.0;  // small images: evaluate on the whole image
  return tc;
}

void validate(const TransformConfig& c) {
  if (c.input_size < 1 || c.input_size > 8192) throw UsageError("input size must be in [1, 8192]");
  if (c.in_chans != 1 && c.in_chans != 3) throw UsageError("in_chans must be 1 or 3");
  const MeanStd ms = resolved_mean_std(c);
  if (ms.mean.size() != static_cast<std::size_t>(c.in_chans) || ms.std.size() != ms.mean.size()) {
    throw UsageError("mean and std need " + std::to_string(c.in_chans) + " values each");
  }
  Normalize(ms.mean, ms.std);
  if (c.train_crop != "rrc" && c.train_crop != "pad" && c.train_crop != "none" && c.train_crop != "auto") {
    throw UsageError("unknown train crop '" + c.train_crop + "' (known: auto, rrc, pad, none)");
  }
  RandomErasing(c.re_prob, c.re_mode, c.re_count);
  RandomResizedCrop(c.input_size, {c.scale_min, c.scale_max}, {c.ratio_min, c.ratio_max});
  if (c.crop_padding < -1) throw UsageError("crop padding must be >= 0 (or -1: auto)");
  RandomHorizontalFlip{c.hflip};
  if (!(c.color_jitter >= 0)) throw UsageError("color jitter must be >= 0");
  if (augment_on(c.auto_augment)) parse_rand_augment(c.auto_augment);
  if (!(c.crop_pct > 0 && c.crop_pct <= 1)) throw UsageError("crop_pct must be in (0, 1]");
}

Transform build_train_transform(const TransformConfig& c) {
  validate(c);
  const MeanStd ms = resolved_mean_std(c);
  std::vector<Transform> steps = {head(c.in_chans)};
  const int64_t size = c.input_size;
  const std::string crop = c.train_crop != "auto" ? c.train_crop : size > 64 ? "rrc" : "pad";
  if (crop == "rrc") {
    steps.push_back(RandomResizedCrop(size, {c.scale_min, c.scale_max}, {c.ratio_min, c.ratio_max}));
  } else {
    steps.push_back([size](const at::Tensor& x, Rng&) {
      return (x.size(1) == size && x.size(2) == size) ? x : center_crop(resize_shorter(x, size), size);
    });
    if (crop == "pad") {
      const int64_t padding = c.crop_padding >= 0 ? c.crop_padding : size / 8;
      steps.push_back(RandomCropWithPadding(size, padding));
    }
  }
  if (c.hflip > 0) steps.push_back(RandomHorizontalFlip(c.hflip));
  if (augment_on(c.auto_augment)) {
    steps.push_back(RandAugment(parse_rand_augment(c.auto_augment), ms.mean));
  } else if (c.color_jitter > 0) {
    steps.push_back(ColorJitter(c.color_jitter));
  }
  steps.push_back(Normalize(ms.mean, ms.std));
  if (c.re_prob > 0) steps.push_back(RandomErasing(c.re_prob, c.re_mode, c.re_count));
  return compose(std::move(steps));
}

Transform build_eval_transform(const TransformConfig& c) {
  validate(c);
  const MeanStd ms = resolved_mean_std(c);
  const int64_t size = c.input_size;
  const auto scale_size = static_cast<int64_t>(std::floor(static_cast<double>(size) / c.crop_pct + 1e-9));
  std::vector<Transform> steps = {head(c.in_chans)};
  steps.push_back([size, scale_size](const at::Tensor& x, Rng&) {
    return center_crop(resize_shorter(x, scale_size), size);
  });
  steps.push_back(Normalize(ms.mean, ms.std));
  return compose(std::move(steps));
}

}  // namespace sparsevit::data
