#include "ops/masked_attention_reference.h"

#include <ATen/ATen.h>

#include <limits>

namespace sparsevit::ops {

at::Tensor csr_to_dense_mask(const at::Tensor& row_ptr, const at::Tensor& col_idx, int64_t num_tokens) {
  TORCH_CHECK(row_ptr.dim() == 2 && row_ptr.size(1) == num_tokens + 1, "csr_to_dense_mask: row_ptr must be [H, N+1]",
              " with N = ", num_tokens, ", got ", row_ptr.sizes());
  TORCH_CHECK(col_idx.dim() == 2 && col_idx.size(0) == row_ptr.size(0), "csr_to_dense_mask: col_idx must be [H, nnz]",
              " with H = ", row_ptr.size(0), ", got ", col_idx.sizes());
  const int64_t H = row_ptr.size(0), N = num_tokens, nnz = col_idx.size(1);
  const at::Tensor rp = row_ptr.to(at::kCPU, at::kLong).contiguous();
  const at::Tensor ci = col_idx.to(at::kCPU, at::kLong).contiguous();
  at::Tensor mask = at::zeros({H, N, N}, at::TensorOptions().dtype(at::kBool));
  const int64_t* r = rp.data_ptr<int64_t>();
  const int64_t* c = ci.data_ptr<int64_t>();
  bool* m = mask.data_ptr<bool>();
  for (int64_t h = 0; h < H; ++h) {
    for (int64_t j = 0; j < N; ++j) {
      const int64_t a = r[h * (N + 1) + j], b = r[h * (N + 1) + j + 1];
      TORCH_CHECK(a >= 0 && b >= a && b <= nnz, "csr_to_dense_mask: bad row_ptr at head ", h, " row ", j);
      for (int64_t e = a; e < b; ++e) {
        const int64_t key = c[h * nnz + e];
        TORCH_CHECK(key >= 0 && key < N, "csr_to_dense_mask: col_idx[", h, ", ", e, "] = ", key, " out of range");
        m[(h * N + j) * N + key] = true;
      }
    }
  }
  return mask.to(row_ptr.device());
}

at::Tensor masked_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& mask,
                            double scale) {
  const at::Tensor allowed = mask.to(at::kBool);
  at::Tensor scores = at::matmul(q, k.transpose(-2, -1)) * scale;
  scores = scores.masked_fill(allowed.logical_not(), -std::numeric_limits<double>::infinity());
  // A row without keys would be softmax over only -inf (NaN); give it finite logits, zero it below.
  const at::Tensor empty_row = allowed.logical_not().all(-1, /*keepdim=*/true);
  scores = scores.masked_fill(empty_row, 0.0);
  const at::Tensor probs = at::softmax(scores, -1).masked_fill(empty_row, 0.0);
  return at::matmul(probs, v);
}

at::Tensor masked_attention_reference(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                      const at::Tensor& row_ptr, const at::Tensor& col_idx, double scale) {
  TORCH_CHECK(q.dim() == 4, "masked_attention_reference: q must be [B, H, N, D], got ", q.sizes());
  return masked_attention(q, k, v, csr_to_dense_mask(row_ptr, col_idx, q.size(2)).to(q.device()), scale);
}

at::Tensor dense_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double scale) {
  return at::matmul(at::softmax(at::matmul(q, k.transpose(-2, -1)) * scale, -1), v);
}

}  // namespace sparsevit::ops
