// What a kernel moves between global memory and the SMs per call, as the host emulation counts it
// (docs/gpu.md, "Traffic, counted by the emulation"): 32-byte sectors read (a warp's load
// instruction counts each sector its lanes touch once; reads served from the CTA's shared memory
// count nothing), bytes copied into shared memory, bytes written.
#pragma once

#include <cstdint>

namespace sparsevit::ops::cuda {

struct MemoryTraffic {
  int64_t sectors_read = 0;
  int64_t bytes_staged = 0;
  int64_t bytes_written = 0;

  int64_t bytes_read() const { return 32 * sectors_read; }
  int64_t bytes_moved() const { return bytes_read() + bytes_written; }
  MemoryTraffic& operator+=(const MemoryTraffic& o) {
    sectors_read += o.sectors_read;
    bytes_staged += o.bytes_staged;
    bytes_written += o.bytes_written;
    return *this;
  }
};

}  // namespace sparsevit::ops::cuda
