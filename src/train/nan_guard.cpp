#include "train/nan_guard.h"

#include <cmath>
#include <string>

#include "util/errors.h"

namespace sparsevit::train {

void check_finite_loss(double loss, int64_t epoch, int64_t step) {
  if (std::isfinite(loss)) return;
  const std::string what = std::isnan(loss) ? "NaN" : (loss > 0 ? "inf" : "-inf");
  throw RuntimeError("loss is " + what + " at epoch " + std::to_string(epoch) + " step " + std::to_string(step) +
                     " \u2014 lower the learning rate or enable --clip_grad");
}

}  // namespace sparsevit::train
