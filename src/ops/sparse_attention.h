// C++ API of the sparse attention operator (docs/operator_contract.md).
//
//   out = sparsevit::ops::sparse_attention(q, k, v, row_ptr, col_idx, scale);
//   out = sparsevit::ops::sparse_attention(q, k, v, pattern, scale);
//
// q, k, v: [B, H, N, D]; softmax over each query row's pattern keys of scale * q.k; rows without
// keys give 0 (and zero gradients). Both overloads go through the dispatcher op
// sparsevit::sparse_attention, so autograd, InferenceMode and every backend behave the same.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace sparsevit::patterns {
class Pattern;
}

namespace sparsevit::ops {

// The dispatcher op on explicit CSR tensors (row_ptr [H, N+1], col_idx [H, nnz_max]; int32/int64).
at::Tensor sparse_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& row_ptr,
                            const at::Tensor& col_idx, double scale);

// The packed op for a fused qkv projection: qkv [B, N, 3*H*D] exactly as Linear(C, 3C) returns it
// (timm layout [B, N, 3, H, D]), H = num_heads. Returns out [B, N, H*D] (out[b, j, h*D + d]), ready
// for the output projection: the same as sparse_attention(q, k, v, ...).transpose(1, 2).reshape(B, N, H*D)
// with q, k, v the three [B, H, N, D] views, but without any permute/contiguous copy, forward or
// backward (d(qkv) comes back as one [B, N, 3*H*D] tensor).
at::Tensor sparse_attention_qkv(const at::Tensor& qkv, int64_t num_heads, const at::Tensor& row_ptr,
                                const at::Tensor& col_idx, double scale);

// A Pattern's CSR as the operator takes it: int32 CPU tensors row_ptr [H, N+1] and col_idx
// [H, max_edges] (rows zero-padded). Hold one of these next to a layer to skip all conversion.
struct PatternTensors {
  at::Tensor row_ptr;
  at::Tensor col_idx;
  int64_t num_tokens = 0;
  int64_t num_heads = 0;
  int64_t total_edges = 0;

  static PatternTensors from_pattern(const patterns::Pattern& pattern);
  // Share of the H*N*N (head, query, key) triples the operator computes.
  double density() const;
};

at::Tensor sparse_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            const PatternTensors& pattern, double scale);

at::Tensor sparse_attention_qkv(const at::Tensor& qkv, int64_t num_heads, const PatternTensors& pattern,
                                double scale);

// Converts through pattern_tensors(), then calls the op.
at::Tensor sparse_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            const patterns::Pattern& pattern, double scale);

// The cached conversion of a Pattern. The cache is keyed by the pattern's content, not its address
// (an address can be reused by a different pattern after the first is destroyed): a 64-bit hash of
// N, H and every head's CSR selects an entry, which is then compared element by element before it
// is used, so a stale or colliding entry can never be returned. Cost per call: one read of the
// pattern's CSR, no allocation on a hit. At most 64 entries, least recently used dropped first.
PatternTensors pattern_tensors(const patterns::Pattern& pattern);

// 1 / sqrt(head_dim), the usual softmax scale.
double default_scale(int64_t head_dim);

}  // namespace sparsevit::ops
