#include "runtime/cpu_threads.h"

#include <ATen/Context.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <thread>

namespace sparsevit::runtime {

int64_t resolve_cpu_threads(int64_t threads) {
  return threads > 0 ? threads : std::max<int64_t>(1, std::thread::hardware_concurrency());
}

int64_t configure_cpu_threads(int64_t threads) {
  threads = resolve_cpu_threads(threads);
  at::set_num_threads(static_cast<int>(threads));
  at::globalContext().setFlushDenormal(true);
  // One chunk per pool thread: at::parallel_for hands each thread one contiguous range.
  at::parallel_for(0, threads, 1, [](int64_t, int64_t) { at::globalContext().setFlushDenormal(true); });
  return threads;
}

}  // namespace sparsevit::runtime
