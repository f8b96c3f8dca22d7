// Plain-pointer CPU kernels of the sparse attention operator (no LibTorch here).
//
// The torch glue (sparse_attention_kernel.cpp) validates the inputs, converts the CSR indices
// to int32, allocates outputs and workspaces, and drives the row
// ranges below from at::parallel_for. The kernels are compiled once per instruction set
// (default, AVX2+FMA, AVX-512) from sparse_attention_cpu_impl.h; kernel_table() picks the
// best one the running CPU supports.
//
// Layout: every per-token tensor (q, k, v, out, grad_out, grad_q, grad_k, grad_v) is a
// TokenTensor: logically [B, H, N, D], element (b, h, j, d) at
// data[b*stride_b + h*stride_h + j*stride_n + d] -- only the last dim (D) must be contiguous, so
// views such as the fused qkv projection's [B, N, 3, H, D] are read in place. lse is contiguous
// [B*H, N] and the per-edge buffers [B*H, nnz_stride]. A flat row index r in [0, B*H*N) names
// (bh = r / N, token j = r % N, head h = bh % H, batch b = bh / H). Head h's CSR is
// row_ptr[h*(N+1) + j] .. row_ptr[h*(N+1) + j + 1] into col_idx[h*nnz_stride + ...].
//
// Every output row is written by exactly one call with a fixed summation order, so the
// results do not depend on how the rows are split between threads (bit-identical reruns).
#pragma once

#include <cstdint>
#include <type_traits>

namespace sparsevit::ops::cpu {

// The raw bits of a bfloat16 (the upper 16 bits of a float32).
using BFloat16Bits = uint16_t;

// One per-token tensor: element (b, h, j, d) at data[b*stride_b + h*stride_h + j*stride_n + d].
template <typename T>
struct TokenTensor {
  T* data = nullptr;
  int64_t stride_b = 0, stride_h = 0, stride_n = 0;

