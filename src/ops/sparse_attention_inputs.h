// Validation of the sparse attention operator's inputs and the CSR index preparation shared by
// every backend: shape/dtype checks with messages that say what is wrong, the CSR values checked
// once per call (bounds, monotone row_ptr, no duplicate key in a row), int32 copies for the
// kernels, and the per-head transposed CSR the backward's key-centric pass walks.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace sparsevit::ops {

struct AttentionShape {
  int64_t batch = 0, heads = 0, tokens = 0, dim = 0;
  int64_t nnz_stride = 0;  // col_idx.size(1)
};

// q, k, v: [B, H, N, D], one floating dtype and device; row_ptr [H, N+1]; col_idx [H, nnz_max];
// int32 or int64. `op` names the operator in the messages.
AttentionShape check_attention_inputs(const char* op, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                      const at::Tensor& row_ptr, const at::Tensor& col_idx);

// Contiguous int32 CPU copies (or the inputs themselves when already so) after checking every
// value: 0 <= row_ptr[h,0] <= ... <= row_ptr[h,N] <= nnz_max, 0 <= col < N, no key twice in a row.
struct CsrIndices {
  at::Tensor row_ptr;  // int32 [H, N+1]
  at::Tensor col_idx;  // int32 [H, nnz_stride]
  int64_t max_row_length = 0;
};
CsrIndices prepare_csr(const char* op, const at::Tensor& row_ptr, const at::Tensor& col_idx,
                       const AttentionShape& shape);

// Per head, the keys' lists of queries in increasing query order, and for each entry the edge's
// position in the row-major CSR: t_row_ptr [H, N+1], t_query and t_edge [H, nnz_stride].
struct TransposedCsr {
  at::Tensor row_ptr;
  at::Tensor query;
  at::Tensor edge;
};
TransposedCsr transpose_csr(const CsrIndices& csr, const AttentionShape& shape);

// Bytes of `made` when it does not share storage with `source` (a copy the operator allocated).
int64_t bytes_if_copied(const at::Tensor& made, const at::Tensor& source);

}  // namespace sparsevit::ops
