#include "data/rand_augment.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <limits>

#include "data/image_blend.h"
#include "data/transforms.h"
#include "util/errors.h"
#include "util/math_constants.h"

namespace sparsevit::data {

namespace {

constexpr double kLevelDenominator = 10.0;  // timm's _LEVEL_DENOM

const std::vector<std::string>& plain_ops() {
  static const std::vector<std::string> ops = {
      "AutoContrast", "Equalize", "Invert",    "Rotate", "Posterize", "Solarize",      "SolarizeAdd",   "Color",
      "Contrast",     "Brightness", "Sharpness", "ShearX", "ShearY",    "TranslateXRel", "TranslateYRel"};
  return ops;
}

const std::vector<std::string>& increasing_ops() {
  static const std::vector<std::string> ops = {
      "AutoContrast",       "Equalize",           "Invert",           "Rotate",
      "PosterizeIncreasing", "SolarizeIncreasing", "SolarizeAdd",      "ColorIncreasing",
      "ContrastIncreasing", "BrightnessIncreasing", "SharpnessIncreasing", "ShearX",
      "ShearY",             "TranslateXRel",      "TranslateYRel"};
  return ops;
}

double parse_number(const std::string& spec, const std::string& section, const std::string& text) {
  std::size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (text.empty() || used != text.size() || !std::isfinite(value)) {
    throw UsageError("invalid RandAugment section '" + section + "' in '" + spec + "': '" + text +
                     "' is not a number");
  }
  return value;
}

double random_sign(double v, Rng& rng) { return uniform01(rng) > 0.5 ? -v : v; }

// 8-bit levels of a [0,1] image, as a contiguous uint8 tensor.
at::Tensor to_levels(const at::Tensor& x) {
  return x.mul(255.0).round_().clamp_(0.0, 255.0).to(at::kByte).contiguous();
}

at::Tensor from_levels(const at::Tensor& levels) { return levels.to(at::kFloat).div_(255.0); }

// Applies a per-channel 256-entry lookup table built from that channel's histogram.
template <class MakeLut>
at::Tensor per_channel_lut(const at::Tensor& image, MakeLut make_lut) {
  at::Tensor levels = to_levels(image);
  const int64_t c = levels.size(0), plane = levels.size(1) * levels.size(2);
  uint8_t* data = levels.data_ptr<uint8_t>();
  for (int64_t ch = 0; ch < c; ++ch) {
    uint8_t* p = data + ch * plane;
    std::array<int64_t, 256> hist{};
    for (int64_t i = 0; i < plane; ++i) ++hist[p[i]];
    const std::array<uint8_t, 256> lut = make_lut(hist);
    for (int64_t i = 0; i < plane; ++i) p[i] = lut[p[i]];
  }
  return from_levels(levels);
}

std::array<uint8_t, 256> identity_lut() {
  std::array<uint8_t, 256> lut{};
  for (int i = 0; i < 256; ++i) lut[static_cast<std::size_t>(i)] = static_cast<uint8_t>(i);
  return lut;
}

// PIL ImageOps.autocontrast(cutoff=0).
std::array<uint8_t, 256> autocontrast_lut(const std::array<int64_t, 256>& h) {
  int lo = 0, hi = 255;
  while (lo < 256 && h[static_cast<std::size_t>(lo)] == 0) ++lo;
  while (hi >= 0 && h[static_cast<std::size_t>(hi)] == 0) --hi;
  if (hi <= lo) return identity_lut();
  const double scale = 255.0 / (hi - lo), offset = -lo * scale;
  std::array<uint8_t, 256> lut{};
  for (int i = 0; i < 256; ++i) {
    const int v = static_cast<int>(i * scale + offset);  // truncation, as int() in PIL
    lut[static_cast<std::size_t>(i)] = static_cast<uint8_t>(std::clamp(v, 0, 255));
  }
  return lut;
}

// PIL ImageOps.equalize.
std::array<uint8_t, 256> equalize_lut(const std::array<int64_t, 256>& h) {
  int64_t total = 0, last = 0, nonzero = 0;
  for (int64_t count : h) {
    if (count) {
      total += count;
      last = count;
      ++nonzero;
    }
  }
  if (nonzero <= 1) return identity_lut();
  const int64_t step = (total - last) / 255;
  if (step == 0) return identity_lut();
  std::array<uint8_t, 256> lut{};
  int64_t n = step / 2;
  for (std::size_t i = 0; i < 256; ++i) {
    lut[i] = static_cast<uint8_t>(std::min<int64_t>(255, n / step));
    n += h[i];
  }
  return lut;
}

at::Tensor fill_tensor(const std::vector<double>& fill, int64_t channels) {
  std::vector<float> values(static_cast<std::size_t>(channels));
  double mean = 0;
  for (double f : fill) mean += f;
  mean = fill.empty() ? 0.0 : mean / static_cast<double>(fill.size());
  for (int64_t c = 0; c < channels; ++c) {
    const double v = fill.size() == static_cast<std::size_t>(channels) ? fill[static_cast<std::size_t>(c)] : mean;
    values[static_cast<std::size_t>(c)] = static_cast<float>(v);
  }
  return at::tensor(values, at::TensorOptions().dtype(at::kFloat)).view({channels, 1, 1});
}

// PIL's ImageFilter.SMOOTH (3x3 kernel 1 1 1 / 1 5 1 / 1 1 1, /13) with the border kept.
at::Tensor smooth(const at::Tensor& image) {
  const int64_t c = image.size(0), h = image.size(1), w = image.size(2);
  if (h < 3 || w < 3) return image;
  static const std::array<int64_t, 2> kOnes = {1, 1}, kZeros = {0, 0};
  at::Tensor kernel = at::ones({3, 3}, at::TensorOptions().dtype(at::kFloat));
  kernel[1][1] = 5.0;
  kernel = (kernel / 13.0).view({1, 1, 3, 3}).repeat({c, 1, 1, 1});
  const at::Tensor inner = at::conv2d(image.unsqueeze(0), kernel, at::Tensor(), at::IntArrayRef(kOnes),
                                      at::IntArrayRef(kZeros), at::IntArrayRef(kOnes), c).squeeze(0);
  at::Tensor out = image.clone();
  out.slice(1, 1, h - 1).slice(2, 1, w - 1).copy_(inner);
  return out;
}

}  // namespace

RandAugmentConfig parse_rand_augment(const std::string& spec) {
  std::vector<std::string> sections;
  std::size_t start = 0;
  while (true) {
    const std::size_t dash = spec.find('-', start);
    sections.push_back(spec.substr(start, dash == std::string::npos ? std::string::npos : dash - start));
    if (dash == std::string::npos) break;
    start = dash + 1;
  }
  if (sections.empty() || sections[0] != "rand") {
    throw UsageError("invalid RandAugment string '" + spec + "': it must start with 'rand' (e.g. rand-m9-mstd0.5-inc1)");
  }
  RandAugmentConfig config;
  for (std::size_t i = 1; i < sections.size(); ++i) {
    const std::string& section = sections[i];
    std::size_t split = 0;
    while (split < section.size() && std::isalpha(static_cast<unsigned char>(section[split]))) ++split;
    const std::string key = section.substr(0, split), value = section.substr(split);
    if (key.empty() || value.empty()) {
      throw UsageError("invalid RandAugment section '" + section + "' in '" + spec +
                       "' (expected m<magnitude>, n<ops>, mstd<std>, mmax<max>, inc<0|1> or p<prob>)");
    }
    const double v = parse_number(spec, section, value);
    if (key == "m") {
      if (v < 0) throw UsageError("RandAugment magnitude must be >= 0 in '" + spec + "'");
      config.magnitude = v;
    } else if (key == "n") {
      if (v < 0 || v != std::floor(v) || v > 100) {
        throw UsageError("RandAugment op count must be an integer in [0, 100] in '" + spec + "'");
      }
      config.num_ops = static_cast<int64_t>(v);
    } else if (key == "mstd") {
      if (v < 0) throw UsageError("RandAugment mstd must be >= 0 in '" + spec + "'");
      config.magnitude_std = v;
    } else if (key == "mmax") {
      if (v <= 0) throw UsageError("RandAugment mmax must be > 0 in '" + spec + "'");
      config.magnitude_max = v;
    } else if (key == "inc") {
      if (v != 0 && v != 1) throw UsageError("RandAugment inc must be 0 or 1 in '" + spec + "'");
      config.increasing = v == 1;
    } else if (key == "p") {
      if (v < 0 || v > 1) throw UsageError("RandAugment p must be in [0, 1] in '" + spec + "'");
      config.prob = v;
    } else {
      throw UsageError("unknown RandAugment section '" + section + "' in '" + spec +
                       "' (known keys: m, n, mstd, mmax, inc, p)");
    }
  }
  return config;
}

RandAugment::RandAugment(RandAugmentConfig config, std::vector<double> fill)
    : config_(config), fill_(std::move(fill)) {
  if (fill_.empty()) fill_ = {0.5};
}

const std::vector<std::string>& RandAugment::op_names() const {
  return config_.increasing ? increasing_ops() : plain_ops();
}

at::Tensor affine_pil(const at::Tensor& image, const double (&m)[6], const std::vector<double>& fill) {
  const int64_t c = image.size(0);
  const double h = static_cast<double>(image.size(1)), w = static_cast<double>(image.size(2));
  const double a = m[0], b = m[1], cc = m[2], d = m[3], e = m[4], f = m[5];
  // Pixel coordinates (centres at +0.5) to grid_sampler's [-1, 1] (align_corners=false).
  const std::vector<float> theta = {
      static_cast<float>(a), static_cast<float>(b * h / w), static_cast<float>(a + b * h / w + 2 * cc / w - 1),
      static_cast<float>(d * w / h), static_cast<float>(e), static_cast<float>(d * w / h + e + 2 * f / h - 1)};
  const at::Tensor t = at::tensor(theta, at::TensorOptions().dtype(at::kFloat)).view({1, 2, 3});
  const at::Tensor grid = at::affine_grid_generator(t, {1, c + 1, image.size(1), image.size(2)}, false);
  // A ones channel tracks how much of each output pixel came from inside the image.
  const at::Tensor input = at::cat({image.to(at::kFloat), at::ones_like(image.select(0, 0), at::kFloat).unsqueeze(0)})
                               .unsqueeze(0);
  const at::Tensor out = at::grid_sampler_2d(input, grid, /*bilinear*/ 0, /*zeros*/ 0, false).squeeze(0);
  const at::Tensor mask = out.slice(0, c, c + 1);
  return (out.slice(0, 0, c) + (1.0 - mask) * fill_tensor(fill, c)).clamp_(0.0, 1.0);
}

at::Tensor RandAugment::apply(const std::string& op, const at::Tensor& image, double magnitude, Rng& rng) const {
  const double level = magnitude / kLevelDenominator;
  const at::Tensor& x = image;
  if (op == "Identity") return x;
  if (op == "AutoContrast") return per_channel_lut(x, autocontrast_lut);
  if (op == "Equalize") return per_channel_lut(x, equalize_lut);
  if (op == "Invert") return 1.0 - x;
  if (op == "Rotate") {
    const double degrees = random_sign(level * 30.0, rng);
    const double rad = -degrees * kPi / 180.0;
    const double cx = static_cast<double>(x.size(2)) / 2.0, cy = static_cast<double>(x.size(1)) / 2.0;
    double mat[6] = {std::cos(rad), std::sin(rad), 0.0, -std::sin(rad), std::cos(rad), 0.0};
    mat[2] = mat[0] * -cx + mat[1] * -cy + cx;
    mat[5] = mat[3] * -cx + mat[4] * -cy + cy;
    return affine_pil(x, mat, fill_);
  }
  if (op == "ShearX" || op == "ShearY") {
    const double s = random_sign(level * 0.3, rng);
    const double mat[6] = {1.0, op == "ShearX" ? s : 0.0, 0.0, op == "ShearY" ? s : 0.0, 1.0, 0.0};
    return affine_pil(x, mat, fill_);
  }
  if (op == "TranslateXRel" || op == "TranslateYRel") {
    const double pct = random_sign(level * 0.45, rng);
    const bool horizontal = op == "TranslateXRel";
    const double mat[6] = {1.0, 0.0, horizontal ? pct * static_cast<double>(x.size(2)) : 0.0,
                           0.0, 1.0, horizontal ? 0.0 : pct * static_cast<double>(x.size(1))};
    return affine_pil(x, mat, fill_);
  }
  if (op == "Posterize" || op == "PosterizeIncreasing") {
    int bits = static_cast<int>(level * 4);
    if (op == "PosterizeIncreasing") bits = 4 - bits;
    if (bits >= 8) return x;
    bits = std::max(bits, 0);
    const int64_t mask = ~((int64_t{1} << (8 - bits)) - 1) & 0xFF;
    return from_levels(at::bitwise_and(to_levels(x), mask));
  }
  if (op == "Solarize" || op == "SolarizeIncreasing") {
    int64_t threshold = std::min<int64_t>(256, static_cast<int64_t>(level * 256));
    if (op == "SolarizeIncreasing") threshold = 256 - threshold;
    const at::Tensor levels = to_levels(x).to(at::kFloat);
    return at::where(levels >= static_cast<double>(threshold), 255.0 - levels, levels).div_(255.0);
  }
  if (op == "SolarizeAdd") {
    const int64_t add = std::min<int64_t>(128, static_cast<int64_t>(level * 110));
    const at::Tensor levels = to_levels(x).to(at::kFloat);
    return at::where(levels < 128.0, (levels + static_cast<double>(add)).clamp_max(255.0), levels).div_(255.0);
  }
  const bool increasing = op.size() > 10 && op.compare(op.size() - 10, 10, "Increasing") == 0;
  const std::string base = increasing ? op.substr(0, op.size() - 10) : op;
  if (base == "Color" || base == "Contrast" || base == "Brightness" || base == "Sharpness") {
    const double factor =
        increasing ? std::max(0.1, 1.0 + random_sign(level * 0.9, rng)) : level * 1.8 + 0.1;
    if (base == "Brightness") return (x * factor).clamp_(0.0, 1.0);
    if (base == "Sharpness") return blend(x, smooth(x), factor);
    const at::Tensor gray = to_levels(grayscale(x)).to(at::kFloat).div_(255.0);
    if (base == "Color") return x.size(0) == 1 ? x : blend(x, gray.expand_as(x), factor);
    // Contrast: PIL's degenerate image is the rounded mean gray level.
    const double mean = std::floor(gray.mean().item<double>() * 255.0 + 0.5) / 255.0;
    return blend(x, at::full_like(x, mean), factor);
  }
  throw UsageError("unknown RandAugment op '" + op + "'");
}

at::Tensor RandAugment::operator()(const at::Tensor& image, Rng& rng) const {
  if (!image.defined() || image.dim() != 3) throw RuntimeError("RandAugment: expected a [C, H, W] image");
  const auto& ops = op_names();
  at::Tensor x = image.to(at::kFloat);
  for (int64_t i = 0; i < config_.num_ops; ++i) {
    const std::string& op = ops[static_cast<std::size_t>(below(rng, ops.size()))];
    if (config_.prob < 1.0 && uniform01(rng) > config_.prob) continue;
    double m = config_.magnitude;
    if (config_.magnitude_std > 100.0) {
      m = uniform(rng, 0.0, m);
    } else if (config_.magnitude_std > 0) {
      m = normal(rng, m, config_.magnitude_std);
    }
    m = std::clamp(m, 0.0, config_.magnitude_max);
    x = apply(op, x, m, rng);
  }
  return x;
}

}  // namespace sparsevit::data
