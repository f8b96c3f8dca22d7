// Operator schemas of the sparsevit library (docs/operator_contract.md). Kernels register per dispatch
// key in cpu/ (and later cuda/); autograd in autograd/.
#include <torch/library.h>

TORCH_LIBRARY(sparsevit, m) {
  // Public, stable contract: q, k, v [B, H, N, D]; per-head CSR row_ptr [H, N+1], col_idx [H, nnz_max]
  // (int32 or int64); softmax over each row's listed keys of scale * q.k; rows without keys give 0.
  m.def("sparse_attention(Tensor q, Tensor k, Tensor v, Tensor row_ptr, Tensor col_idx, float scale) -> Tensor");
  // Private: forward that also returns the per-row log-sum-exp [B, H, N] (-inf for empty rows).
  m.def(
      "_sparse_attention_forward(Tensor q, Tensor k, Tensor v, Tensor row_ptr, Tensor col_idx, float scale)"
      " -> (Tensor out, Tensor lse)");
  // Private: gradients for q, k, v from the saved output and log-sum-exp (flash style).
  m.def(
      "_sparse_attention_backward(Tensor grad_out, Tensor q, Tensor k, Tensor v, Tensor out, Tensor lse,"
      " Tensor row_ptr, Tensor col_idx, float scale) -> (Tensor grad_q, Tensor grad_k, Tensor grad_v)");
  // Public: the packed form for a fused qkv projection. qkv [B, N, 3*H*D] as Linear(C, 3C) returns it
  // (viewed as [B, N, 3, H, D]: q, k, v = [:, :, 0], [:, :, 1], [:, :, 2]); returns out [B, N, H*D]
  // (out[b, j, h*D + d]). Same semantics as sparse_attention on the three views, then
  // transpose(1, 2).reshape(B, N, H*D); q, k, v are read in place, never copied.
  m.def(
      "sparse_attention_qkv(Tensor qkv, int num_heads, Tensor row_ptr, Tensor col_idx, float scale) -> Tensor");
  // Private: its forward with the log-sum-exp [B, H, N], and its backward returning d(qkv) [B, N, 3*H*D].
  m.def(
      "_sparse_attention_qkv_forward(Tensor qkv, int num_heads, Tensor row_ptr, Tensor col_idx, float scale)"
      " -> (Tensor out, Tensor lse)");
  m.def(
      "_sparse_attention_qkv_backward(Tensor grad_out, Tensor qkv, Tensor out, Tensor lse, int num_heads,"
      " Tensor row_ptr, Tensor col_idx, float scale) -> Tensor grad_qkv");
}
