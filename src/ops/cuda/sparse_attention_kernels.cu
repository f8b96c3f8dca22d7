// The CUDA kernels of the sparse attention operator: one warp per row (kWarpsPerBlock warps per
// block, row = block * kWarpsPerBlock + warp), the row code of warp_rows.h run by a DeviceWarp
// (one lane per thread, the xor butterfly as __shfl_xor_sync). Six kernels per type: forward,
// backward query pass and backward key pass, each general (CSR) and diagonal. The host emulation
// (host_emulation.cpp) runs the same row code over the same grid.
#include <cuda_runtime.h>

#include "ops/cuda/sparse_attention_cuda_kernels.h"
#include "ops/cuda/warp_rows.h"

namespace sparsevit::ops::cuda {
namespace {

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
__global__ void __launch_bounds__(kThreadsPerBlock) forward_diagonal_kernel(const ForwardArgs<T, S> a) {
  int64_t row;
  DeviceWarp w;
  if (warp_row_of_thread(a.rows(), row, w)) forward_diagonal_warp(w, a, row);
}
template <typename T, typename S>
__global__ void __launch_bounds__(kThreadsPerBlock) backward_query_csr_kernel(const BackwardArgs<T, S> a) {
  int64_t row;
  DeviceWarp w;
  if (warp_row_of_thread(a.rows(), row, w)) backward_query_csr_warp(w, a, row);
}
template <typename T, typename S>
__global__ void __launch_bounds__(kThreadsPerBlock) backward_query_diagonal_kernel(const BackwardArgs<T, S> a) {
  int64_t row;
  DeviceWarp w;
  if (warp_row_of_thread(a.rows(), row, w)) backward_query_diagonal_warp(w, a, row);
}
template <typename T, typename S>
__global__ void __launch_bounds__(kThreadsPerBlock) backward_key_csr_kernel(const BackwardArgs<T, S> a) {
  int64_t row;
  DeviceWarp w;
  if (warp_row_of_thread(a.rows(), row, w)) backward_key_csr_warp(w, a, row);
}
template <typename T, typename S>
__global__ void __launch_bounds__(kThreadsPerBlock) backward_key_diagonal_kernel(const BackwardArgs<T, S> a) {
  int64_t row;
  DeviceWarp w;
  if (warp_row_of_thread(a.rows(), row, w)) backward_key_diagonal_warp(w, a, row);
}

// Blocks for `rows` rows; 0 rows launch nothing. The grid's x dimension holds 2^31 - 1 blocks
// (8.6e9 rows), far beyond B * H * N here.
dim3 grid_for(int64_t rows) { return dim3(static_cast<unsigned>(blocks_for_rows(rows))); }

}  // namespace

template <typename T, typename S>
int launch_forward(const ForwardArgs<T, S>& a, bool diagonal, cudaStream_t stream) {
  const int64_t rows = a.rows();
  if (rows == 0) return cudaSuccess;
  if (diagonal) {
    forward_diagonal_kernel<T, S><<<grid_for(rows), kThreadsPerBlock, 0, stream>>>(a);
  } else {
    forward_csr_kernel<T, S><<<grid_for(rows), kThreadsPerBlock, 0, stream>>>(a);
  }
  return cudaGetLastError();
}

template <typename T, typename S>
int launch_backward(const BackwardArgs<T, S>& a, bool diagonal, cudaStream_t stream) {
  const int64_t rows = a.rows();
  if (rows == 0) return cudaSuccess;
  if (diagonal) {
    backward_query_diagonal_kernel<T, S><<<grid_for(rows), kThreadsPerBlock, 0, stream>>>(a);
  } else {
    backward_query_csr_kernel<T, S><<<grid_for(rows), kThreadsPerBlock, 0, stream>>>(a);
  }
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  // Same stream: the key pass starts after every query row has written its P / dS.
  if (diagonal) {
    backward_key_diagonal_kernel<T, S><<<grid_for(rows), kThreadsPerBlock, 0, stream>>>(a);
  } else {
    backward_key_csr_kernel<T, S><<<grid_for(rows), kThreadsPerBlock, 0, stream>>>(a);
  }
  return cudaGetLastError();
}

template int launch_forward(const ForwardArgs<float, float>&, bool, cudaStream_t);
template int launch_forward(const ForwardArgs<float, BFloat16Bits>&, bool, cudaStream_t);
template int launch_forward(const ForwardArgs<double, double>&, bool, cudaStream_t);
template int launch_backward(const BackwardArgs<float, float>&, bool, cudaStream_t);
template int launch_backward(const BackwardArgs<float, BFloat16Bits>&, bool, cudaStream_t);
template int launch_backward(const BackwardArgs<double, double>&, bool, cudaStream_t);

}  // namespace sparsevit::ops::cuda
