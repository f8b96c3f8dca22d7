// CPU implementations of sparsevit::_sparse_attention_forward / _backward and of the public
// sparsevit::sparse_attention (used directly when autograd is off, e.g. under InferenceMode).
//
// This file is the torch side: checks, int32 indices, strided views of the inputs (copied only
// when their last dim is not contiguous), outputs and workspaces, dtype dispatch and
// at::parallel_for over flat query (or key) rows; the arithmetic lives in the plain-pointer
// kernels of sparse_attention_cpu_impl.h. bfloat16 is read and written natively by the kernels
// (float32 arithmetic, round-to-nearest-even bf16 outputs, float32 lse) when D is one of the
// compiled head sizes 16/32/64/128; other D, and float16, are converted to float32 (one copy)
// and computed in float32. Also the packed sparsevit::sparse_attention_qkv ops.
#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <tuple>
#include <vector>

#include "ops/cpu/sparse_attention_cpu_kernels.h"
#include "ops/sparse_attention_inputs.h"

namespace sparsevit::ops {
namespace {

constexpr const char* kForwardOp = "sparsevit::_sparse_attention_forward";
constexpr const char* kBackwardOp = "sparsevit::_sparse_attention_backward";
constexpr const char* kQkvForwardOp = "sparsevit::_sparse_attention_qkv_forward";
constexpr const char* kQkvBackwardOp = "sparsevit::_sparse_attention_qkv_backward";

// The dtype of lse and of the kernels' arithmetic and workspaces.
at::ScalarType compute_type(at::ScalarType t) { return t == at::kDouble ? at::kDouble : at::kFloat; }

// bfloat16 with a head size the kernels have compiled in: read and written as bfloat16.
bool native_bf16(at::ScalarType t, const AttentionShape& s) {
  const int64_t D = s.layer.head_dim;
  return t == at::kBFloat16 && (D == 16 || D == 32 || D == 64 || D == 128);
}

// The dtype the kernels read the per-token tensors in (and write out / grads in).
at::ScalarType storage_type(at::ScalarType t, const AttentionShape& s) {
  return native_bf16(t, s) ? at::kBFloat16 : compute_type(t);
}

template <typename T, typename S>
const cpu::KernelFns<T, S>& kernel_fns();
template <>
const cpu::KernelFns<float>& kernel_fns<float, float>() {
  return cpu::kernel_table().f32;
}
template <>
const cpu::KernelFns<double>& kernel_fns<double, double>() {
  return cpu::kernel_table().f64;
}
template <>
const cpu::KernelFns<float, cpu::BFloat16Bits>& kernel_fns<float, cpu::BFloat16Bits>() {
  return cpu::kernel_table().bf16;
}

// Calls f(T{}, S{}) with the kernels' compute and storage types for a storage dtype.
template <typename F>
void dispatch_storage(at::ScalarType st, const char* name, F&& f) {
  switch (st) {
    case at::kDouble:
      return f(double{}, double{});
    case at::kFloat:
      return f(float{}, float{});
    case at::kBFloat16:
      return f(float{}, cpu::BFloat16Bits{});
    default:
      TORCH_CHECK(false, name, ": unsupported storage dtype ", st);
  }
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

// A [B, H, N, D] operand in the compute dtype with a contiguous last dim: the tensor itself
// when it already is one (any other strides: views are read in place), else a converted copy.
at::Tensor as_compute(const at::Tensor& t, at::ScalarType ct) {
  at::Tensor c = t.scalar_type() == ct ? t : t.to(ct);
  if (c.size(-1) > 1 && c.stride(-1) != 1) c = c.contiguous();
  return c;
}

template <typename U>
cpu::TokenTensor<U> token_tensor(const at::Tensor& t) {
  cpu::TokenTensor<U> tt;
  tt.data = static_cast<U*>(t.data_ptr());
  tt.stride_b = t.stride(0);
  tt.stride_h = t.stride(1);
  tt.stride_n = t.stride(2);
  return tt;
}

// [B, N, H*D] (last dim contiguous) as the [B, H, N, D] view the kernels address.
at::Tensor heads_view(const at::Tensor& t, const AttentionShape& s) {
  return t.view({s.batch, s.layer.num_tokens, s.layer.num_heads, s.layer.head_dim}).permute({0, 2, 1, 3});
}

// q, k, v of a [B, N, 3*H*D] buffer (timm layout [B, N, 3, H, D]) as [B, H, N, D] views.
std::tuple<at::Tensor, at::Tensor, at::Tensor> split_qkv(const at::Tensor& qkv, const AttentionShape& s) {
  const at::Tensor t =
      qkv.view({s.batch, s.layer.num_tokens, 3, s.layer.num_heads, s.layer.head_dim}).permute({2, 0, 3, 1, 4});
  return {t[0], t[1], t[2]};
}

// The structured (diagonal) kernels run when the pattern has a verified DiagonalPlan, D is one
// of their compile-time sizes, and SPARSEVIT_STRUCTURED_KERNEL is not "0" (read on every call, so
// tests and A/B timings can switch it).
bool use_diagonal(const PreparedCsr& prepared, const AttentionShape& s) {
  if (!prepared.diagonal) return false;
  const int64_t D = s.layer.head_dim;
  if (D != 16 && D != 32 && D != 64 && D != 128) return false;
  const char* env = std::getenv("SPARSEVIT_STRUCTURED_KERNEL");
  return env == nullptr || std::strcmp(env, "0") != 0;
}

cpu::DiagonalPlan diagonal_plan(const DiagonalPlanTensors& t) {
  cpu::DiagonalPlan d;
  d.delta_ptr = t.delta_ptr.data_ptr<int32_t>();
  d.deltas = t.deltas.data_ptr<int32_t>();
  d.global_ptr = t.global_ptr.data_ptr<int32_t>();
  d.globals = t.globals.data_ptr<int32_t>();
  d.is_global = t.is_global.data_ptr<uint8_t>();
  d.global_pos = t.global_pos.data_ptr<int32_t>();
  return d;
}

void check_cpu(const char* op, const at::Tensor& q) {
  TORCH_CHECK(q.device().is_cpu(), op, ": this is the CPU kernel, got tensors on ", q.device());
}

// The forward over compute-dtype operands with contiguous last dims; writes out (any such
// strides) and lse (contiguous [B, H, N]).
void run_forward(const AttentionShape& s, const PreparedCsr& prepared, const at::Tensor& q, const at::Tensor& k,
                 const at::Tensor& v, const at::Tensor& out, const at::Tensor& lse, double scale) {
  const CsrIndices& csr = prepared.csr;
  const int64_t rows = s.batch * s.layer.num_heads * s.layer.num_tokens;
  const int64_t scratch_len = csr.max_row_length + 64;
  const bool diagonal = use_diagonal(prepared, s);
  dispatch_storage(q.scalar_type(), "sparse_attention_forward_cpu", [&](auto t_tag, auto s_tag) {
    using scalar_t = decltype(t_tag);
    using storage_t = decltype(s_tag);
    cpu::ForwardParams<scalar_t, storage_t> p;
    p.q = token_tensor<const storage_t>(q);
    p.k = token_tensor<const storage_t>(k);
    p.v = token_tensor<const storage_t>(v);
    p.out = token_tensor<storage_t>(out);
    p.lse = lse.data_ptr<scalar_t>();
    set_pattern_fields(p, csr, s, scale);
    const auto& fns = kernel_fns<scalar_t, storage_t>();
    auto forward_rows = fns.forward_rows;
    if (diagonal) {
      p.diag = diagonal_plan(*prepared.diagonal);
      forward_rows = fns.forward_rows_diagonal;
    }
    at::parallel_for(0, rows, row_grain(s), [&](int64_t begin, int64_t end) {
      std::vector<scalar_t> scores(static_cast<size_t>(scratch_len));
      forward_rows(p, begin, end, scores.data());
    });
  });
}

// The backward over compute-dtype operands with contiguous last dims; writes dq, dk, dv (any
// such strides, e.g. three views into one d(qkv) buffer).
void run_backward(const AttentionShape& s, const PreparedCsr& prepared, const at::Tensor& grad_out,
                  const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& out,
                  const at::Tensor& lse, const at::Tensor& dq, const at::Tensor& dk, const at::Tensor& dv,
                  double scale) {
  const CsrIndices& csr = prepared.csr;
  const TransposedCsr& tcsr = prepared.transposed;
  const at::TensorOptions work = q.options().dtype(compute_type(q.scalar_type()));  // float32 for bf16
  at::Tensor edge_p = at::empty({s.batch * s.layer.num_heads, s.nnz_stride}, work);
  at::Tensor edge_ds = at::empty({s.batch * s.layer.num_heads, s.nnz_stride}, work);
  const bool diagonal = use_diagonal(prepared, s);
  const int64_t slot_stride = diagonal ? prepared.diagonal->max_slots * s.layer.num_tokens : 0;
  at::Tensor slot_p, slot_ds;
  if (diagonal) {
    slot_p = at::empty({s.batch * s.layer.num_heads, slot_stride}, work);
    slot_ds = at::empty({s.batch * s.layer.num_heads, slot_stride}, work);
  }
  const int64_t rows = s.batch * s.layer.num_heads * s.layer.num_tokens;
  dispatch_storage(q.scalar_type(), "sparse_attention_backward_cpu", [&](auto t_tag, auto s_tag) {
    using scalar_t = decltype(t_tag);
    using storage_t = decltype(s_tag);
    cpu::BackwardParams<scalar_t, storage_t> p;
    p.q = token_tensor<const storage_t>(q);
    p.k = token_tensor<const storage_t>(k);
    p.v = token_tensor<const storage_t>(v);
    p.out = token_tensor<const storage_t>(out);
    p.grad_out = token_tensor<const storage_t>(grad_out);
    p.lse = lse.data_ptr<scalar_t>();
    p.grad_q = token_tensor<storage_t>(dq);
    p.grad_k = token_tensor<storage_t>(dk);
    p.grad_v = token_tensor<storage_t>(dv);
    p.edge_p = edge_p.data_ptr<scalar_t>();
    p.edge_ds = edge_ds.data_ptr<scalar_t>();
    p.t_row_ptr = tcsr.row_ptr.data_ptr<int32_t>();
    p.t_query = tcsr.query.data_ptr<int32_t>();
    p.t_edge = tcsr.edge.data_ptr<int32_t>();
    set_pattern_fields(p, csr, s, scale);
    const auto& fns = kernel_fns<scalar_t, storage_t>();
    auto query_rows = fns.backward_query_rows;
    auto key_rows = fns.backward_key_rows;
    if (diagonal) {
      p.diag = diagonal_plan(*prepared.diagonal);
      p.slot_p = slot_p.data_ptr<scalar_t>();
      p.slot_ds = slot_ds.data_ptr<scalar_t>();
      p.slot_stride = slot_stride;
      query_rows = fns.backward_query_rows_diagonal;
      key_rows = fns.backward_key_rows_diagonal;
    }
    const int64_t bhs = s.batch * s.layer.num_heads;
    if (bhs >= 2 * static_cast<int64_t>(at::get_num_threads())) {
      // One task per (batch, head): the key pass reads what the query pass just wrote and the
      // head's q, k, v, dO while they are still in cache.
      at::parallel_for(0, bhs, 1, [&](int64_t b, int64_t e) {
        for (int64_t bh = b; bh < e; ++bh) {
          query_rows(p, bh * s.layer.num_tokens, (bh + 1) * s.layer.num_tokens);
          key_rows(p, bh * s.layer.num_tokens, (bh + 1) * s.layer.num_tokens);
        }
      });
    } else {
      // Few heads: split rows instead (two passes; the key pass needs every query row done).
      const int64_t grain = row_grain(s);
      at::parallel_for(0, rows, grain, [&](int64_t b, int64_t e) { query_rows(p, b, e); });
      at::parallel_for(0, rows, grain, [&](int64_t b, int64_t e) { key_rows(p, b, e); });
    }
  });
}

void check_lse(const char* op, const at::Tensor& lse, const AttentionShape& s, const at::Device& device) {
  TORCH_CHECK(lse.defined() && lse.dim() == 3 && lse.size(0) == s.batch && lse.size(1) == s.layer.num_heads &&
                  lse.size(2) == s.layer.num_tokens,
              op, ": lse must be [B, H, N] = [", s.batch, ", ", s.layer.num_heads, ", ", s.layer.num_tokens, "], got ",
              lse.defined() ? lse.sizes() : at::IntArrayRef{});
  TORCH_CHECK(lse.device() == device, op, ": lse must be on the device of the inputs (", device, ")");
}

std::tuple<at::Tensor, at::Tensor> sparse_attention_forward_cpu(const at::Tensor& q, const at::Tensor& k,
                                                                const at::Tensor& v, const at::Tensor& row_ptr,
                                                                const at::Tensor& col_idx, double scale) {
  const AttentionShape s = check_attention_inputs(kForwardOp, q, k, v, row_ptr, col_idx);
  check_cpu(kForwardOp, q);
  const std::shared_ptr<const PreparedCsr> prepared = prepared_csr(kForwardOp, row_ptr, col_idx, s);
  const at::ScalarType ct = storage_type(q.scalar_type(), s);
  const at::Tensor qc = as_compute(q, ct), kc = as_compute(k, ct), vc = as_compute(v, ct);
  at::Tensor out = at::empty({s.batch, s.layer.num_heads, s.layer.num_tokens, s.layer.head_dim}, qc.options());
  at::Tensor lse = at::empty({s.batch, s.layer.num_heads, s.layer.num_tokens},
                             qc.options().dtype(compute_type(ct)));
  run_forward(s, *prepared, qc, kc, vc, out, lse, scale);
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
  TORCH_CHECK(grad_out.device() == q.device() && out.device() == q.device(), kBackwardOp,
              ": grad_out, out and lse must be on the device of q (", q.device(), ")");
  check_lse(kBackwardOp, lse, s, q.device());
  const std::shared_ptr<const PreparedCsr> prepared = prepared_csr(kBackwardOp, row_ptr, col_idx, s);
  const at::ScalarType ct = storage_type(q.scalar_type(), s);
  const at::Tensor qc = as_compute(q, ct), kc = as_compute(k, ct), vc = as_compute(v, ct);
  const at::Tensor oc = as_compute(out, ct), goc = as_compute(grad_out, ct);
  const at::Tensor lc = lse.to(compute_type(ct)).contiguous();
  const auto shape = {s.batch, s.layer.num_heads, s.layer.num_tokens, s.layer.head_dim};
  at::Tensor dq = at::empty(shape, qc.options()), dk = at::empty(shape, qc.options()),
             dv = at::empty(shape, qc.options());
  run_backward(s, *prepared, goc, qc, kc, vc, oc, lc, dq, dk, dv, scale);
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

// ---- packed qkv -----------------------------------------------------------------------------
//
// qkv [B, N, 3*H*D] straight from Linear(C, 3C): q, k, v are strided views into it (no permute or
// contiguous copies); out is written as [B, N, H*D] (out[b, j, h*D + d]), the layout the output
// projection reads, and d(qkv) as one [B, N, 3*H*D] buffer through three strided views.

// qkv in the compute dtype with a contiguous last dim.
at::Tensor qkv_as_compute(const at::Tensor& qkv, at::ScalarType ct) {
  at::Tensor c = qkv.scalar_type() == ct ? qkv : qkv.to(ct);
  if (c.stride(2) != 1) c = c.contiguous();
  return c;
}

std::tuple<at::Tensor, at::Tensor> sparse_attention_qkv_forward_cpu(const at::Tensor& qkv, int64_t num_heads,
                                                                    const at::Tensor& row_ptr,
                                                                    const at::Tensor& col_idx, double scale) {
  const AttentionShape s = check_qkv_inputs(kQkvForwardOp, qkv, num_heads, row_ptr, col_idx);
  check_cpu(kQkvForwardOp, qkv);
  const std::shared_ptr<const PreparedCsr> prepared = prepared_csr(kQkvForwardOp, row_ptr, col_idx, s);
  const at::ScalarType ct = storage_type(qkv.scalar_type(), s);
  const at::Tensor qkvc = qkv_as_compute(qkv, ct);
  const auto [q, k, v] = split_qkv(qkvc, s);
  at::Tensor out =
      at::empty({s.batch, s.layer.num_tokens, s.layer.num_heads * s.layer.head_dim}, qkvc.options());
  at::Tensor lse = at::empty({s.batch, s.layer.num_heads, s.layer.num_tokens},
                             qkvc.options().dtype(compute_type(ct)));
  run_forward(s, *prepared, q, k, v, heads_view(out, s), lse, scale);
  if (qkv.scalar_type() != ct) out = out.to(qkv.scalar_type());
  return {out, lse};
}

at::Tensor sparse_attention_qkv_backward_cpu(const at::Tensor& grad_out, const at::Tensor& qkv, const at::Tensor& out,
                                             const at::Tensor& lse, int64_t num_heads, const at::Tensor& row_ptr,
                                             const at::Tensor& col_idx, double scale) {
  const AttentionShape s = check_qkv_inputs(kQkvBackwardOp, qkv, num_heads, row_ptr, col_idx);
  check_cpu(kQkvBackwardOp, qkv);
  const std::vector<int64_t> out_shape = {s.batch, s.layer.num_tokens, s.layer.num_heads * s.layer.head_dim};
  TORCH_CHECK(grad_out.defined() && grad_out.sizes() == at::IntArrayRef(out_shape), kQkvBackwardOp,
              ": grad_out must be [B, N, H*D] = ", at::IntArrayRef(out_shape), ", got ",
              grad_out.defined() ? grad_out.sizes() : at::IntArrayRef{});
  TORCH_CHECK(out.defined() && out.sizes() == at::IntArrayRef(out_shape), kQkvBackwardOp,
              ": out must be [B, N, H*D] = ", at::IntArrayRef(out_shape), ", got ",
              out.defined() ? out.sizes() : at::IntArrayRef{});
  TORCH_CHECK(grad_out.device() == qkv.device() && out.device() == qkv.device(), kQkvBackwardOp,
              ": grad_out, out and lse must be on the device of qkv (", qkv.device(), ")");
  check_lse(kQkvBackwardOp, lse, s, qkv.device());
  const std::shared_ptr<const PreparedCsr> prepared = prepared_csr(kQkvBackwardOp, row_ptr, col_idx, s);
  const at::ScalarType ct = storage_type(qkv.scalar_type(), s);
  const at::Tensor qkvc = qkv_as_compute(qkv, ct);
  const auto [q, k, v] = split_qkv(qkvc, s);
  const at::Tensor oc = as_compute(heads_view(out, s), ct), goc = as_compute(heads_view(grad_out, s), ct);
  const at::Tensor lc = lse.to(compute_type(ct)).contiguous();
  at::Tensor dqkv = at::empty({s.batch, s.layer.num_tokens, 3 * s.layer.num_heads * s.layer.head_dim}, qkvc.options());
  const auto [dq, dk, dv] = split_qkv(dqkv, s);
  run_backward(s, *prepared, goc, q, k, v, oc, lc, dq, dk, dv, scale);
  if (qkv.scalar_type() != ct) dqkv = dqkv.to(qkv.scalar_type());
  return dqkv;
}

at::Tensor sparse_attention_qkv_cpu(const at::Tensor& qkv, int64_t num_heads, const at::Tensor& row_ptr,
                                   const at::Tensor& col_idx, double scale) {
  return std::get<0>(sparse_attention_qkv_forward_cpu(qkv, num_heads, row_ptr, col_idx, scale));
}

}  // namespace

TORCH_LIBRARY_IMPL(sparsevit, CPU, m) {
  m.impl("_sparse_attention_forward", TORCH_FN(sparse_attention_forward_cpu));
  m.impl("_sparse_attention_backward", TORCH_FN(sparse_attention_backward_cpu));
  m.impl("sparse_attention", TORCH_FN(sparse_attention_cpu));
  m.impl("_sparse_attention_qkv_forward", TORCH_FN(sparse_attention_qkv_forward_cpu));
  m.impl("_sparse_attention_qkv_backward", TORCH_FN(sparse_attention_qkv_backward_cpu));
  m.impl("sparse_attention_qkv", TORCH_FN(sparse_attention_qkv_cpu));
}

}  // namespace sparsevit::ops
