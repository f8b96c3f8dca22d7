// CUDA implementations of the sparsevit operators (docs/operator_contract.md): the same private and
// public ops the CPU backend registers, for CUDA tensors, on the current stream. Built into
// sparsevit_ops only when the LibTorch found is a CUDA build (cmake/SparsevitCuda.cmake); the
// arithmetic is the torch-free kernels of sparse_attention_kernels.cu (docs/gpu.md).
//
// This file is the torch side: the shared input checks and the prepared (checked, int32,
// transposed, diagonal-detected) CSR of ops/sparse_attention_inputs.h, computed on the CPU once per
// pattern; those index tensors uploaded once per device and cached (DeviceCsrCache); strided views
// of q, k, v read in place (copied only when D is not contiguous); outputs, lse and workspaces
// allocated on the device; launch errors reported with the op's name.
//
// dtypes: float32 and float64 compute in their own type; bfloat16 is read and written natively
// (float32 arithmetic, round-to-nearest-even stores, float32 lse); float16 is converted to
// float32 once and back, as on the CPU. Head sizes up to cuda::kMaxHeadDim (128).
#include <ATen/ATen.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#include <torch/library.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "ops/cuda/sparse_attention_cuda_kernels.h"
#include "ops/sparse_attention_inputs.h"

namespace sparsevit::ops {
namespace {

constexpr const char* kForwardOp = "sparsevit::_sparse_attention_forward";
constexpr const char* kBackwardOp = "sparsevit::_sparse_attention_backward";
constexpr const char* kQkvForwardOp = "sparsevit::_sparse_attention_qkv_forward";
constexpr const char* kQkvBackwardOp = "sparsevit::_sparse_attention_qkv_backward";

// ---- index tensors on the device --------------------------------------------------------------

// A PreparedCsr's index tensors on one device.
struct DeviceCsr {
  at::Tensor row_ptr, col_idx, t_row_ptr, t_query, t_edge;
  bool diagonal = false;
  at::Tensor delta_ptr, deltas, global_ptr, globals, is_global, global_pos;
  int64_t max_slots = 0;
  int64_t max_globals = 0;  // the most global tokens of any head (tiled workspaces, tiled_launch)
};

// Uploads each prepared pattern once per device. Entries are keyed by the PreparedCsr's address and
// device and hold a weak reference to it: an entry whose PreparedCsr was dropped by the CPU-side
// cache (ops/sparse_attention_inputs.cpp keeps 64) is stale and uploaded again, even when a new
// PreparedCsr reuses the address. Expired entries are pruned on every miss.
class DeviceCsrCache {
 public:
  std::shared_ptr<const DeviceCsr> get(const std::shared_ptr<const PreparedCsr>& prepared, const at::Device& device) {
    const Key key{prepared.get(), device.index()};
    {
      std::lock_guard<std::mutex> lock(mutex_);
      const auto it = entries_.find(key);
      if (it != entries_.end() && it->second.owner.lock() == prepared) return it->second.csr;
    }
    // Upload outside the lock (synchronous copies: once per pattern and device).
    auto csr = std::make_shared<DeviceCsr>(upload(*prepared, device));
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = entries_.begin(); it != entries_.end();) it = it->second.owner.expired() ? entries_.erase(it) : ++it;
    entries_[key] = Entry{prepared, csr};
    return csr;
  }

