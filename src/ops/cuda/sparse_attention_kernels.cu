// The CUDA kernels of the sparse attention operator (docs/gpu.md).
// - Diagonal unions (DiagonalPlan): the tiled kernels of diagonal_tiles.h, one CTA per (batch-head,
//   tile) run by a DeviceCta (each thread its own group and lane; stage copies with cp.async on
//   sm_80+), specialised for D = 64 and 128; then a merge kernel per (batch-head, global token)
//   for the class-token rows and columns.
// - Other patterns, and other head sizes (the generic fallback): the per-row CSR kernels of warp_rows.h (one warp per row, kWarpsPerBlock warps
//   per block, the xor butterfly as __shfl_xor_sync).
// The host emulation (host_emulation.cpp) runs the same tile and row code over the same grids.
#include <cuda_runtime.h>

#include "ops/cuda/diagonal_tiles.h"
#include "ops/cuda/sparse_attention_cuda_kernels.h"
#include "ops/cuda/warp_rows.h"

namespace sparsevit::ops::cuda {
namespace {

// ---- the per-row CSR kernels ----------------------------------------------------------------------

struct DeviceWarp {
  int lane;
  SV_HD LaneRange lanes() const { return {lane, lane + 1}; }
  template <typename T>
  SV_HD T sum(const PerLane<T>& x) const {
#if defined(__CUDA_ARCH__)
    T v = x[lane];
#pragma unroll
    for (int level = 0; level < kButterflyLevels; ++level)
      v = butterfly_combine(v, __shfl_xor_sync(0xffffffffu, v, butterfly_offset(level)));
    return v;
#else
    return x[lane];  // host pass of nvcc: never called
#endif
  }
};

// Every warp of a block is one row; a warp past the last row returns as a whole (the shuffles
// need all 32 lanes of a working warp, and every lane of a warp takes the same branch).
__device__ __forceinline__ bool warp_row_of_thread(int64_t rows, int64_t& row, DeviceWarp& w) {
  row = warp_row(blockIdx.x, static_cast<int>(threadIdx.x) / kWarpLanes);
  w.lane = static_cast<int>(threadIdx.x) % kWarpLanes;
  return row < rows;
}

template <typename T, typename S>
__global__ void __launch_bounds__(kThreadsPerBlock) forward_csr_kernel(const ForwardArgs<T, S> a) {
  int64_t row;
  DeviceWarp w;
  if (warp_row_of_thread(a.rows(), row, w)) forward_csr_warp(w, a, row);
}
template <typename T, typename S>
__global__ void __launch_bounds__(kThreadsPerBlock) backward_query_csr_kernel(const BackwardArgs<T, S> a) {
  int64_t row;
  DeviceWarp w;
  if (warp_row_of_thread(a.rows(), row, w)) backward_query_csr_warp(w, a, row);
}
template <typename T, typename S>
__global__ void __launch_bounds__(kThreadsPerBlock) backward_key_csr_kernel(const BackwardArgs<T, S> a) {
  int64_t row;
  DeviceWarp w;
  if (warp_row_of_thread(a.rows(), row, w)) backward_key_csr_warp(w, a, row);
}

// Blocks for `rows` rows; the grid's x dimension holds 2^31 - 1 blocks.
dim3 grid_for(int64_t rows) { return dim3(static_cast<unsigned>(blocks_for_rows(rows))); }

// ---- the tiled diagonal kernels ----------------------------------------------------------------

// A CTA of kThreads threads in groups of kLanes (a group: one query or key of the tile).
template <int kLanes, int kThreads>
struct DeviceCta {
  int t;
  char* sm;
  __device__ LaneRange groups() const { return {t / kLanes, t / kLanes + 1}; }
  __device__ LaneRange lanes() const { return {t % kLanes, t % kLanes + 1}; }
  __device__ LaneRange threads() const { return {t, t + 1}; }
  __device__ int num_threads() const { return kThreads; }
  __device__ int tid(int, int) const { return t; }
  __device__ bool compute() const { return true; }
  __device__ char* smem() const { return sm; }

  // The xor butterfly over the group's lanes (a group never spans warps: kLanes divides 32).
  template <typename T>
  __device__ T group_sum(int, const LaneSlots<T>& x) const {
    T v = x[0];
    const unsigned base = static_cast<unsigned>(t % kWarpLanes) & ~static_cast<unsigned>(kLanes - 1);
    const unsigned mask = kLanes == kWarpLanes ? 0xffffffffu : ((1u << kLanes) - 1u) << base;
#pragma unroll
    for (int offset = kLanes / 2; offset >= 1; offset /= 2) v = butterfly_combine(v, __shfl_xor_sync(mask, v, offset));
    return v;
  }
  __device__ void sync() const { __syncthreads(); }