  TokenTensor() = default;
  TokenTensor(T* d, int64_t sb, int64_t sh, int64_t sn) : data(d), stride_b(sb), stride_h(sh), stride_n(sn) {}
  // A writable tensor read through a const view.
  template <typename U, typename = std::enable_if_t<std::is_convertible_v<U*, T*>>>
  TokenTensor(const TokenTensor<U>& o) : data(o.data), stride_b(o.stride_b), stride_h(o.stride_h), stride_n(o.stride_n) {}
  // A contiguous [B, H, N, D] buffer.
  static TokenTensor dense(T* d, int64_t heads, int64_t tokens, int64_t dim) {
    return TokenTensor(d, heads * tokens * dim, tokens * dim, dim);
  }
  // Row 0 of batch-head bh = b*heads + h.
  inline T* head(int64_t bh, int64_t heads) const {
    return data + (bh / heads) * stride_b + (bh % heads) * stride_h;
  }
};

// Most deltas + global tokens a head may have for the structured (diagonal) kernels: one softmax
// tile of that many steps per block of rows lives on the stack.
constexpr int64_t kMaxDiagonalSlots = 64;

// A pattern whose every head h is {(j, k): k - j in deltas_h} U rows and columns of the global
// tokens G_h (ops::DiagonalPlanTensors; detected from the CSR and verified once per pattern).
struct DiagonalPlan {
  const int32_t* delta_ptr = nullptr;   // [H+1]
  const int32_t* deltas = nullptr;      // head h: deltas[delta_ptr[h] .. delta_ptr[h+1]], ascending
  const int32_t* global_ptr = nullptr;  // [H+1]
  const int32_t* globals = nullptr;     // head h: globals[global_ptr[h] ..], ascending
  const uint8_t* is_global = nullptr;   // [H, N]
  const int32_t* global_pos = nullptr;  // (global_ptr[h] + i) * N + k: CSR position of key k in global row i
};

// T: the compute type (lse, scale, workspaces); S: how the per-token tensors are stored -- T
// itself, or BFloat16Bits (raw bfloat16) with T = float.
template <typename T, typename S = T>
struct ForwardParams {
  TokenTensor<const S> q, k, v;
  TokenTensor<S> out;
  T* lse = nullptr;  // [B*H, N]; -inf for rows without keys
  DiagonalPlan diag;  // for the *_diagonal kernels only
  const int32_t* row_ptr = nullptr;  // [H, N+1]
  const int32_t* col_idx = nullptr;  // [H, nnz_stride]
  int64_t heads = 0, tokens = 0, dim = 0, nnz_stride = 0;
  T scale = 1;
};

template <typename T, typename S = T>
struct BackwardParams {
  TokenTensor<const S> q, k, v, out, grad_out;
  const T* lse = nullptr;  // [B*H, N]
  TokenTensor<S> grad_q, grad_k, grad_v;
  // Per-edge workspaces [B*H, nnz_stride]: probability P and dS = P * (dP - rowsum(dO*O)).
  T* edge_p = nullptr;
  T* edge_ds = nullptr;
  // *_diagonal kernels: the plan, and P / dS per (slot, query) [B*H, slot_stride], entry (s, j)
  // at s*N + j (slot s: the head's s-th delta, then its global columns). The per-edge buffers
  // above then serve only the global rows.
  DiagonalPlan diag;
  T* slot_p = nullptr;
  T* slot_ds = nullptr;
  int64_t slot_stride = 0;
  const int32_t* row_ptr = nullptr;  // [H, N+1]
  const int32_t* col_idx = nullptr;  // [H, nnz_stride]
  // Transposed CSR per head: key k's queries are t_query[h*nnz_stride + t_row_ptr[h*(N+1)+k] ...],
  // t_edge holds the position of that edge in the row-major CSR (to find P and dS).
  const int32_t* t_row_ptr = nullptr;
  const int32_t* t_query = nullptr;
  const int32_t* t_edge = nullptr;
  int64_t heads = 0, tokens = 0, dim = 0, nnz_stride = 0;
  T scale = 1;
};

template <typename T, typename S = T>
struct KernelFns {
  // Rows [begin, end): out, lse. `scores` holds at least N elements (one row's keys).
  void (*forward_rows)(const ForwardParams<T, S>& p, int64_t begin, int64_t end, T* scores);
  // Query-centric pass, rows [begin, end): grad_q, edge_p, edge_ds.
  void (*backward_query_rows)(const BackwardParams<T, S>& p, int64_t begin, int64_t end);
  // Key-centric pass, rows (keys) [begin, end): grad_k, grad_v. Needs the query pass done.
  void (*backward_key_rows)(const BackwardParams<T, S>& p, int64_t begin, int64_t end);
  // The structured kernels for a DiagonalPlan (same contracts; D in {16, 32, 64, 128}, other D
  // fall back to the general kernels above). The query and key passes must be both diagonal or
  // both general.
  void (*forward_rows_diagonal)(const ForwardParams<T, S>& p, int64_t begin, int64_t end, T* scores);
  void (*backward_query_rows_diagonal)(const BackwardParams<T, S>& p, int64_t begin, int64_t end);
  void (*backward_key_rows_diagonal)(const BackwardParams<T, S>& p, int64_t begin, int64_t end);
};

struct KernelTable {
  const char* isa;  // "default", "avx2", "avx512"
  KernelFns<float> f32;
  KernelFns<double> f64;
  // bfloat16 q/k/v/out/grad_out read and grad_q/k/v, out written natively (float32 arithmetic,
  // round-to-nearest-even stores); lse and workspaces float32. Fixed D only: 16, 32, 64, 128.
  KernelFns<float, BFloat16Bits> bf16;
};

// One table per compiled instruction set.
const KernelTable& kernel_table_default();
const KernelTable& kernel_table_avx2();
const KernelTable& kernel_table_avx512();

// The best table for this CPU; SPARSEVIT_CPU_ISA=default|avx2|avx512 caps the choice.
const KernelTable& kernel_table();

}  // namespace sparsevit::ops::cpu