 private:
  using Key = std::pair<const PreparedCsr*, c10::DeviceIndex>;
  struct Entry {
    std::weak_ptr<const PreparedCsr> owner;
    std::shared_ptr<const DeviceCsr> csr;
  };
  static DeviceCsr upload(const PreparedCsr& p, const at::Device& device) {
    auto up = [&](const at::Tensor& t) { return t.contiguous().to(device); };
    DeviceCsr d;
    d.row_ptr = up(p.csr.row_ptr);
    d.col_idx = up(p.csr.col_idx);
    d.t_row_ptr = up(p.transposed.row_ptr);
    d.t_query = up(p.transposed.query);
    d.t_edge = up(p.transposed.edge);
    if (p.diagonal) {
      d.diagonal = true;
      d.delta_ptr = up(p.diagonal->delta_ptr);
      d.deltas = up(p.diagonal->deltas);
      d.global_ptr = up(p.diagonal->global_ptr);
      d.globals = up(p.diagonal->globals);
      d.is_global = up(p.diagonal->is_global);
      d.global_pos = up(p.diagonal->global_pos);
      d.max_slots = p.diagonal->max_slots;
      const at::Tensor gp = p.diagonal->global_ptr.to(at::kCPU).contiguous();
      const int32_t* g = gp.data_ptr<int32_t>();
      for (int64_t h = 0; h + 1 < gp.numel(); ++h) d.max_globals = std::max<int64_t>(d.max_globals, g[h + 1] - g[h]);
    }
    return d;
  }
  std::mutex mutex_;
  std::map<Key, Entry> entries_;
};

DeviceCsrCache& device_csr_cache() {
  static DeviceCsrCache cache;
  return cache;
}

// ---- dtypes and views --------------------------------------------------------------------------

at::ScalarType compute_type(at::ScalarType t) { return t == at::kDouble ? at::kDouble : at::kFloat; }
// What the kernels read and write: float32, float64, or bfloat16 natively; float16 as float32.
at::ScalarType storage_type(at::ScalarType t) { return t == at::kBFloat16 ? at::kBFloat16 : compute_type(t); }

// Calls f(T{}, S{}) with the kernels' compute and storage types for a storage dtype.
template <typename F>
void dispatch_storage(at::ScalarType st, const char* op, F&& f) {
  switch (st) {
    case at::kDouble:
      return f(double{}, double{});
    case at::kFloat:
      return f(float{}, float{});
    case at::kBFloat16:
      return f(float{}, cuda::BFloat16Bits{});
    default:
      TORCH_CHECK(false, op, ": unsupported storage dtype ", st);
  }
}

void check_cuda_inputs(const char* op, const at::Tensor& x, const AttentionShape& s) {
  TORCH_CHECK(x.device().is_cuda(), op, ": this is the CUDA kernel, got tensors on ", x.device());
  TORCH_CHECK(s.layer.head_dim <= cuda::kMaxHeadDim, op, ": the CUDA kernels take head_dim <= ", cuda::kMaxHeadDim,
              ", got ", s.layer.head_dim);
}

// A [B, H, N, D] operand in the storage dtype with a contiguous last dim (views read in place).
at::Tensor as_storage(const at::Tensor& t, at::ScalarType st) {
  at::Tensor c = t.scalar_type() == st ? t : t.to(st);
  if (c.size(-1) > 1 && c.stride(-1) != 1) c = c.contiguous();
  return c;
}

template <typename U>
cuda::TokenView<U> token_view(const at::Tensor& t) {
  return cuda::TokenView<U>{static_cast<U*>(t.data_ptr()), t.stride(0), t.stride(1), t.stride(2)};
}

// Pair accesses when every per-token tensor's rows start two-element aligned.
template <typename S>
bool all_pairs_aligned(std::initializer_list<const at::Tensor*> ts) {
  for (const at::Tensor* t : ts)
    if (!cuda::pair_aligned(static_cast<const S*>(t->data_ptr()), t->stride(0), t->stride(1), t->stride(2)))
      return false;
  return true;
}

// The tiled diagonal kernels run when the pattern has a verified plan, SPARSEVIT_STRUCTURED_KERNEL is
// not "0" (as on the CPU), and cuda::tiled_launch takes its globals, head size and compute type;
// otherwise the per-row CSR kernels.
template <typename T>
bool use_tiles(const DeviceCsr& d, const AttentionShape& s) {
  if (!d.diagonal) return false;
  const char* env = std::getenv("SPARSEVIT_STRUCTURED_KERNEL");
  if (env != nullptr && std::strcmp(env, "0") == 0) return false;
  return cuda::tiled_launch<T>(true, d.max_globals, s.layer.head_dim);
}

template <typename T>
void set_pattern(cuda::PatternArgs<T>& a, const DeviceCsr& d, const AttentionShape& s, double scale, bool diagonal) {
  a.row_ptr = d.row_ptr.data_ptr<int32_t>();
  a.col_idx = d.col_idx.data_ptr<int32_t>();
  a.batch = s.batch;
  a.heads = s.layer.num_heads;
  a.tokens = s.layer.num_tokens;
  a.dim = s.layer.head_dim;
  a.nnz_stride = s.nnz_stride;
  a.scale = static_cast<T>(scale);
  if (diagonal) {
    a.diag.delta_ptr = d.delta_ptr.data_ptr<int32_t>();
    a.diag.deltas = d.deltas.data_ptr<int32_t>();
    a.diag.global_ptr = d.global_ptr.data_ptr<int32_t>();
    a.diag.globals = d.globals.data_ptr<int32_t>();
    a.diag.is_global = d.is_global.data_ptr<uint8_t>();
    a.diag.global_pos = d.global_pos.data_ptr<int32_t>();
  }
}

void check_launch(const char* op, int err) {
  TORCH_CHECK(err == cudaSuccess, op, ": CUDA kernel launch failed: ", cudaGetErrorString(static_cast<cudaError_t>(err)),
              " (run with CUDA_LAUNCH_BLOCKING=1 to locate asynchronous errors)");
}

// ---- the passes --------------------------------------------------------------------------------

void run_forward(const char* op, const AttentionShape& s, const DeviceCsr& d, const at::Tensor& q,
                 const at::Tensor& k, const at::Tensor& v, const at::Tensor& out, const at::Tensor& lse, double scale) {
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(q.device().index()).stream();
  dispatch_storage(q.scalar_type(), op, [&](auto t_tag, auto s_tag) {
    using T = decltype(t_tag);
    using S = decltype(s_tag);
    const bool diagonal = use_tiles<T>(d, s);
    cuda::ForwardArgs<T, S> a;
    set_pattern(a, d, s, scale, diagonal);
    // The tiles' partials of the global rows (merged by the second launch).
    at::Tensor partials;
    if (diagonal) {
      a.partial_stride = cuda::forward_partials_per_head<T>(s.layer.num_tokens, s.layer.head_dim, d.max_globals);
      partials = at::empty({s.batch * s.layer.num_heads * a.partial_stride + 1}, lse.options());
      a.partials = partials.data_ptr<T>();
    }
    a.q = token_view<const S>(q);
    a.k = token_view<const S>(k);
    a.v = token_view<const S>(v);
    a.out = token_view<S>(out);
    a.lse = lse.data_ptr<T>();
    a.pair_loads = all_pairs_aligned<S>({&q, &k, &v, &out});
    check_launch(op, cuda::launch_forward(a, diagonal, stream));
  });
}

void run_backward(const char* op, const AttentionShape& s, const DeviceCsr& d, const at::Tensor& grad_out,
                  const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& out,
                  const at::Tensor& lse, const at::Tensor& dq, const at::Tensor& dk, const at::Tensor& dv,
                  double scale) {
  const int64_t bh = s.batch * s.layer.num_heads;
  const at::TensorOptions work = q.options().dtype(compute_type(q.scalar_type()));
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(q.device().index()).stream();
  dispatch_storage(q.scalar_type(), op, [&](auto t_tag, auto s_tag) {
    using T = decltype(t_tag);
    using S = decltype(s_tag);
    const bool diagonal = use_tiles<T>(d, s);
    cuda::BackwardArgs<T, S> a;
    set_pattern(a, d, s, scale, diagonal);
    a.q = token_view<const S>(q);
    a.k = token_view<const S>(k);
    a.v = token_view<const S>(v);
    a.out = token_view<const S>(out);
    a.grad_out = token_view<const S>(grad_out);
    a.lse = lse.data_ptr<T>();
    a.grad_q = token_view<S>(dq);
    a.grad_k = token_view<S>(dk);
    a.grad_v = token_view<S>(dv);
    // Tiled: Di per query and the global tokens' partials. CSR: P and dS per edge.
    at::Tensor workspace, edge_p, edge_ds;
    if (diagonal) {
      a.workspace_stride = cuda::backward_workspace_per_head<T>(s.layer.num_tokens, s.layer.head_dim, d.max_globals);
      workspace = at::empty({bh * a.workspace_stride}, work);
      a.workspace = workspace.data_ptr<T>();
    } else {
      edge_p = at::empty({bh, s.nnz_stride}, work);
      edge_ds = at::empty({bh, s.nnz_stride}, work);
      a.edge_p = edge_p.data_ptr<T>();
      a.edge_ds = edge_ds.data_ptr<T>();
    }
    a.t_row_ptr = d.t_row_ptr.data_ptr<int32_t>();
    a.t_query = d.t_query.data_ptr<int32_t>();
    a.t_edge = d.t_edge.data_ptr<int32_t>();
    a.pair_loads = all_pairs_aligned<S>({&q, &k, &v, &out, &grad_out, &dq, &dk, &dv});
    check_launch(op, cuda::launch_backward(a, diagonal, stream));
  });
}

void check_lse(const char* op, const at::Tensor& lse, const AttentionShape& s, const at::Device& device) {
  TORCH_CHECK(lse.defined() && lse.dim() == 3 && lse.size(0) == s.batch && lse.size(1) == s.layer.num_heads &&
                  lse.size(2) == s.layer.num_tokens,
              op, ": lse must be [B, H, N] = [", s.batch, ", ", s.layer.num_heads, ", ", s.layer.num_tokens, "], got ",
              lse.defined() ? lse.sizes() : at::IntArrayRef{});
  TORCH_CHECK(lse.device() == device, op, ": lse must be on the device of the inputs (", device, ")");
}

std::shared_ptr<const DeviceCsr> device_csr(const char* op, const at::Tensor& row_ptr, const at::Tensor& col_idx,
                                            const AttentionShape& s, const at::Device& device) {
  return device_csr_cache().get(prepared_csr(op, row_ptr, col_idx, s), device);
}

// ---- the ops -----------------------------------------------------------------------------------

std::tuple<at::Tensor, at::Tensor> sparse_attention_forward_cuda(const at::Tensor& q, const at::Tensor& k,
                                                                 const at::Tensor& v, const at::Tensor& row_ptr,
                                                                 const at::Tensor& col_idx, double scale) {
  const AttentionShape s = check_attention_inputs(kForwardOp, q, k, v, row_ptr, col_idx);
  check_cuda_inputs(kForwardOp, q, s);
  const c10::cuda::CUDAGuard guard(q.device());
  const auto d = device_csr(kForwardOp, row_ptr, col_idx, s, q.device());
  const at::ScalarType st = storage_type(q.scalar_type());
  const at::Tensor qc = as_storage(q, st), kc = as_storage(k, st), vc = as_storage(v, st);
  at::Tensor out = at::empty({s.batch, s.layer.num_heads, s.layer.num_tokens, s.layer.head_dim}, qc.options());
  at::Tensor lse =
      at::empty({s.batch, s.layer.num_heads, s.layer.num_tokens}, qc.options().dtype(compute_type(st)));
  run_forward(kForwardOp, s, *d, qc, kc, vc, out, lse, scale);
  if (q.scalar_type() != st) out = out.to(q.scalar_type());
  return {out, lse};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> sparse_attention_backward_cuda(
    const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& out,
    const at::Tensor& lse, const at::Tensor& row_ptr, const at::Tensor& col_idx, double scale) {
  const AttentionShape s = check_attention_inputs(kBackwardOp, q, k, v, row_ptr, col_idx);
  check_cuda_inputs(kBackwardOp, q, s);
  TORCH_CHECK(grad_out.defined() && grad_out.sizes() == q.sizes(), kBackwardOp, ": grad_out must have the shape of q ",
              q.sizes(), ", got ", grad_out.defined() ? grad_out.sizes() : at::IntArrayRef{});
  TORCH_CHECK(out.defined() && out.sizes() == q.sizes(), kBackwardOp, ": out must have the shape of q ", q.sizes(),
              ", got ", out.defined() ? out.sizes() : at::IntArrayRef{});
  TORCH_CHECK(grad_out.device() == q.device() && out.device() == q.device(), kBackwardOp,
              ": grad_out, out and lse must be on the device of q (", q.device(), ")");
  check_lse(kBackwardOp, lse, s, q.device());
  const c10::cuda::CUDAGuard guard(q.device());
  const auto d = device_csr(kBackwardOp, row_ptr, col_idx, s, q.device());
  const at::ScalarType st = storage_type(q.scalar_type());
  const at::Tensor qc = as_storage(q, st), kc = as_storage(k, st), vc = as_storage(v, st);
  const at::Tensor oc = as_storage(out, st), goc = as_storage(grad_out, st);
  const at::Tensor lc = lse.to(compute_type(st)).contiguous();
  const auto shape = {s.batch, s.layer.num_heads, s.layer.num_tokens, s.layer.head_dim};
  at::Tensor dq = at::empty(shape, qc.options()), dk = at::empty(shape, qc.options()),
             dv = at::empty(shape, qc.options());
  run_backward(kBackwardOp, s, *d, goc, qc, kc, vc, oc, lc, dq, dk, dv, scale);
  if (q.scalar_type() != st) {
    dq = dq.to(q.scalar_type());
    dk = dk.to(q.scalar_type());
    dv = dv.to(q.scalar_type());
  }
  return {dq, dk, dv};
}

at::Tensor sparse_attention_cuda(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                 const at::Tensor& row_ptr, const at::Tensor& col_idx, double scale) {
  return std::get<0>(sparse_attention_forward_cuda(q, k, v, row_ptr, col_idx, scale));
}

// ---- packed qkv: q, k, v as strided views of [B, N, 3*H*D]; out [B, N, H*D] -----------------------

at::Tensor heads_view(const at::Tensor& t, const AttentionShape& s) {
  return t.view({s.batch, s.layer.num_tokens, s.layer.num_heads, s.layer.head_dim}).permute({0, 2, 1, 3});
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> split_qkv(const at::Tensor& qkv, const AttentionShape& s) {
  const at::Tensor t =
      qkv.view({s.batch, s.layer.num_tokens, 3, s.layer.num_heads, s.layer.head_dim}).permute({2, 0, 3, 1, 4});
  return {t[0], t[1], t[2]};
}

at::Tensor qkv_as_storage(const at::Tensor& qkv, at::ScalarType st) {
  at::Tensor c = qkv.scalar_type() == st ? qkv : qkv.to(st);
  if (c.stride(2) != 1) c = c.contiguous();
  return c;
}

std::tuple<at::Tensor, at::Tensor> sparse_attention_qkv_forward_cuda(const at::Tensor& qkv, int64_t num_heads,
                                                                     const at::Tensor& row_ptr,
                                                                     const at::Tensor& col_idx, double scale) {
  const AttentionShape s = check_qkv_inputs(kQkvForwardOp, qkv, num_heads, row_ptr, col_idx);
  check_cuda_inputs(kQkvForwardOp, qkv, s);
  const c10::cuda::CUDAGuard guard(qkv.device());
  const auto d = device_csr(kQkvForwardOp, row_ptr, col_idx, s, qkv.device());
  const at::ScalarType st = storage_type(qkv.scalar_type());
  const at::Tensor qkvc = qkv_as_storage(qkv, st);
  const auto [q, k, v] = split_qkv(qkvc, s);
  at::Tensor out = at::empty({s.batch, s.layer.num_tokens, s.layer.num_heads * s.layer.head_dim}, qkvc.options());
  at::Tensor lse =
      at::empty({s.batch, s.layer.num_heads, s.layer.num_tokens}, qkvc.options().dtype(compute_type(st)));
  run_forward(kQkvForwardOp, s, *d, q, k, v, heads_view(out, s), lse, scale);
  if (qkv.scalar_type() != st) out = out.to(qkv.scalar_type());
  return {out, lse};
}

at::Tensor sparse_attention_qkv_backward_cuda(const at::Tensor& grad_out, const at::Tensor& qkv,
                                              const at::Tensor& out, const at::Tensor& lse, int64_t num_heads,
                                              const at::Tensor& row_ptr, const at::Tensor& col_idx, double scale) {
  const AttentionShape s = check_qkv_inputs(kQkvBackwardOp, qkv, num_heads, row_ptr, col_idx);
  check_cuda_inputs(kQkvBackwardOp, qkv, s);
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
  const c10::cuda::CUDAGuard guard(qkv.device());
  const auto d = device_csr(kQkvBackwardOp, row_ptr, col_idx, s, qkv.device());
  const at::ScalarType st = storage_type(qkv.scalar_type());
  const at::Tensor qkvc = qkv_as_storage(qkv, st);
  const auto [q, k, v] = split_qkv(qkvc, s);
  const at::Tensor oc = as_storage(heads_view(out, s), st), goc = as_storage(heads_view(grad_out, s), st);
  const at::Tensor lc = lse.to(compute_type(st)).contiguous();
  at::Tensor dqkv = at::empty({s.batch, s.layer.num_tokens, 3 * s.layer.num_heads * s.layer.head_dim}, qkvc.options());
  const auto [dq, dk, dv] = split_qkv(dqkv, s);
  run_backward(kQkvBackwardOp, s, *d, goc, q, k, v, oc, lc, dq, dk, dv, scale);
  if (qkv.scalar_type() != st) dqkv = dqkv.to(qkv.scalar_type());
  return dqkv;
}

at::Tensor sparse_attention_qkv_cuda(const at::Tensor& qkv, int64_t num_heads, const at::Tensor& row_ptr,
                                    const at::Tensor& col_idx, double scale) {
  return std::get<0>(sparse_attention_qkv_forward_cuda(qkv, num_heads, row_ptr, col_idx, scale));
}

}  // namespace

TORCH_LIBRARY_IMPL(sparsevit, CUDA, m) {
  m.impl("_sparse_attention_forward", TORCH_FN(sparse_attention_forward_cuda));
  m.impl("_sparse_attention_backward", TORCH_FN(sparse_attention_backward_cuda));
  m.impl("sparse_attention", TORCH_FN(sparse_attention_cuda));
  m.impl("_sparse_attention_qkv_forward", TORCH_FN(sparse_attention_qkv_forward_cuda));
  m.impl("_sparse_attention_qkv_backward", TORCH_FN(sparse_attention_qkv_backward_cuda));
  m.impl("sparse_attention_qkv", TORCH_FN(sparse_attention_qkv_cuda));
}

}  // namespace sparsevit::ops