  // Stage copies: cp.async (bypassing L1 for 16-byte chunks) on sm_80+, plain copies before.
  __device__ void copy(int, void* dst, const void* src, int bytes) const {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
    if (bytes == 16) {
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src));
      return;
    }
    if (bytes == 8) {
      asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n" ::"r"(d), "l"(src));
      return;
    }
    if (bytes == 4) {
      asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(d), "l"(src));
      return;
    }
#endif
    if (bytes == 16) {
      *static_cast<uint4*>(dst) = __ldg(static_cast<const uint4*>(src));
    } else if (bytes == 8) {
      *static_cast<unsigned long long*>(dst) = __ldg(static_cast<const unsigned long long*>(src));
    } else if (bytes == 4) {
      *static_cast<unsigned*>(dst) = __ldg(static_cast<const unsigned*>(src));
    } else {
      *static_cast<unsigned short*>(dst) = __ldg(static_cast<const unsigned short*>(src));
    }
  }
  __device__ void idle(int) const {}
  __device__ void commit() const {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;\n" ::);
#endif
  }
  // Waits until at most `pending` (0 or 1) committed groups are in flight.
  __device__ void wait(int pending) const {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    if (pending == 0) {
      asm volatile("cp.async.wait_group 0;\n" ::);
    } else {
      asm volatile("cp.async.wait_group 1;\n" ::);
    }
#endif
  }
  template <typename U>
  __device__ U load(int, const U* p) const {
    return __ldg(p);
  }
  template <typename S>
  __device__ void load16(int, S* dst, const S* src) const {
    *reinterpret_cast<uint4*>(dst) = __ldg(reinterpret_cast<const uint4*>(src));
  }
  template <typename U>
  __device__ void store(int, U* p, U v) const {
    *p = v;
  }
  template <typename S>
  __device__ void store16(int, S* dst, const S* src) const {
    *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(src);
  }
};

constexpr int kMergeThreads = 128;

template <int kDim, typename T, typename S>
__global__ void __launch_bounds__(TileShape<T, kDim>::kThreads) forward_tiles_kernel(const ForwardArgs<T, S> a,
                                                                                      int64_t tiles) {
  extern __shared__ __align__(16) char smem[];
  using Shape = TileShape<T, kDim>;
  DeviceCta<Shape::kLanes, Shape::kThreads> cta{static_cast<int>(threadIdx.x), smem};
  forward_tile<kDim>(cta, a, blockIdx.x / tiles, blockIdx.x % tiles);
}
template <int kDim, typename T, typename S>
__global__ void __launch_bounds__(TileShape<T, kDim>::kThreads) query_tiles_kernel(const BackwardArgs<T, S> a,
                                                                                    int64_t tiles) {
  extern __shared__ __align__(16) char smem[];
  using Shape = TileShape<T, kDim>;
  DeviceCta<Shape::kLanes, Shape::kThreads> cta{static_cast<int>(threadIdx.x), smem};
  backward_query_tile<kDim>(cta, a, blockIdx.x / tiles, blockIdx.x % tiles);
}
template <int kDim, typename T, typename S>
__global__ void __launch_bounds__(TileShape<T, kDim>::kThreads) key_tiles_kernel(const BackwardArgs<T, S> a,
                                                                                  int64_t tiles) {
  extern __shared__ __align__(16) char smem[];
  using Shape = TileShape<T, kDim>;
  DeviceCta<Shape::kLanes, Shape::kThreads> cta{static_cast<int>(threadIdx.x), smem};
  backward_key_tile<kDim>(cta, a, blockIdx.x / tiles, blockIdx.x % tiles);
}
template <typename T, typename S>
__global__ void __launch_bounds__(kMergeThreads) forward_merge_kernel(const ForwardArgs<T, S> a, int64_t groups) {
  DeviceCta<1, kMergeThreads> cta{static_cast<int>(threadIdx.x), nullptr};
  forward_merge(cta, a, blockIdx.x / kMaxTileGlobals, blockIdx.x % kMaxTileGlobals, groups);
}
template <typename T, typename S>
__global__ void __launch_bounds__(kMergeThreads) backward_merge_kernel(const BackwardArgs<T, S> a, int64_t groups) {
  DeviceCta<1, kMergeThreads> cta{static_cast<int>(threadIdx.x), nullptr};
  backward_merge(cta, a, blockIdx.x / kMaxTileGlobals, blockIdx.x % kMaxTileGlobals, groups);
}

