#include "train/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "util/errors.h"
#include "util/math_constants.h"

namespace sparsevit::train {

void validate(const LrScheduleConfig& c) {
  require(std::isfinite(c.lr) && c.lr >= 0, "lr must be a finite value >= 0, got " + std::to_string(c.lr));
  require(std::isfinite(c.min_lr) && c.min_lr >= 0,
          "min_lr must be a finite value >= 0, got " + std::to_string(c.min_lr));
  require(std::isfinite(c.warmup_epochs) && c.warmup_epochs >= 0,
          "warmup_epochs must be >= 0, got " + std::to_string(c.warmup_epochs));
  require(std::isfinite(c.epochs) && c.epochs > 0, "epochs must be > 0, got " + std::to_string(c.epochs));
}

double fractional_epoch(int64_t epoch, int64_t iteration, int64_t iters_per_epoch) {
  if (iters_per_epoch <= 0) throw UsageError("iterations per epoch must be > 0 (is the dataset empty?)");
  return static_cast<double>(epoch) + static_cast<double>(iteration) / static_cast<double>(iters_per_epoch);
}

double cosine_lr(const LrScheduleConfig& c, double epoch) {
  if (epoch < c.warmup_epochs) return c.lr * epoch / c.warmup_epochs;
  const double span = c.epochs - c.warmup_epochs;
  if (span <= 0) return c.min_lr;
  const double progress = std::clamp((epoch - c.warmup_epochs) / span, 0.0, 1.0);
  return c.min_lr + (c.lr - c.min_lr) * 0.5 * (1.0 + std::cos(kPi * progress));
}

double effective_lr(double blr, int64_t batch_size_total) {
  if (batch_size_total <= 0) throw UsageError("batch size must be > 0, got " + std::to_string(batch_size_total));
  return blr * static_cast<double>(batch_size_total) / 256.0;
}

}  // namespace sparsevit::train
