// Host emulation of the CUDA kernels (plain C++, no CUDA, no LibTorch). Diagonal patterns with
// D = 64 or 128 (tiled_launch) run the tiled kernels of diagonal_tiles.h, CTA by CTA (EmulatedCta: groups and lanes in loops, shared
// memory a host buffer, phases between barriers in order); other patterns and head sizes run the
// per-row CSR kernels of warp_rows.h, warp by warp, as the device does. Both use the same __host__ __device__ code, index math and
// reduction order as the GPU; the device differs only in exp/log (CUDA's expf/logf vs the host's).
// CI runs it against a float64 reference (tests/ops_cuda); the kernels themselves are only compiled.
//
// Each call returns the global-memory traffic of the launches it emulated (memory_traffic.h):
// counted by the emulated CTAs for the tiled kernels, and modelled from the rows' key walks for the
// per-row kernels (one warp per row, each row's K/V (or q/dO) rows loaded whole, P / dS read one
// sector each). KernelDesign::kRows runs the per-row design of issue 34 on a diagonal pattern too
// (the diagonal row kernels, kept here for comparison; the GPU build no longer has them).
#pragma once

#include "ops/cuda/cuda_kernel_params.h"
#include "ops/cuda/memory_traffic.h"

namespace sparsevit::ops::cuda {

enum class KernelDesign { kTiles, kRows };

// As launch_forward: out and lse for every row (a.partials sized for the tiled launch).
template <typename T, typename S>
MemoryTraffic emulate_forward(const ForwardArgs<T, S>& a, bool diagonal, KernelDesign design = KernelDesign::kTiles);

// As launch_backward: the query pass then the key pass (a.workspace for the tiled launch; the
// edge / slot buffers for the row kernels).
template <typename T, typename S>
MemoryTraffic emulate_backward(const BackwardArgs<T, S>& a, bool diagonal, KernelDesign design = KernelDesign::kTiles);

// The traffic alone: the same CTAs and key walks, nothing read, computed or written (the tensors'
// pointers are only addresses, so they may point nowhere); fast enough for N = 32768.
template <typename T, typename S>
MemoryTraffic count_forward_traffic(const ForwardArgs<T, S>& a, bool diagonal, KernelDesign design);
template <typename T, typename S>
MemoryTraffic count_backward_traffic(const BackwardArgs<T, S>& a, bool diagonal, KernelDesign design);

#define SPARSEVIT_EMULATION_TYPES(X) \
  X(float, float)                    \
  X(float, BFloat16Bits)             \
  X(double, double)
#define SPARSEVIT_EMULATION_EXTERN(T, S)                                                               \
  extern template MemoryTraffic emulate_forward(const ForwardArgs<T, S>&, bool, KernelDesign);         \
  extern template MemoryTraffic emulate_backward(const BackwardArgs<T, S>&, bool, KernelDesign);       \
  extern template MemoryTraffic count_forward_traffic(const ForwardArgs<T, S>&, bool, KernelDesign);   \
  extern template MemoryTraffic count_backward_traffic(const BackwardArgs<T, S>&, bool, KernelDesign);
SPARSEVIT_EMULATION_TYPES(SPARSEVIT_EMULATION_EXTERN)
#undef SPARSEVIT_EMULATION_EXTERN

}  // namespace sparsevit::ops::cuda
