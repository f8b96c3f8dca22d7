#include "train/process_context.h"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <torch/utils.h>

#include <algorithm>
#include <iostream>
#include <thread>

#include "runtime/cpu_threads.h"
#include "runtime/malloc_cache.h"

namespace sparsevit::train {

ProcessContext::ProcessContext(const ProcessOptions& o) : launch_(dist::launch_info_from_environment()) {
  if (launch_.distributed()) group_ = dist::ProcessGroup::create(launch_, {o.dist_backend, o.dist_url, o.dist_timeout});
  saved_log_level_ = static_cast<int>(spdlog::get_level());
  if (!main_rank()) spdlog::set_level(spdlog::level::warn);  // rank 0 logs; the others only warn
  if (group_) {
    spdlog::info("distributed: {} processes ({} backend, rendezvous {}, launched by {})", world_size(), o.dist_backend,
                 o.dist_url == "env://" ? fmt::format("tcp://{}:{}", launch_.master_addr, launch_.master_port)
                                        : o.dist_url,
                 launch_.launcher);
  }
  // Every core, shared among the processes on this machine.
  const int64_t per_machine = group_ ? std::max<int64_t>(1, launch_.local_world_size) : 1;
  threads_ = o.threads > 0
                 ? o.threads
                 : std::max<int64_t>(1, static_cast<int64_t>(std::thread::hardware_concurrency()) / per_machine);
  runtime::configure_cpu_threads(threads_);
  // Training steps allocate the same large activations every step: keep them in the process.
  runtime::enable_malloc_cache();
  torch::manual_seed(static_cast<uint64_t>(o.seed));
}

ProcessContext::~ProcessContext() { spdlog::set_level(static_cast<spdlog::level::level_enum>(saved_log_level_)); }

std::ostream& ProcessContext::out() { return main_rank() ? std::cout : null_stream_; }

void ProcessContext::reseed_per_rank(int64_t seed, int64_t salt) {
  if (!group_) return;
  if (salt < 0) {
    torch::manual_seed(static_cast<uint64_t>(seed + rank()));
  } else {
    torch::manual_seed(static_cast<uint64_t>(seed + rank()) * 0x9E3779B97F4A7C15ULL + static_cast<uint64_t>(salt));
  }
}

}  // namespace sparsevit::train
