// Plain-pointer arguments of the CUDA kernels (and of their host emulation): the same contracts as
// the CPU kernels' ForwardParams / BackwardParams (ops/cpu/sparse_attention_cpu_kernels.h), with
// device pointers. No LibTorch and no CUDA header here: the torch glue, the kernels and the
// emulation all include it.
//
// Per-token tensors are logically [B, H, N, D] with element (b, h, j, d) at
// data[b*stride_b + h*stride_h + j*stride_n + d] (only D contiguous: packed qkv [B, N, 3, H, D] is
// read in place). lse is contiguous [B*H, N]; the per-edge buffers [B*H, nnz_stride]; the slot
// buffers of the diagonal kernels [B*H, slot_stride] with entry (slot s, query j) at s*N + j.
#pragma once

#include <cstdint>

#include "ops/cuda/attention_tile_math.h"

namespace sparsevit::ops::cuda {

template <typename S>
struct TokenView {
  S* data = nullptr;
  int64_t stride_b = 0, stride_h = 0, stride_n = 0;
  // Row j of batch-head bh = b*heads + h.
  SV_HD S* row(int64_t bh, int64_t heads, int64_t j) const {
    return data + (bh / heads) * stride_b + (bh % heads) * stride_h + j * stride_n;
  }
  bool pairs_aligned() const { return pair_aligned(data, stride_b, stride_h, stride_n); }
};

// Head h's pattern is {(j, k): k - j in deltas_h} U rows and columns of its global tokens G_h
// (ops::DiagonalPlanTensors, detected and verified by the op; see cpu::DiagonalPlan).
struct DiagonalPlanView {
  const int32_t* delta_ptr = nullptr;   // [H+1]
  const int32_t* deltas = nullptr;      // head h: deltas[delta_ptr[h] .. delta_ptr[h+1]], ascending
  const int32_t* global_ptr = nullptr;  // [H+1]
  const int32_t* globals = nullptr;     // head h: globals[global_ptr[h] ..], ascending
  const uint8_t* is_global = nullptr;   // [H, N]
  const int32_t* global_pos = nullptr;  // (global_ptr[h] + i) * N + k: CSR position of key k in global row i
};

// What both passes share: the geometry, the pattern and the scale.
template <typename T>
struct PatternArgs {
  const int32_t* row_ptr = nullptr;  // [H, N+1]
  const int32_t* col_idx = nullptr;  // [H, nnz_stride]
  DiagonalPlanView diag;             // the *diagonal launches only
  int64_t batch = 0, heads = 0, tokens = 0, dim = 0, nnz_stride = 0;
  T scale = 1;
  // Every per-token tensor's rows start two-element aligned (pair_aligned): pair loads and stores.
  bool pair_loads = false;
  SV_HD int64_t rows() const { return batch * heads * tokens; }
};

// T: compute type (float for float and bfloat16 storage, double for double); S: storage type.
template <typename T, typename S>
struct ForwardArgs : PatternArgs<T> {
  TokenView<const S> q, k, v;
  TokenView<S> out;
  T* lse = nullptr;  // [B*H, N]; -inf for rows without keys
  // The tiled diagonal kernels: per (batch, head) the per-tile partials of the global rows,
  // forward_partials_per_head (diagonal_tile_plan.h) elements at partials + bh * partial_stride.
  T* partials = nullptr;
  int64_t partial_stride = 0;
};

template <typename T, typename S>
struct BackwardArgs : PatternArgs<T> {
  TokenView<const S> q, k, v, out, grad_out;
  const T* lse = nullptr;  // [B*H, N]
  TokenView<S> grad_q, grad_k, grad_v;
  // P and dS per CSR edge [B*H, nnz_stride] (the general kernels; the diagonal ones: global rows).
  T* edge_p = nullptr;
  T* edge_ds = nullptr;
  // The tiled diagonal kernels: per (batch, head) Di = dO.O per query, then the per-tile partials
  // of the global rows and columns, backward_workspace_per_head (diagonal_tile_plan.h) elements at
  // workspace + bh * workspace_stride.
  T* workspace = nullptr;
  int64_t workspace_stride = 0;
  // The per-row diagonal kernels (the emulation's row design only): P and dS per (slot, query)
  // [B*H, slot_stride], slot s = the head's s-th delta, then its global columns; slot_stride >=
  // max_slots * N.
  T* slot_p = nullptr;
  T* slot_ds = nullptr;
  int64_t slot_stride = 0;
  // Transposed CSR per head: key k's queries t_query[h*nnz_stride + t_row_ptr[h*(N+1)+k] ...] in
  // increasing order, t_edge the edge's position in the row-major CSR.
  const int32_t* t_row_ptr = nullptr;
  const int32_t* t_query = nullptr;
  const int32_t* t_edge = nullptr;
};

}  // namespace sparsevit::ops::cuda
