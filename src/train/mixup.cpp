#include "train/mixup.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include <ATen/ATen.h>

#include "train/losses.h"
#include "util/errors.h"
#include "util/math_constants.h"

namespace sparsevit::train {

namespace {


void require_mixup(bool ok, const std::string& message) {
  if (!ok) throw UsageError("mixup: " + message);
}

// log of a Gamma(shape, 1) draw; logs keep tiny shapes (u^(1/a) underflows) usable for Beta.
double log_gamma_sample(std::mt19937_64& rng, double shape) {
  if (shape < 1.0) {
    // Gamma(a) = Gamma(a + 1) * U^(1/a)  (Marsaglia & Tsang 2000, section 8).
    const double u = 1.0 - uniform01(rng);  // (0, 1]
    return log_gamma_sample(rng, shape + 1.0) + std::log(u) / shape;
  }
  const double d = shape - 1.0 / 3.0;
  const double c = 1.0 / std::sqrt(9.0 * d);
  for (;;) {
    double x, v;
    do {
      x = standard_normal(rng);
      v = 1.0 + c * x;
    } while (v <= 0.0);
    v = v * v * v;
    const double u = 1.0 - uniform01(rng);  // (0, 1]
    const double x2 = x * x;
    if (u < 1.0 - 0.0331 * x2 * x2) return std::log(d * v);
    if (std::log(u) < 0.5 * x2 + d * (1.0 - v + std::log(v))) return std::log(d * v);
  }
}

}  // namespace

double uniform01(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

int64_t uniform_int(std::mt19937_64& rng, int64_t lo, int64_t hi) {
  if (hi <= lo) return lo;
  const uint64_t range = static_cast<uint64_t>(hi - lo);
  // Rejection sampling: accept draws below the largest multiple of range.
  const uint64_t limit = std::numeric_limits<uint64_t>::max() - std::numeric_limits<uint64_t>::max() % range;
  uint64_t r;
  do {
    r = rng();
  } while (r >= limit);
  return lo + static_cast<int64_t>(r % range);
}

double standard_normal(std::mt19937_64& rng) {
  const double u1 = 1.0 - uniform01(rng);  // (0, 1]
  const double u2 = uniform01(rng);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * kPi * u2);
}

double sample_gamma(std::mt19937_64& rng, double shape) {
  if (!(shape > 0.0) || !std::isfinite(shape)) throw UsageError("gamma shape must be > 0, got " + std::to_string(shape));
  return std::exp(log_gamma_sample(rng, shape));
}

double sample_beta(std::mt19937_64& rng, double a, double b) {
  if (!(a > 0.0) || !(b > 0.0) || !std::isfinite(a) || !std::isfinite(b)) {
    throw UsageError("beta parameters must be > 0, got " + std::to_string(a) + ", " + std::to_string(b));
  }
  const double lx = log_gamma_sample(rng, a);
  const double ly = log_gamma_sample(rng, b);
  return 1.0 / (1.0 + std::exp(ly - lx));  // X / (X + Y) without under/overflow
}

at::Tensor mixup_target(const at::Tensor& labels, int64_t num_classes, double lambda, double smoothing) {
  const at::Tensor y1 = one_hot_smoothed(labels, num_classes, smoothing);
  if (lambda == 1.0) return y1;
  const at::Tensor y2 = y1.flip(0);
  return y1 * lambda + y2 * (1.0 - lambda);
}

Mixup::Mixup(MixupConfig config) : config_(std::move(config)) {
  const auto& c = config_;
  require_mixup(std::isfinite(c.mixup_alpha) && c.mixup_alpha >= 0, "mixup alpha must be >= 0");
  require_mixup(std::isfinite(c.cutmix_alpha) && c.cutmix_alpha >= 0, "cutmix alpha must be >= 0");
  require_mixup(c.prob >= 0 && c.prob <= 1, "mixup_prob must lie in [0, 1], got " + std::to_string(c.prob));
  require_mixup(c.switch_prob >= 0 && c.switch_prob <= 1,
          "mixup_switch_prob must lie in [0, 1], got " + std::to_string(c.switch_prob));
  require_mixup(c.label_smoothing >= 0 && c.label_smoothing < 1,
          "label smoothing must lie in [0, 1), got " + std::to_string(c.label_smoothing));
  require_mixup(c.num_classes > 0, "number of classes must be > 0, got " + std::to_string(c.num_classes));
  if (c.cutmix_minmax) {
    const auto [lo, hi] = *c.cutmix_minmax;
    require_mixup(lo > 0 && lo < hi && hi <= 1, "cutmix_minmax must satisfy 0 < min < max <= 1");
    config_.cutmix_alpha = 1.0;  // as timm: minmax forces cutmix on
  }
}

bool Mixup::enabled() const { return config_.mixup_alpha > 0 || config_.cutmix_alpha > 0 || config_.cutmix_minmax; }

std::pair<at::Tensor, at::Tensor> Mixup::apply(const at::Tensor& images, const at::Tensor& labels,
                                                std::mt19937_64& rng) {
  if (!images.defined() || images.dim() < 3) throw UsageError("mixup: images must be [batch, ..., height, width]");
  if (!labels.defined() || labels.dim() != 1 || labels.size(0) != images.size(0)) {
    throw UsageError("mixup: labels must be [batch] with batch = " + std::to_string(images.size(0)));
  }
  if (!at::isFloatingType(images.scalar_type())) throw UsageError("mixup: images must be floating point");
  const auto& c = config_;

  // timm's _params_per_batch, same order of draws.
  MixupDraw draw;
  if (enabled() && uniform01(rng) < c.prob) {
    double lam;
    if (c.mixup_alpha > 0 && c.cutmix_alpha > 0) {
      draw.cutmix = uniform01(rng) < c.switch_prob;
      lam = draw.cutmix ? sample_beta(rng, c.cutmix_alpha, c.cutmix_alpha) : sample_beta(rng, c.mixup_alpha, c.mixup_alpha);
    } else if (c.mixup_alpha > 0) {
      lam = sample_beta(rng, c.mixup_alpha, c.mixup_alpha);
    } else {
      draw.cutmix = true;
      lam = sample_beta(rng, c.cutmix_alpha, c.cutmix_alpha);
    }
    draw.lambda = lam;
    draw.mixed = lam != 1.0;
  }

  at::Tensor out = images;
  if (draw.mixed && draw.cutmix) {
    const int64_t h = images.size(-2), w = images.size(-1);
    if (c.cutmix_minmax) {  // timm's rand_bbox_minmax
      const auto [lo, hi] = *c.cutmix_minmax;
      const int64_t cut_h = uniform_int(rng, static_cast<int64_t>(h * lo), static_cast<int64_t>(h * hi));
      const int64_t cut_w = uniform_int(rng, static_cast<int64_t>(w * lo), static_cast<int64_t>(w * hi));
      draw.y0 = uniform_int(rng, 0, h - cut_h);
      draw.x0 = uniform_int(rng, 0, w - cut_w);
      draw.y1 = draw.y0 + cut_h;
      draw.x1 = draw.x0 + cut_w;
    } else {  // timm's rand_bbox (margin 0)
      const double ratio = std::sqrt(1.0 - draw.lambda);
      const int64_t cut_h = static_cast<int64_t>(static_cast<double>(h) * ratio);
      const int64_t cut_w = static_cast<int64_t>(static_cast<double>(w) * ratio);
      const int64_t cy = uniform_int(rng, 0, h);
      const int64_t cx = uniform_int(rng, 0, w);
      draw.y0 = std::clamp<int64_t>(cy - cut_h / 2, 0, h);
      draw.y1 = std::clamp<int64_t>(cy + cut_h / 2, 0, h);
      draw.x0 = std::clamp<int64_t>(cx - cut_w / 2, 0, w);
      draw.x1 = std::clamp<int64_t>(cx + cut_w / 2, 0, w);
    }
    if (c.correct_lam || c.cutmix_minmax) {
      const double area = static_cast<double>((draw.y1 - draw.y0) * (draw.x1 - draw.x0));
      draw.lambda = 1.0 - area / static_cast<double>(h * w);
    }
    out = images.clone();
    if (draw.y1 > draw.y0 && draw.x1 > draw.x0) {
      const int64_t dh = images.dim() - 2, dw = images.dim() - 1;
      out.narrow(dh, draw.y0, draw.y1 - draw.y0)
          .narrow(dw, draw.x0, draw.x1 - draw.x0)
          .copy_(images.flip(0).narrow(dh, draw.y0, draw.y1 - draw.y0).narrow(dw, draw.x0, draw.x1 - draw.x0));
    }
  } else if (draw.mixed) {
    out = images * draw.lambda + images.flip(0) * (1.0 - draw.lambda);
  }
  last_ = draw;
  return {out, mixup_target(labels, c.num_classes, draw.lambda, c.label_smoothing)};
}

}  // namespace sparsevit::train