// Launches kernel over B*H*tiles CTAs with `smem` bytes of dynamic shared memory (above the 48 KB
// default, so the attribute is set first).
template <typename Kernel, typename A>
cudaError_t launch_tiles(Kernel kernel, const A& a, int64_t tiles, int threads, int64_t smem, cudaStream_t stream) {
  cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
  if (e != cudaSuccess) return e;
  kernel<<<dim3(static_cast<unsigned>(a.batch * a.heads * tiles)), threads, static_cast<size_t>(smem), stream>>>(a, tiles);
  return cudaGetLastError();
}

template <int kDim, typename T, typename S>
cudaError_t forward_tiles(const ForwardArgs<T, S>& a, cudaStream_t stream) {
  using Shape = TileShape<T, kDim>;
  const int64_t tiles = tiles_for(a.tokens, Shape::kGroups * Shape::kForwardQueries);
  cudaError_t e = launch_tiles(forward_tiles_kernel<kDim, T, S>, a, tiles, Shape::kThreads,
                               forward_smem<T, S, kDim>().total(), stream);
  if (e != cudaSuccess) return e;
  forward_merge_kernel<T, S><<<dim3(static_cast<unsigned>(a.batch * a.heads * kMaxTileGlobals)), kMergeThreads, 0,
                               stream>>>(a, Shape::kGroups * Shape::kForwardQueries);
  return cudaGetLastError();
}

template <int kDim, typename T, typename S>
cudaError_t backward_tiles(const BackwardArgs<T, S>& a, cudaStream_t stream) {
  using Shape = TileShape<T, kDim>;
  const int64_t tiles = tiles_for(a.tokens, Shape::kGroups * Shape::kBackwardRows);
  // Same stream: the key pass reads the Di the query pass wrote; the merge, both passes' partials.
  cudaError_t e = launch_tiles(query_tiles_kernel<kDim, T, S>, a, tiles, Shape::kThreads,
                               query_pass_smem<T, S, kDim>().total(), stream);
  if (e != cudaSuccess) return e;
  e = launch_tiles(key_tiles_kernel<kDim, T, S>, a, tiles, Shape::kThreads, key_pass_smem<T, S, kDim>().total(),
                   stream);
  if (e != cudaSuccess) return e;
  backward_merge_kernel<T, S><<<dim3(static_cast<unsigned>(a.batch * a.heads * kMaxTileGlobals)), kMergeThreads, 0,
                                stream>>>(a, Shape::kGroups * Shape::kBackwardRows);
  return cudaGetLastError();
}

}  // namespace

template <typename T, typename S>
int launch_forward(const ForwardArgs<T, S>& a, bool diagonal, cudaStream_t stream) {
  if (a.rows() == 0) return cudaSuccess;
  if constexpr (sizeof(T) == 4) {  // tiled_launch<T>: float32 compute only
    if (diagonal) return a.dim == 64 ? forward_tiles<64>(a, stream) : forward_tiles<128>(a, stream);
  }
  forward_csr_kernel<T, S><<<grid_for(a.rows()), kThreadsPerBlock, 0, stream>>>(a);
  return cudaGetLastError();
}

template <typename T, typename S>
int launch_backward(const BackwardArgs<T, S>& a, bool diagonal, cudaStream_t stream) {
  if (a.rows() == 0) return cudaSuccess;
  if constexpr (sizeof(T) == 4) {
    if (diagonal) return a.dim == 64 ? backward_tiles<64>(a, stream) : backward_tiles<128>(a, stream);
  }
  backward_query_csr_kernel<T, S><<<grid_for(a.rows()), kThreadsPerBlock, 0, stream>>>(a);
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  // Same stream: the key pass starts after every query row has written its P / dS.
  backward_key_csr_kernel<T, S><<<grid_for(a.rows()), kThreadsPerBlock, 0, stream>>>(a);
  return cudaGetLastError();
}

template int launch_forward(const ForwardArgs<float, float>&, bool, cudaStream_t);
template int launch_forward(const ForwardArgs<float, BFloat16Bits>&, bool, cudaStream_t);
template int launch_forward(const ForwardArgs<double, double>&, bool, cudaStream_t);
template int launch_backward(const BackwardArgs<float, float>&, bool, cudaStream_t);
template int launch_backward(const BackwardArgs<float, BFloat16Bits>&, bool, cudaStream_t);
template int launch_backward(const BackwardArgs<double, double>&, bool, cudaStream_t);

}  // namespace sparsevit::ops::cuda
