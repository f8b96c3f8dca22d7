// Launchers of the CUDA kernels (sparse_attention_kernels.cu), torch-free: the glue
// (sparse_attention_cuda.cpp) fills the argument structs with device pointers and calls these on
// its current stream. Each returns the launch's cudaError_t (cudaSuccess, or the error of the
// launch itself; execution errors surface at the next synchronising call).
#pragma once

#include "ops/cuda/cuda_kernel_params.h"
#include "ops/cuda/diagonal_tile_plan.h"

// cudaStream_t without the CUDA headers (the runtime's own definition).
typedef struct CUstream_st* cudaStream_t;

namespace sparsevit::ops::cuda {

// out and lse for every row: the tiled diagonal kernels (`diagonal`: a.diag, a.partials set; only
// when tiled_launch() holds) or the per-row CSR ones.
template <typename T, typename S>
int launch_forward(const ForwardArgs<T, S>& a, bool diagonal, cudaStream_t stream);

// The query pass (dq, and Di or P / dS per edge) then, on the same stream, the key pass (dk, dv),
// then for the tiled kernels the merge of the global tokens' partials (a.workspace); the CSR
// kernels use a.edge_p / a.edge_ds and the transposed CSR.
template <typename T, typename S>
int launch_backward(const BackwardArgs<T, S>& a, bool diagonal, cudaStream_t stream);

// The instantiations the library holds: fp32, bf16 storage with fp32 compute, fp64.
extern template int launch_forward(const ForwardArgs<float, float>&, bool, cudaStream_t);
extern template int launch_forward(const ForwardArgs<float, BFloat16Bits>&, bool, cudaStream_t);
extern template int launch_forward(const ForwardArgs<double, double>&, bool, cudaStream_t);
extern template int launch_backward(const BackwardArgs<float, float>&, bool, cudaStream_t);
extern template int launch_backward(const BackwardArgs<float, BFloat16Bits>&, bool, cudaStream_t);
extern template int launch_backward(const BackwardArgs<double, double>&, bool, cudaStream_t);

}  // namespace sparsevit::ops::cuda
