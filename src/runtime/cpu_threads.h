// CPU execution settings for training and analysis runs.
#pragma once

#include <cstdint>

namespace sparsevit::runtime {

// Sets LibTorch's intra-op thread count (0: every core) and returns it, and makes every one of those threads flush denormal
// floats to zero (torch.set_flush_denormal sets only the calling thread's FPU mode). Small
// gradients and Adam moments decay into denormals late in training, and on x86 each denormal
// operation costs ~100 cycles: without this, epochs slow down several-fold as training goes on.
int64_t configure_cpu_threads(int64_t threads);

// The thread count a `--threads` value stands for: itself, or every core for 0 (at least 1).
int64_t resolve_cpu_threads(int64_t threads);

}  // namespace sparsevit::runtime
