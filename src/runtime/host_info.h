// What machine a run ran on, for the records results keep (a sweep run's summary.json): runs
// repeat to the last digit only on the same CPU model at the same thread count.
#pragma once

#include <cstdint>
#include <istream>
#include <string>

namespace sparsevit::runtime {

struct HostInfo {
  std::string cpu;    // /proc/cpuinfo's first "model name" ("unknown" where there is none)
  int64_t cores = 0;  // logical cores the process may use (std::thread::hardware_concurrency)
};

// The first "model name" of a /proc/cpuinfo listing, trimmed; "unknown" when it has none
// (e.g. aarch64 kernels list no model name).
std::string cpu_model_name(std::istream& cpuinfo);

HostInfo describe_host();

// The current UTC time in a strftime `format` (by default "YYYY-MM-DD HH:MM UTC").
std::string utc_now(const char* format = "%Y-%m-%d %H:%M UTC");

}  // namespace sparsevit::runtime
