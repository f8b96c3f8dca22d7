// Live and peak bytes of every CPU tensor allocation, by wrapping LibTorch's CPU allocator.
//
//   CpuMemoryTracker::install();           // once; later CPU tensors are counted
//   CpuMemoryTracker::reset_peak();        // peak := current
//   ... run something ...
//   int64_t extra = CpuMemoryTracker::peak_bytes() - baseline;
//
// Used by `sparsevit bench` to report the peak extra memory of dense, masked and sparse attention
// measured the same way (everything ATen allocates on the CPU: outputs, temporaries, autograd
// buffers, the operator's workspaces). The wrapper forwards to the allocator it replaced and only
// adds two atomic updates per allocation; tensors allocated before install() are not counted.
#pragma once

#include <cstdint>
#include <functional>

namespace sparsevit::benchmarks {

class CpuMemoryTracker {
 public:
  static void install();
  static bool installed();
  static int64_t current_bytes();
  static int64_t peak_bytes();
  static void reset_peak();
};

// Peak bytes allocated above what was live while `fn` runs once (drop its results inside fn).
int64_t measure_peak_extra(const std::function<void()>& fn);

}  // namespace sparsevit::benchmarks
