// Host emulation of the CUDA kernels (plain C++, no CUDA, no LibTorch): the same warp_rows.h code
// the kernels run, in the same tiling (a grid of blocks of kWarpsPerBlock warps, one row per warp)
// and reduction order (the 32 lanes in a loop, the shuffle butterfly on arrays). The device differs
// only in exp/log (CUDA's expf/logf vs the host's): dot products and accumulations are explicit
// fmas in the same order, so everything else matches bit for bit. CI runs it against a float64
// reference (tests/ops_cuda); the kernels themselves are only compiled there.
#pragma once

#include "ops/cuda/cuda_kernel_params.h"

namespace sparsevit::ops::cuda {

// As launch_forward: out and lse for every row; `diagonal` runs the diagonal kernel (a.diag set).
template <typename T, typename S>
void emulate_forward(const ForwardArgs<T, S>& a, bool diagonal);

// As launch_backward: the query pass over every row, then the key pass over every row.
template <typename T, typename S>
void emulate_backward(const BackwardArgs<T, S>& a, bool diagonal);

extern template void emulate_forward(const ForwardArgs<float, float>&, bool);
extern template void emulate_forward(const ForwardArgs<float, BFloat16Bits>&, bool);
extern template void emulate_forward(const ForwardArgs<double, double>&, bool);
extern template void emulate_backward(const BackwardArgs<float, float>&, bool);
extern template void emulate_backward(const BackwardArgs<float, BFloat16Bits>&, bool);
extern template void emulate_backward(const BackwardArgs<double, double>&, bool);

}  // namespace sparsevit::ops::cuda
