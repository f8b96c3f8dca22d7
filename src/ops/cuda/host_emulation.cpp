// The emulated grid: blocks of kWarpsPerBlock warps, warp w of block b owning flat row
// warp_row(b, w), exactly as the kernels' launch (sparse_attention_kernels.cu) maps them. A warp's
// 32 lanes run in a loop; sum() is the kernels' shuffle butterfly over an array.
#include "ops/cuda/host_emulation.h"

#include "ops/cuda/warp_rows.h"

namespace sparsevit::ops::cuda {
namespace {

struct EmulatedWarp {
  LaneRange lanes() const { return {0, kWarpLanes}; }
  // __shfl_xor_sync level by level: lane l takes butterfly_combine(its value, lane l ^ offset's).
  template <typename T>
  T sum(const PerLane<T>& x) const {
    T v[kWarpLanes], next[kWarpLanes];
    for (int l = 0; l < kWarpLanes; ++l) v[l] = x[l];
    for (int level = 0; level < kButterflyLevels; ++level) {
      const int offset = butterfly_offset(level);
      for (int l = 0; l < kWarpLanes; ++l) next[l] = butterfly_combine(v[l], v[l ^ offset]);
      for (int l = 0; l < kWarpLanes; ++l) v[l] = next[l];
    }
    return v[0];
  }
};

// Every warp of the grid that covers `rows`, in block order (warps are independent: no shared
// memory, no inter-warp communication, so the order of emulation does not change any value).
template <typename F>
void for_each_warp(int64_t rows, F&& warp_fn) {
  const int64_t blocks = blocks_for_rows(rows);
  for (int64_t b = 0; b < blocks; ++b)
    for (int w = 0; w < kWarpsPerBlock; ++w) {
      const int64_t row = warp_row(b, w);
      if (row < rows) warp_fn(EmulatedWarp{}, row);
    }
}

}  // namespace

template <typename T, typename S>
void emulate_forward(const ForwardArgs<T, S>& a, bool diagonal) {
  for_each_warp(a.rows(), [&](const EmulatedWarp& w, int64_t row) {
    if (diagonal) {
      forward_diagonal_warp(w, a, row);
    } else {
      forward_csr_warp(w, a, row);
    }
  });
}

template <typename T, typename S>
void emulate_backward(const BackwardArgs<T, S>& a, bool diagonal) {
  // Two launches on one stream: every query row is done before any key row starts.
  for_each_warp(a.rows(), [&](const EmulatedWarp& w, int64_t row) {
    if (diagonal) {
      backward_query_diagonal_warp(w, a, row);
    } else {
      backward_query_csr_warp(w, a, row);
    }
  });
  for_each_warp(a.rows(), [&](const EmulatedWarp& w, int64_t row) {
    if (diagonal) {
      backward_key_diagonal_warp(w, a, row);
    } else {
      backward_key_csr_warp(w, a, row);
    }
  });
}

template void emulate_forward(const ForwardArgs<float, float>&, bool);
template void emulate_forward(const ForwardArgs<float, BFloat16Bits>&, bool);
template void emulate_forward(const ForwardArgs<double, double>&, bool);
template void emulate_backward(const BackwardArgs<float, float>&, bool);
template void emulate_backward(const BackwardArgs<float, BFloat16Bits>&, bool);
template void emulate_backward(const BackwardArgs<double, double>&, bool);

}  // namespace sparsevit::ops::cuda
