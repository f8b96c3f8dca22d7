#include "train/cpu_threads.h"

#include <ATen/Context.h>
#include <ATen/Parallel.h>

namespace sparsevit::train {

void configure_cpu_threads(int64_t threads) {
  at::set_num_threads(static_cast<int>(threads));
  at::globalContext().setFlushDenormal(true);
  // One chunk per pool thread: at::parallel_for hands each thread one contiguous range.
  at::parallel_for(0, threads, 1, [](int64_t, int64_t) { at::globalContext().setFlushDenormal(true); });
}

}  // namespace sparsevit::train
