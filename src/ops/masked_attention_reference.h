// Dense masked attention from plain ATen ops: what reference implementations of sparse patterns
// do (N x N scores, -inf outside the mask, softmax, matmul). It computes and stores every pair, so
// it costs dense time and O(B*H*N^2) memory; it exists to check the sparse operator (tests, in
// float64), as the `masked` column of the benchmarks, and as the model's `kernel: masked` path.
// Differentiable through ATen's autograd. Rows without keys give 0 and zero gradients, never NaN.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace sparsevit::ops {

// The boolean [H, N, N] mask of a CSR pattern (row_ptr [H, N+1], col_idx [H, nnz_max]).
at::Tensor csr_to_dense_mask(const at::Tensor& row_ptr, const at::Tensor& col_idx, int64_t num_tokens);

// q, k, v [B, H, N, D]; mask bool [H, N, N] (or broadcastable to [B, H, N, N]).
at::Tensor masked_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& mask,
                            double scale);

// The reference on the operator's own inputs: masked_attention with csr_to_dense_mask.
at::Tensor masked_attention_reference(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                      const at::Tensor& row_ptr, const at::Tensor& col_idx, double scale);

// Plain softmax attention over all pairs (LibTorch matmul-softmax-matmul), for benchmarks.
at::Tensor dense_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double scale);

}  // namespace sparsevit::ops
