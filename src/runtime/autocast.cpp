#include "runtime/autocast.h"

#include <ATen/autocast_mode.h>
#include <c10/core/ScalarType.h>
#include <torch/version.h>

namespace sparsevit::runtime {

// LibTorch 2.4 moved the per-device setters to set_autocast_enabled(device_type, ...).
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
#define SPARSEVIT_AUTOCAST_DEVICE_API 1
#endif

AutocastGuard::AutocastGuard(bool enabled) : enabled_(enabled) {
  if (!enabled_) return;
#ifdef SPARSEVIT_AUTOCAST_DEVICE_API
  previous_ = at::autocast::is_autocast_enabled(at::kCPU);
  at::autocast::set_autocast_dtype(at::kCPU, at::kBFloat16);
  at::autocast::set_autocast_enabled(at::kCPU, true);
#else
  previous_ = at::autocast::is_cpu_enabled();
  at::autocast::set_autocast_cpu_dtype(at::kBFloat16);
  at::autocast::set_cpu_enabled(true);
#endif
  at::autocast::increment_nesting();
}

AutocastGuard::~AutocastGuard() {
  if (!enabled_) return;
  // Leaving the outermost region drops the bfloat16 copies of the weights autocast cached.
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
#ifdef SPARSEVIT_AUTOCAST_DEVICE_API
  at::autocast::set_autocast_enabled(at::kCPU, previous_);
#else
  at::autocast::set_cpu_enabled(previous_);
#endif
}

}  // namespace sparsevit::runtime
