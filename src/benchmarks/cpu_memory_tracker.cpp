#include "benchmarks/cpu_memory_tracker.h"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <torch/version.h>

#include <atomic>
#include <mutex>
#include <unordered_map>

namespace sparsevit::benchmarks {
namespace {

std::atomic<int64_t> g_current{0};
std::atomic<int64_t> g_peak{0};
std::atomic<bool> g_installed{false};

void add_bytes(int64_t n) {
  const int64_t now = g_current.fetch_add(n) + n;
  int64_t peak = g_peak.load();
  while (now > peak && !g_peak.compare_exchange_weak(peak, now)) {
  }
}

// The wrapped allocations by data pointer. The DataPtrs handed out carry the data pointer as
// their context too (as LibTorch's own CPU allocator does), so Allocator::raw_allocate, which some
// kernels (oneDNN convolution scratch) use, works through the wrapper.
struct Record {
  c10::DataPtr inner;
  int64_t bytes;
};
std::mutex g_records_mutex;
std::unordered_map<void*, Record>& records() {
  static auto* map = new std::unordered_map<void*, Record>();  // never destroyed: frees may come late
  return *map;
}

void delete_tracked(void* data) {
  c10::DataPtr inner;  // freed after the lock is released
  {
    std::lock_guard<std::mutex> lock(g_records_mutex);
    auto it = records().find(data);
    if (it == records().end()) return;
    g_current.fetch_sub(it->second.bytes);
    inner = std::move(it->second.inner);
    records().erase(it);
  }
}

class TrackingAllocator final : public c10::Allocator {
 public:
  explicit TrackingAllocator(c10::Allocator* base) : base_(base) {}

#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 3)
  c10::DataPtr allocate(size_t n) override { return wrap(n); }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
#else
  c10::DataPtr allocate(size_t n) const override { return wrap(n); }
#endif
  c10::DeleterFnPtr raw_deleter() const override { return &delete_tracked; }

 private:
  c10::DataPtr wrap(size_t n) const {
    c10::DataPtr inner = base_->allocate(n);
    void* data = inner.get();
    if (data == nullptr) return inner;  // zero bytes: nothing to count
    const c10::Device device = inner.device();
    {
      std::lock_guard<std::mutex> lock(g_records_mutex);
      records()[data] = Record{std::move(inner), static_cast<int64_t>(n)};
    }
    add_bytes(static_cast<int64_t>(n));
    return c10::DataPtr(data, data, &delete_tracked, device);
  }

  c10::Allocator* base_;
};

}  // namespace

void CpuMemoryTracker::install() {
  static std::once_flag once;
  std::call_once(once, [] {
    static TrackingAllocator tracker(c10::GetCPUAllocator());
    c10::SetCPUAllocator(&tracker, /*priority=*/100);
    g_installed = true;
  });
}

bool CpuMemoryTracker::installed() { return g_installed.load(); }
int64_t CpuMemoryTracker::current_bytes() { return g_current.load(); }
int64_t CpuMemoryTracker::peak_bytes() { return g_peak.load(); }
void CpuMemoryTracker::reset_peak() { g_peak.store(g_current.load()); }

int64_t measure_peak_extra(const std::function<void()>& fn) {
  const int64_t baseline = CpuMemoryTracker::current_bytes();
  CpuMemoryTracker::reset_peak();
  fn();
  return CpuMemoryTracker::peak_bytes() - baseline;
}

}  // namespace sparsevit::benchmarks
