// timm's Mixup / CutMix in batch mode: one lambda per batch, every sample mixed with its mirror
// in the flipped batch (sample i with sample B-1-i), targets become smoothed soft labels.
// Randomness comes only from the caller's std::mt19937_64 through this file's own uniform,
// normal, gamma (Marsaglia–Tsang) and beta samplers, so results are the same with every
// standard library.
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <utility>

#include <ATen/core/Tensor.h>

namespace sparsevit::train {

struct MixupConfig {
  double mixup_alpha = 0.0;    // > 0 enables mixup, lambda ~ Beta(alpha, alpha)
  double cutmix_alpha = 0.0;   // > 0 enables cutmix, lambda ~ Beta(alpha, alpha)
  // Box side ratios [min, max) of the image side; when set, cutmix ignores lambda for the box
  // (timm forces cutmix_alpha = 1 and always applies the area correction).
  std::optional<std::pair<double, double>> cutmix_minmax;
  double prob = 1.0;           // probability that a batch is mixed at all
  double switch_prob = 0.5;    // with both enabled: probability of cutmix instead of mixup
  double label_smoothing = 0.1;
  int64_t num_classes = 0;
  bool correct_lam = true;     // cutmix: lambda from the clipped box area (timm default)
};

// What apply() did to the last batch (for logging and tests).
struct MixupDraw {
  bool mixed = false;
  bool cutmix = false;
  double lambda = 1.0;                  // weight of the original sample in the targets
  int64_t y0 = 0, y1 = 0, x0 = 0, x1 = 0;  // cutmix box [y0, y1) x [x0, x1)
};

class Mixup {
 public:
  // Throws UsageError on invalid values (negative alphas, probabilities outside [0, 1],
  // num_classes <= 0, smoothing outside [0, 1), minmax outside 0 < min < max <= 1).
  explicit Mixup(MixupConfig config);

  // Whether mixing is configured at all (MAE's mixup_active: mixup > 0 or cutmix > 0 or minmax).
  bool enabled() const;

  // images [B, C, H, W] (or [B, ..., H, W]: the box spans the last two dims), labels [B] integer.
  // Returns the mixed images (a new tensor when mixed, `images` itself otherwise; the input is
  // never modified) and float32 soft targets
  // [B, num_classes] whose rows sum to 1. Batches that are not mixed still get smoothed one-hot
  // targets. Odd batch sizes work: the middle sample is mixed with itself.
  std::pair<at::Tensor, at::Tensor> apply(const at::Tensor& images, const at::Tensor& labels, std::mt19937_64& rng);

  const MixupDraw& last_draw() const { return last_; }
  const MixupConfig& config() const { return config_; }

 private:
  MixupConfig config_;
  MixupDraw last_;
};

// timm's mixup_target: lam * smooth(one_hot(y)) + (1 - lam) * smooth(one_hot(flip(y))).
at::Tensor mixup_target(const at::Tensor& labels, int64_t num_classes, double lambda, double smoothing);

// Portable samplers on mt19937_64 (also used by tests).
double uniform01(std::mt19937_64& rng);                     // [0, 1), 53 random bits
int64_t uniform_int(std::mt19937_64& rng, int64_t lo, int64_t hi);  // [lo, hi), unbiased; lo if hi <= lo
double standard_normal(std::mt19937_64& rng);                // Box–Muller
double sample_gamma(std::mt19937_64& rng, double shape);     // Gamma(shape, 1), Marsaglia–Tsang
double sample_beta(std::mt19937_64& rng, double a, double b);  // X / (X + Y), X ~ Gamma(a), Y ~ Gamma(b)

}  // namespace sparsevit::train
