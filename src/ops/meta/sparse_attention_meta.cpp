// Meta kernels of every sparsevit operator: the outputs' shapes, dtypes and strides from the inputs'
// shapes alone (never from row_ptr's values), as SymInts, so that meta tensors, FakeTensor,
// torch.compile (dynamic shapes included) and torch.export trace the operators without running
// them. Each mirrors its CPU / CUDA kernel: contiguous outputs in the input's dtype, the
// log-sum-exp in the compute dtype (float64 for float64 inputs, else float32).
#include <ATen/ATen.h>
#include <c10/core/SymInt.h>
#include <torch/library.h>

#include <tuple>
#include <vector>

namespace sparsevit::ops {
namespace {

void check_rank(const char* op, const char* name, const at::Tensor& t, int64_t rank) {
  TORCH_CHECK(t.defined() && t.dim() == rank, op, ": ", name, " must have ", rank, " dimensions, got ",
              t.defined() ? t.dim() : -1);
}

void check_pattern(const char* op, const at::Tensor& row_ptr, const at::Tensor& col_idx) {
  check_rank(op, "row_ptr", row_ptr, 2);
  check_rank(op, "col_idx", col_idx, 2);
  TORCH_CHECK(row_ptr.scalar_type() == at::kInt || row_ptr.scalar_type() == at::kLong, op,
              ": row_ptr must be int32 or int64, got ", row_ptr.scalar_type());
  TORCH_CHECK(col_idx.scalar_type() == row_ptr.scalar_type(), op, ": col_idx must have row_ptr's dtype");
}

at::ScalarType lse_type(const at::Tensor& t) { return t.scalar_type() == at::kDouble ? at::kDouble : at::kFloat; }

at::Tensor empty_like_shape(const at::Tensor& t) { return at::empty_symint(t.sym_sizes(), t.options()); }

// [B, H, N]: the per-row log-sum-exp of q [B, H, N, D].
at::Tensor lse_of(const at::Tensor& like, c10::SymInt b, c10::SymInt h, c10::SymInt n) {
  const std::vector<c10::SymInt> shape{std::move(b), std::move(h), std::move(n)};
  return at::empty_symint(shape, like.options().dtype(lse_type(like)));
}

std::tuple<at::Tensor, at::Tensor> forward_meta(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                                const at::Tensor& row_ptr, const at::Tensor& col_idx, double) {
  constexpr const char* op = "sparsevit::_sparse_attention_forward";
  check_rank(op, "q", q, 4);
  check_rank(op, "k", k, 4);
  check_rank(op, "v", v, 4);
  check_pattern(op, row_ptr, col_idx);
  return {empty_like_shape(q), lse_of(q, q.sym_size(0), q.sym_size(1), q.sym_size(2))};
}

at::Tensor attention_meta(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& row_ptr,
                          const at::Tensor& col_idx, double scale) {
  return std::get<0>(forward_meta(q, k, v, row_ptr, col_idx, scale));
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> backward_meta(const at::Tensor& grad_out, const at::Tensor& q,
                                                             const at::Tensor& k, const at::Tensor& v,
                                                             const at::Tensor& out, const at::Tensor& lse,
                                                             const at::Tensor& row_ptr, const at::Tensor& col_idx,
                                                             double) {
  constexpr const char* op = "sparsevit::_sparse_attention_backward";
  check_rank(op, "grad_out", grad_out, 4);
  check_rank(op, "q", q, 4);
  check_rank(op, "lse", lse, 3);
  check_pattern(op, row_ptr, col_idx);
  // The kernels write q's shape for all three (k and v have it too).
  return {empty_like_shape(q), at::empty_symint(q.sym_sizes(), k.options()),
          at::empty_symint(q.sym_sizes(), v.options())};
}

// qkv [B, N, 3*H*D] -> out [B, N, H*D], lse [B, H, N].
std::tuple<at::Tensor, at::Tensor> qkv_forward_meta(const at::Tensor& qkv, int64_t num_heads,
                                                    const at::Tensor& row_ptr, const at::Tensor& col_idx, double) {
  constexpr const char* op = "sparsevit::_sparse_attention_qkv_forward";
  check_rank(op, "qkv", qkv, 3);
  check_pattern(op, row_ptr, col_idx);
  TORCH_CHECK(num_heads > 0, op, ": num_heads must be positive, got ", num_heads);
  const std::vector<c10::SymInt> out_shape{qkv.sym_size(0), qkv.sym_size(1), qkv.sym_size(2) / 3};
  return {at::empty_symint(out_shape, qkv.options()),
          lse_of(qkv, qkv.sym_size(0), c10::SymInt(num_heads), qkv.sym_size(1))};
}

at::Tensor qkv_attention_meta(const at::Tensor& qkv, int64_t num_heads, const at::Tensor& row_ptr,
                              const at::Tensor& col_idx, double scale) {
  return std::get<0>(qkv_forward_meta(qkv, num_heads, row_ptr, col_idx, scale));
}

at::Tensor qkv_backward_meta(const at::Tensor& grad_out, const at::Tensor& qkv, const at::Tensor& out,
                             const at::Tensor& lse, int64_t num_heads, const at::Tensor& row_ptr,
                             const at::Tensor& col_idx, double) {
  constexpr const char* op = "sparsevit::_sparse_attention_qkv_backward";
  check_rank(op, "grad_out", grad_out, 3);
  check_rank(op, "qkv", qkv, 3);
  check_rank(op, "lse", lse, 3);
  check_pattern(op, row_ptr, col_idx);
  return empty_like_shape(qkv);
}

}  // namespace

TORCH_LIBRARY_IMPL(sparsevit, Meta, m) {
  m.impl("sparse_attention", TORCH_FN(attention_meta));
  m.impl("_sparse_attention_forward", TORCH_FN(forward_meta));
  m.impl("_sparse_attention_backward", TORCH_FN(backward_meta));
  m.impl("sparse_attention_qkv", TORCH_FN(qkv_attention_meta));
  m.impl("_sparse_attention_qkv_forward", TORCH_FN(qkv_forward_meta));
  m.impl("_sparse_attention_qkv_backward", TORCH_FN(qkv_backward_meta));
}

}  // namespace sparsevit::ops
