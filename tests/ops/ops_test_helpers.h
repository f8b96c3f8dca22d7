// Shared helpers of the operator tests: random CSR patterns, the float64 reference with its
// gradients, tolerance checks that print the worst element, error-message checks, and the
// parameters of direct calls to the plain-pointer CPU kernels.
#pragma once

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <random>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include "ops/cpu/sparse_attention_cpu_kernels.h"
#include "ops/masked_attention_reference.h"
#include "ops/sparse_attention.h"
#include "ops/sparse_attention_inputs.h"

namespace sparsevit::ops::testing {

struct Csr {
  at::Tensor row_ptr;  // [H, N+1]
  at::Tensor col_idx;  // [H, nnz_max]
};

// Random pattern, different per head: each row gets a random number of distinct keys in
// [min_keys, max_keys] (clamped to N), in random order when `shuffle_keys`. Padding entries of
// col_idx hold an out-of-range token (N + 7) so a kernel that reads past a row's end fails loudly.
inline Csr random_csr(int64_t H, int64_t N, int64_t min_keys, int64_t max_keys, uint64_t seed,
                      at::ScalarType index_type = at::kInt, bool shuffle_keys = false) {
  std::mt19937_64 rng(seed);
  std::vector<std::vector<int64_t>> rows_ptr(H), cols(H);
  int64_t nnz_max = 0;
  std::vector<int64_t> perm(N);
  for (int64_t h = 0; h < H; ++h) {
    rows_ptr[h].push_back(0);
    for (int64_t j = 0; j < N; ++j) {
      const int64_t lo = std::min(min_keys, N), hi = std::min(max_keys, N);
      const int64_t n = lo + static_cast<int64_t>(rng() % static_cast<uint64_t>(hi - lo + 1));
      for (int64_t i = 0; i < N; ++i) perm[i] = i;
      for (int64_t i = 0; i < n; ++i) std::swap(perm[i], perm[i + static_cast<int64_t>(rng() % (N - i))]);
      std::vector<int64_t> keys(perm.begin(), perm.begin() + n);
      if (!shuffle_keys) std::sort(keys.begin(), keys.end());
      cols[h].insert(cols[h].end(), keys.begin(), keys.end());
      rows_ptr[h].push_back(static_cast<int64_t>(cols[h].size()));
    }
    nnz_max = std::max<int64_t>(nnz_max, static_cast<int64_t>(cols[h].size()));
  }
  const int64_t stride = nnz_max + 3;  // extra padding on every head
  Csr csr;
  csr.row_ptr = at::empty({H, N + 1}, at::kLong);
  csr.col_idx = at::full({H, stride}, N + 7, at::kLong);
  for (int64_t h = 0; h < H; ++h) {
    for (int64_t j = 0; j <= N; ++j) csr.row_ptr[h][j] = rows_ptr[h][j];
    for (size_t e = 0; e < cols[h].size(); ++e) csr.col_idx[h][static_cast<int64_t>(e)] = cols[h][e];
  }
  csr.row_ptr = csr.row_ptr.to(index_type);
  csr.col_idx = csr.col_idx.to(index_type);
  return csr;
}

struct Result {
  at::Tensor out, dq, dk, dv;
};

// Output and gradients of sum(out * grad_out) for the operator (inputs of dtype `dtype`).
inline Result run_op(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const Csr& csr, double scale,
                     const at::Tensor& grad_out) {
  auto qg = q.detach().clone().requires_grad_(true);
  auto kg = k.detach().clone().requires_grad_(true);
  auto vg = v.detach().clone().requires_grad_(true);
  Result r;
  r.out = sparse_attention(qg, kg, vg, csr.row_ptr, csr.col_idx, scale);
  auto grads = torch::autograd::grad({r.out}, {qg, kg, vg}, {grad_out.to(r.out.scalar_type())});
  r.dq = grads[0];
  r.dk = grads[1];
  r.dv = grads[2];
  r.out = r.out.detach();
  return r;
}

// The float64 dense masked reference and its autograd gradients.
inline Result run_reference(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const Csr& csr,
                            double scale, const at::Tensor& grad_out) {
  auto qg = q.detach().to(at::kDouble).requires_grad_(true);
  auto kg = k.detach().to(at::kDouble).requires_grad_(true);
  auto vg = v.detach().to(at::kDouble).requires_grad_(true);
  Result r;
  r.out = masked_attention_reference(qg, kg, vg, csr.row_ptr, csr.col_idx, scale);
  auto grads = torch::autograd::grad({r.out}, {qg, kg, vg}, {grad_out.to(at::kDouble)});
  r.dq = grads[0];
  r.dk = grads[1];
  r.dv = grads[2];
  r.out = r.out.detach();
  return r;
}

// |got - want| <= atol + rtol * |want| everywhere; on failure names the worst element.
inline ::testing::AssertionResult all_close(const at::Tensor& got, const at::Tensor& want, double rtol, double atol,
                                            const std::string& what) {
  if (got.sizes() != want.sizes()) {
    return ::testing::AssertionFailure() << what << ": shape " << got.sizes() << " != " << want.sizes();
  }
  const at::Tensor g = got.to(at::kDouble), w = want.to(at::kDouble);
  if (!g.isfinite().all().item<bool>()) return ::testing::AssertionFailure() << what << ": non-finite values";
  const at::Tensor excess = (g - w).abs() - (atol + rtol * w.abs());
  const double worst = excess.numel() ? excess.max().item<double>() : -1.0;
  if (worst > 0) {
    const int64_t i = excess.flatten().argmax().item<int64_t>();
    return ::testing::AssertionFailure() << what << ": element " << i << " got " << g.flatten()[i].item<double>()
                                         << " want " << w.flatten()[i].item<double>() << " (rtol " << rtol
                                         << ", atol " << atol << ")";
  }
  return ::testing::AssertionSuccess();
}

// Tolerances, per compute dtype, against the float64 reference with O(1) inputs (randn).
struct Tolerance {
  double rtol, atol;
};
inline Tolerance forward_tolerance(at::ScalarType t) {
  if (t == at::kDouble) return {1e-10, 1e-12};
  if (t == at::kBFloat16) return {2e-2, 2e-2};
  return {1e-4, 1e-5};  // float32: accumulation over <= N keys, ~2 ulp exp
}
inline Tolerance grad_tolerance(at::ScalarType t) {
  if (t == at::kDouble) return {1e-9, 1e-11};
  if (t == at::kBFloat16) return {5e-2, 5e-2};
  return {1e-3, 1e-4};
}

inline ::testing::AssertionResult matches_reference(const Result& got, const Result& want, at::ScalarType t,
                                                    const std::string& what) {
  const Tolerance f = forward_tolerance(t), g = grad_tolerance(t);
  auto r = all_close(got.out, want.out, f.rtol, f.atol, what + " out");
  if (!r) return r;
  r = all_close(got.dq, want.dq, g.rtol, g.atol, what + " dq");
  if (!r) return r;
  r = all_close(got.dk, want.dk, g.rtol, g.atol, what + " dk");
  if (!r) return r;
  return all_close(got.dv, want.dv, g.rtol, g.atol, what + " dv");
}

// Per head: keys {k : |j-k| in offsets} U globals for non-global rows, all keys for global rows.
inline Csr diagonal_csr(int64_t N, const std::vector<std::vector<int32_t>>& offsets,
                 const std::vector<std::vector<int32_t>>& globals) {
  const int64_t H = static_cast<int64_t>(offsets.size());
  std::vector<std::vector<int32_t>> cols(H);
  at::Tensor rp = at::zeros({H, N + 1}, at::kInt);
  for (int64_t h = 0; h < H; ++h) {
    const std::set<int32_t> g(globals[h].begin(), globals[h].end());
    for (int64_t j = 0; j < N; ++j) {
      for (int64_t k = 0; k < N; ++k) {
        bool on = g.count(static_cast<int32_t>(j)) || g.count(static_cast<int32_t>(k));
        for (const int32_t o : offsets[h]) on = on || std::abs(j - k) == o;
        if (on) cols[h].push_back(static_cast<int32_t>(k));
      }
      rp[h][j + 1] = static_cast<int32_t>(cols[h].size());
    }
  }
  int64_t nnz = 1;
  for (const auto& c : cols) nnz = std::max<int64_t>(nnz, static_cast<int64_t>(c.size()));
  at::Tensor ci = at::full({H, nnz}, static_cast<int32_t>(N + 7), at::kInt);
  for (int64_t h = 0; h < H; ++h)
    for (size_t e = 0; e < cols[h].size(); ++e) ci[h][static_cast<int64_t>(e)] = cols[h][e];
  return {rp, ci};
}

// Whether the operator runs this pattern with the structured (diagonal) kernels.
inline bool structured(const Csr& csr, int64_t B, int64_t N, int64_t D) {
  const AttentionShape shape = AttentionShape::of(B, csr.row_ptr.size(0), N, D, csr.col_idx.size(1));
  return prepared_csr("test", csr.row_ptr, csr.col_idx, shape)->diagonal.has_value();
}

// Central finite differences of `loss` (a float64 scalar of the current values of `input`) for
// every element of `input`, compared with `grad` (its analytic gradient, same shape).
inline void expect_matches_finite_differences(const at::Tensor& input, const at::Tensor& grad,
                                              const std::function<double()>& loss, const std::string& what) {
  const double eps = 1e-6;
  at::Tensor flat = input.view({-1});
  const at::Tensor g = grad.reshape({-1});
  for (int64_t i = 0; i < flat.numel(); ++i) {
    const double x0 = flat[i].item<double>();
    flat[i] = x0 + eps;
    const double up = loss();
    flat[i] = x0 - eps;
    const double down = loss();
    flat[i] = x0;
    const double numeric = (up - down) / (2 * eps);
    EXPECT_NEAR(g[i].item<double>(), numeric, 1e-7 + 1e-6 * std::abs(numeric)) << what << " elem " << i;
  }
}

// Expects `f` to throw a c10::Error whose message contains `fragment`.
inline void expect_error(const std::function<void()>& f, const std::string& fragment) {
  try {
    f();
    ADD_FAILURE() << "expected an error containing '" << fragment << "'";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

// ---- direct calls of the plain-pointer CPU kernels -------------------------------------------

// The kernel table of every instruction set this CPU runs: the dispatcher only ever uses the
// widest, so the tests call each one directly.
inline std::vector<const cpu::KernelTable*> compiled_kernel_tables() {
  std::vector<const cpu::KernelTable*> tables = {&cpu::kernel_table_default()};
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) tables.push_back(&cpu::kernel_table_avx2());
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("fma")) {
    tables.push_back(&cpu::kernel_table_avx512());
  }
  return tables;
}

// `t`'s data as the kernels' storage type S: float, double, or the raw bits of a bfloat16 tensor
// (the dtype is checked in every case).
template <typename S>
S* storage_ptr(const at::Tensor& t) {
  if constexpr (std::is_same_v<S, cpu::BFloat16Bits>) {
    TORCH_CHECK(t.scalar_type() == at::kBFloat16, "expected a bfloat16 tensor, got ", t.scalar_type());
    return static_cast<S*>(t.data_ptr());
  } else {
    return t.data_ptr<S>();
  }
}

// The plain-pointer view of a detected diagonal structure (valid while `plan` lives).
inline cpu::DiagonalPlan diagonal_plan_view(const DiagonalPlanTensors& plan) {
  cpu::DiagonalPlan d;
  d.delta_ptr = plan.delta_ptr.data_ptr<int32_t>();
  d.deltas = plan.deltas.data_ptr<int32_t>();
  d.global_ptr = plan.global_ptr.data_ptr<int32_t>();
  d.globals = plan.globals.data_ptr<int32_t>();
  d.is_global = plan.is_global.data_ptr<uint8_t>();
  d.global_pos = plan.global_pos.data_ptr<int32_t>();
  return d;
}

// Forward parameters over contiguous [B, H, N, D] tensors q, k, v and out (storage S), lse
// [B, H, N] (compute type T) and the prepared CSR `ci` of `shape`; `diag` only matters to the
// *_diagonal kernels. The tensors must outlive the parameters.
template <typename T, typename S = T>
cpu::ForwardParams<T, S> forward_params_for(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                            const at::Tensor& out, const at::Tensor& lse, const CsrIndices& ci,
                                            const AttentionShape& shape, T scale, const cpu::DiagonalPlan& diag = {}) {
  const int64_t H = shape.layer.num_heads, N = shape.layer.num_tokens, D = shape.layer.head_dim;
  using In = cpu::TokenTensor<const S>;
  cpu::ForwardParams<T, S> p;
  p.q = In::dense(storage_ptr<S>(q), H, N, D);
  p.k = In::dense(storage_ptr<S>(k), H, N, D);
  p.v = In::dense(storage_ptr<S>(v), H, N, D);
  p.out = cpu::TokenTensor<S>::dense(storage_ptr<S>(out), H, N, D);
  p.lse = lse.data_ptr<T>();
  p.row_ptr = ci.row_ptr.data_ptr<int32_t>();
  p.col_idx = ci.col_idx.data_ptr<int32_t>();
  p.heads = H;
  p.tokens = N;
  p.dim = D;
  p.nnz_stride = shape.nnz_stride;
  p.scale = scale;
  p.diag = diag;
  return p;
}

// Backward parameters for the forward call `p` (same q, k, v, out, lse, CSR, diagonal plan and
// scale): grad_out and the gradients dq, dk, dv (storage S, [B, H, N, D]), the per-edge
// workspaces [B*H, nnz_stride] and the transposed CSR; the per-slot workspaces
// [B*H, slot_stride] only for the *_diagonal kernels (undefined: null).
template <typename T, typename S>
cpu::BackwardParams<T, S> backward_params_for(const cpu::ForwardParams<T, S>& p, const at::Tensor& grad_out,
                                              const at::Tensor& dq, const at::Tensor& dk, const at::Tensor& dv,
                                              const at::Tensor& edge_p, const at::Tensor& edge_ds,
                                              const TransposedCsr& tc, const at::Tensor& slot_p = {},
                                              const at::Tensor& slot_ds = {}, int64_t slot_stride = 0) {
  const int64_t H = p.heads, N = p.tokens, D = p.dim;
  cpu::BackwardParams<T, S> b;
  b.q = p.q;
  b.k = p.k;
  b.v = p.v;
  b.out = p.out;
  b.grad_out = cpu::TokenTensor<const S>::dense(storage_ptr<S>(grad_out), H, N, D);
  b.lse = p.lse;
  b.grad_q = cpu::TokenTensor<S>::dense(storage_ptr<S>(dq), H, N, D);
  b.grad_k = cpu::TokenTensor<S>::dense(storage_ptr<S>(dk), H, N, D);
  b.grad_v = cpu::TokenTensor<S>::dense(storage_ptr<S>(dv), H, N, D);
  b.edge_p = edge_p.data_ptr<T>();
  b.edge_ds = edge_ds.data_ptr<T>();
  b.diag = p.diag;
  b.slot_p = slot_p.defined() ? slot_p.data_ptr<T>() : nullptr;
  b.slot_ds = slot_ds.defined() ? slot_ds.data_ptr<T>() : nullptr;
  b.slot_stride = slot_stride;
  b.row_ptr = p.row_ptr;
  b.col_idx = p.col_idx;
  b.t_row_ptr = tc.row_ptr.data_ptr<int32_t>();
  b.t_query = tc.query.data_ptr<int32_t>();
  b.t_edge = tc.edge.data_ptr<int32_t>();
  b.heads = H;
  b.tokens = N;
  b.dim = D;
  b.nnz_stride = p.nnz_stride;
  b.scale = p.scale;
  return b;
}

// While alive, the operators run their general CSR kernels only (SPARSEVIT_STRUCTURED_KERNEL=0),
// so a test can compare them with the structured (diagonal) kernels on the same inputs.
struct GeneralKernelOnly {
  GeneralKernelOnly() { setenv("SPARSEVIT_STRUCTURED_KERNEL", "0", 1); }
  ~GeneralKernelOnly() { unsetenv("SPARSEVIT_STRUCTURED_KERNEL"); }
};

}  // namespace sparsevit::ops::testing
