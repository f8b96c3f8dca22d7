// Plain-pointer CPU kernels of the sparse attention operator (no LibTorch here).
//
// The torch glue (sparse_attention_kernel.cpp) validates the inputs, makes them contiguous,
// converts the CSR indices to int32, allocates outputs and workspaces, and drives the row
// ranges below from at::parallel_for. The kernels are compiled once per instruction set
// (default, AVX2+FMA, AVX-512) from sparse_attention_cpu_impl.h; kernel_table() picks the
// best one the running CPU supports.
//
// Layout: every per-token tensor is contiguous [B*H, N, D] (lse: [B*H, N]); a flat row index
// r in [0, B*H*N) names (bh = r / N, token j = r % N, head h = bh % H). Head h's CSR is
// row_ptr[h*(N+1) + j] .. row_ptr[h*(N+1) + j + 1] into col_idx[h*nnz_stride + ...].
//
// Every output row is written by exactly one call with a fixed summation order, so the
// results do not depend on how the rows are split between threads (bit-identical reruns).
#pragma once

#include <cstdint>

namespace sparsevit::ops::cpu {

template <typename T>
struct ForwardParams {
  const T* q = nullptr;
  const T* k = nullptr;
  const T* v = nullptr;
  T* out = nullptr;  // [B*H, N, D]
  T* lse = nullptr;  // [B*H, N]; -inf for rows without keys
  const int32_t* row_ptr = nullptr;  // [H, N+1]
  const int32_t* col_idx = nullptr;  // [H, nnz_stride]
  int64_t heads = 0, tokens = 0, dim = 0, nnz_stride = 0;
  T scale = 1;
};

template <typename T>
struct BackwardParams {
  const T* q = nullptr;
  const T* k = nullptr;
  const T* v = nullptr;
  const T* out = nullptr;
  const T* grad_out = nullptr;
  const T* lse = nullptr;
  T* grad_q = nullptr;
  T* grad_k = nullptr;
  T* grad_v = nullptr;
  // Per-edge workspaces [B*H, nnz_stride]: probability P and dS = P * (dP - rowsum(dO*O)).
  T* edge_p = nullptr;
  T* edge_ds = nullptr;
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

template <typename T>
struct KernelFns {
  // Rows [begin, end): out, lse. `scores` holds at least N elements (one row's keys).
  void (*forward_rows)(const ForwardParams<T>& p, int64_t begin, int64_t end, T* scores);
  // Query-centric pass, rows [begin, end): grad_q, edge_p, edge_ds.
  void (*backward_query_rows)(const BackwardParams<T>& p, int64_t begin, int64_t end);
  // Key-centric pass, rows (keys) [begin, end): grad_k, grad_v. Needs the query pass done.
  void (*backward_key_rows)(const BackwardParams<T>& p, int64_t begin, int64_t end);
};

struct KernelTable {
  const char* isa;  // "default", "avx2", "avx512"
  KernelFns<float> f32;
  KernelFns<double> f64;
};

// One table per compiled instruction set.
const KernelTable& kernel_table_default();
const KernelTable& kernel_table_avx2();
const KernelTable& kernel_table_avx512();

// The best table for this CPU; SPARSEVIT_CPU_ISA=default|avx2|avx512 caps the choice.
const KernelTable& kernel_table();

}  // namespace sparsevit::ops::cpu
