// Divergence guard: a non-finite loss stops training with one clear line.
#pragma once

#include <cstdint>

namespace sparsevit::train {

// Throws RuntimeError "loss is NaN at epoch 3 step 120 — lower the learning rate or enable
// --clip_grad" (or "loss is inf ...") when `loss` is not finite; does nothing otherwise.
void check_finite_loss(double loss, int64_t epoch, int64_t step);

}  // namespace sparsevit::train
