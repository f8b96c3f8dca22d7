// Learning-rate schedule of MAE's util/lr_sched.adjust_learning_rate: linear warm-up, then a
// half-cycle cosine from lr down to min_lr, evaluated every iteration at a fractional epoch.
#pragma once

#include <cstdint>

namespace sparsevit::train {

struct LrScheduleConfig {
  double lr = 1e-3;            // peak (absolute) learning rate
  double min_lr = 1e-6;        // floor reached at the end of the cosine
  double warmup_epochs = 5;    // may be fractional; 0 disables warm-up
  double epochs = 100;         // total epochs of the run
};

// Throws UsageError for negative values or epochs <= 0.
void validate(const LrScheduleConfig& config);

// Fractional epoch of iteration `iteration` (0-based) of epoch `epoch`: epoch + it / iters.
double fractional_epoch(int64_t epoch, int64_t iteration, int64_t iters_per_epoch);

// MAE's formula at fractional epoch `epoch`:
//   epoch <  warmup: lr * epoch / warmup
//   epoch >= warmup: min_lr + (lr - min_lr) * 0.5 * (1 + cos(pi * (epoch - warmup) / (epochs - warmup)))
// The cosine progress is clamped to [0, 1] (MAE never evaluates past `epochs`); when the
// cosine phase has no length (warmup >= epochs) the value after warm-up is min_lr.
double cosine_lr(const LrScheduleConfig& config, double epoch);

// MAE / DeiT's linear scaling rule: lr = blr * total_batch_size / 256.
double effective_lr(double blr, int64_t batch_size_total);

}  // namespace sparsevit::train
