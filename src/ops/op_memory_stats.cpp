#include "ops/op_memory_stats.h"

#include <mutex>

namespace sparsevit::ops {
namespace {
std::mutex& stats_mutex() {
  static std::mutex m;
  return m;
}
OpMemoryStats& stats() {
  static OpMemoryStats s;
  return s;
}
}  // namespace

void record_op_allocation(int64_t bytes) {
  std::lock_guard<std::mutex> lock(stats_mutex());
  OpMemoryStats& s = stats();
  s.bytes_allocated += bytes;
  if (bytes > s.max_call_bytes) s.max_call_bytes = bytes;
  ++s.calls;
}

void reset_op_memory_stats() {
  std::lock_guard<std::mutex> lock(stats_mutex());
  stats() = OpMemoryStats{};
}

OpMemoryStats op_memory_stats() {
  std::lock_guard<std::mutex> lock(stats_mutex());
  return stats();
}

}  // namespace sparsevit::ops
