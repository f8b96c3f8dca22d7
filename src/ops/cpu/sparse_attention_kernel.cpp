// CPU implementations of sparsevit::_sparse_attention_forward / _backward and of the public
// sparsevit::sparse_attention (used directly when autograd is off, e.g. under InferenceMode).
//
// This file is the torch side: checks, contiguous/int32 inputs, outputs and workspaces, dtype
// dispatch and at::parallel_for over flat query (or key) rows; the arithmetic lives in the
// plain-pointer kernels of sparse_attention_cpu_impl.h. bfloat16/float16 compute in float32.
#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <tuple>
#include <vector>

#include "ops/cpu/sparse_attention_cpu_kernels.h"
#include "ops/sparse_attention_inputs.h"

namespace sparsevit::ops {
namespace {

constexpr const char* kForwardOp = "sparsevit::_sparse_attention_forward";
constexpr const char* kBackwardOp = "sparsevit::_sparse_attention_backward";

at::ScalarType compute_type(at::ScalarType t) { return t == at::kDouble ? at::kDouble : at::kFloat; }

template <typename T>
const cpu::KernelFns<T>& kernel_fns();
template <>
const cpu::KernelFns<float>& kernel_fns<float>() {
  return cpu::kernel_table().f32;
}
template <>
const cpu::KernelFns<double>& kernel_fns<double>() {
  return cpu::kernel_table().f64;
}

// Rows per parallel chunk: enough work per chunk (~64k multiply-adds) to amortise the split.
int64_t row_grain(const AttentionShape& s) {
  const int64_t rows_per_head = std::max<int64_t>(1, s.layer.num_tokens);
  const int64_t keys_per_row = s.nnz_stride / rows_per_head + 1;  // nnz_stride: the densest head
  const int64_t work_per_row = keys_per_row * std::max<int64_t>(1, s.layer.head_dim);
  return std::max<int64_t>(1, 65536 / work_per_row);
}

// What both kernels' parameter structs share: the pattern's indices, the geometry, the scale.
template <typename Params>
void set_pattern_fields(Params& p, const CsrIndices& csr, const AttentionShape& s, double scale) {
  p.row_ptr = csr.row_ptr.data_ptr<int32_t>();
  p.col_idx = csr.col_idx.data_ptr<int32_t>();
  p.heads = s.layer.num_heads;
  p.tokens = s.layer.num_tokens;
  p.dim = s.layer.head_dim;
  p.nnz_stride = s.nnz_stride;
  p.scale = static_cast<decltype(p.scale)>(scale);
}

at::Tensor as_compute(const at::Tensor& t, at::ScalarType ct) { return t.to(ct).contiguous(); }

void check_cpu(const char* op, const at::Tensor& q) {
  TORCH_CHECK(q.device().is_cpu(), op, ": this is the CPU kernel, got tensors on ", q.device());
}

std::tuple<at::Tensor, at::Tensor> sparse_attention_forward_cpu(const at::Tensor& q, const at::Tensor& k,
                                                                const at::Tensor& v, const at::Tensor& row_ptr,
                                                                const at::Tensor& col_idx, double scale) {
  const AttentionShape s = check_attention_inputs(kForwardOp, q, k, v, row_ptr, col_idx);
  check_cpu(kForwardOp, q);
  const std::shared_ptr<const PreparedCsr> prepared = prepared_csr(kForwardOp, row_ptr, col_idx, s);
  const CsrIndices& csr = prepared->csr;
  const at::ScalarType ct = compute_type(q.scalar_type());
  const at::Tensor qc = as_compute(q, ct), kc = as_compute(k, ct), vc = as_compute(v, ct);
  at::Tensor out = at::empty({s.batch, s.layer.num_heads, s.layer.num_tokens, s.layer.head_dim}, qc.options());
  at::Tensor lse = at::empty({s.batch, s.layer.num_heads, s.layer.num_tokens}, qc.options());
  const int64_t rows = s.batch * s.layer.num_heads * s.layer.num_tokens;
  const int64_t scratch_len = csr.max_row_length + 64;
  AT_DISPATCH_FLOATING_TYPES(ct, "sparse_attention_forward_cpu", [&] {
    cpu::ForwardParams<scalar_t> p;
    p.q = qc.data_ptr<scalar_t>();
    p.k = kc.data_ptr<scalar_t>();
    p.v = vc.data_ptr<scalar_t>();
    p.out = out.data_ptr<scalar_t>();
    p.lse = lse.data_ptr<scalar_t>();
    set_pattern_fields(p, csr, s, scale);
    const auto& fns = kernel_fns<scalar_t>();
    at::parallel_for(0, rows, row_grain(s), [&](int64_t begin, int64_t end) {
      std::vector<scalar_t> scores(static_cast<size_t>(scratch_len));
      fns.forward_rows(p, begin, end, scores.data());
    });
  });
  if (q.scalar_type() != ct) out = out.to(q.scalar_type());
  return {out, lse};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> sparse_attention_backward_cpu(
    const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& out,
    const at::Tensor& lse, const at::Tensor& row_ptr, const at::Tensor& col_idx, double scale) {
  const AttentionShape s = check_attention_inputs(kBackwardOp, q, k, v, row_ptr, col_idx);
  check_cpu(kBackwardOp, q);
  TORCH_CHECK(grad_out.defined() && grad_out.sizes() == q.sizes(), kBackwardOp, ": grad_out must have the shape of q ",
              q.sizes(), ", got ", grad_out.defined() ? grad_out.sizes() : at::IntArrayRef{});
  TORCH_CHECK(out.defined() && out.sizes() == q.sizes(), kBackwardOp, ": out must have the shape of q ", q.sizes(),
              ", got ", out.defined() ? out.sizes() : at::IntArrayRef{});
  TORCH_CHECK(lse.defined() && lse.dim() == 3 && lse.size(0) == s.batch && lse.size(1) == s.layer.num_heads &&
                  lse.size(2) == s.layer.num_tokens,
              kBackwardOp, ": lse must be [B, H, N] = [", s.batch, ", ", s.layer.num_heads, ", ", s.layer.num_tokens, "], got ",
              lse.defined() ? lse.sizes() : at::IntArrayRef{});
  TORCH_CHECK(grad_out.device() == q.device() && out.device() == q.device() && lse.device() == q.device(),
              kBackwardOp, ": grad_out, out and lse must be on the device of q (", q.device(), ")");
  const std::shared_ptr<const PreparedCsr> prepared = prepared_csr(kBackwardOp, row_ptr, col_idx, s);
  const CsrIndices& csr = prepared->csr;
  const TransposedCsr& tcsr = prepared->transposed;
  const at::ScalarType ct = compute_type(q.scalar_type());
  const at::Tensor qc = as_compute(q, ct), kc = as_compute(k, ct), vc = as_compute(v, ct);
  const at::Tensor oc = as_compute(out, ct), goc = as_compute(grad_out, ct), lc = as_compute(lse, ct);
  at::Tensor dq = at::empty_like(qc), dk = at::empty_like(qc), dv = at::empty_like(qc);
  at::Tensor edge_p = at::empty({s.batch * s.layer.num_heads, s.nnz_stride}, qc.options());
  at::Tensor edge_ds = at::empty({s.batch * s.layer.num_heads, s.nnz_stride}, qc.options());
  const int64_t rows = s.batch * s.layer.num_heads * s.layer.num_tokens;
  AT_DISPATCH_FLOATING_TYPES(ct, "sparse_attention_backward_cpu", [&] {
    cpu::BackwardParams<scalar_t> p;
    p.q = qc.data_ptr<scalar_t>();
    p.k = kc.data_ptr<scalar_t>();
    p.v = vc.data_ptr<scalar_t>();
    p.out = oc.data_ptr<scalar_t>();
    p.grad_out = goc.data_ptr<scalar_t>();
    p.lse = lc.data_ptr<scalar_t>();
    p.grad_q = dq.data_ptr<scalar_t>();
    p.grad_k = dk.data_ptr<scalar_t>();
    p.grad_v = dv.data_ptr<scalar_t>();
    p.edge_p = edge_p.data_ptr<scalar_t>();
    p.edge_ds = edge_ds.data_ptr<scalar_t>();
    p.t_row_ptr = tcsr.row_ptr.data_ptr<int32_t>();
    p.t_query = tcsr.query.data_ptr<int32_t>();
    p.t_edge = tcsr.edge.data_ptr<int32_t>();
    set_pattern_fields(p, csr, s, scale);
    const auto& fns = kernel_fns<scalar_t>();
    const int64_t bhs = s.batch * s.layer.num_heads;
    if (bhs >= 2 * static_cast<int64_t>(at::get_num_threads())) {
      // One task per (batch, head): the key pass reads what the query pass just wrote and the
      // head's q, k, v, dO while they are still in cache.
      at::parallel_for(0, bhs, 1, [&](int64_t b, int64_t e) {
        for (int64_t bh = b; bh < e; ++bh) {
          fns.backward_query_rows(p, bh * s.layer.num_tokens, (bh + 1) * s.layer.num_tokens);
          fns.backward_key_rows(p, bh * s.layer.num_tokens, (bh + 1) * s.layer.num_tokens);
        }
      });
    } else {
      // Few heads: split rows instead (two passes; the key pass needs every query row done).
      const int64_t grain = row_grain(s);
      at::parallel_for(0, rows, grain, [&](int64_t b, int64_t e) { fns.backward_query_rows(p, b, e); });
      at::parallel_for(0, rows, grain, [&](int64_t b, int64_t e) { fns.backward_key_rows(p, b, e); });
    }
  });
  if (q.scalar_type() != ct) {
    dq = dq.to(q.scalar_type());
    dk = dk.to(q.scalar_type());
    dv = dv.to(q.scalar_type());
  }
  return {dq, dk, dv};
}

at::Tensor sparse_attention_cpu(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                const at::Tensor& row_ptr, const at::Tensor& col_idx, double scale) {
  return std::get<0>(sparse_attention_forward_cpu(q, k, v, row_ptr, col_idx, scale));
}

}  // namespace

TORCH_LIBRARY_IMPL(sparsevit, CPU, m) {
  m.impl("_sparse_attention_forward", TORCH_FN(sparse_attention_forward_cpu));
  m.impl("_sparse_attention_backward", TORCH_FN(sparse_attention_backward_cpu));
  m.impl("sparse_attention", TORCH_FN(sparse_attention_cpu));
}

}  // namespace sparsevit::ops
