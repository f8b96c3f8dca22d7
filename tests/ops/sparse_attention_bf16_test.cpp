// bfloat16 read and written natively by the CPU kernels (float32 arithmetic, round-to-nearest-even
// bf16 outputs, float32 lse): against the float64 reference on the same bf16 values, against the
// float32 conversion path (inputs to float32, outputs back to bf16: the operator before the native
// path), with no float32 copies of the inputs (allocation count, NaN-padded views), every compiled
// instruction set called directly (general and structured kernels), the packed and the unpacked
// op, and bit-identical across thread counts.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/InferenceMode.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "benchmarks/cpu_memory_tracker.h"
#include "ops/cpu/sparse_attention_cpu_kernels.h"
#include "ops/sparse_attention.h"
#include "ops/sparse_attention_inputs.h"
#include "ops_test_helpers.h"

namespace sparsevit::ops::testing {
namespace {

// Forces the general kernels while alive.



at::Tensor randn_bf16(at::IntArrayRef shape) { return at::randn(shape).to(at::kBFloat16); }

// |a - b| <= 1 bf16 ulp of the larger magnitude (both bf16), and how many elements differ at all.
::testing::AssertionResult within_one_ulp(const at::Tensor& a, const at::Tensor& b, const std::string& what,
                                          int64_t* differing = nullptr) {
  if (a.scalar_type() != at::kBFloat16 || b.scalar_type() != at::kBFloat16)
    return ::testing::AssertionFailure() << what << ": not bfloat16";
  if (a.sizes() != b.sizes()) return ::testing::AssertionFailure() << what << ": shapes differ";
  const at::Tensor x = a.to(at::kDouble).flatten(), y = b.to(at::kDouble).flatten();
  const at::Tensor m = at::maximum(x.abs(), y.abs());
  // bf16 has 8 significant bits: ulp(m) = 2^(floor(log2 m) - 7); at least the smallest normal's ulp.
  const at::Tensor ulp = at::pow(2.0, at::floor(at::log2(at::clamp_min(m, 1.1754943508222875e-38))) - 7);
  const at::Tensor excess = (x - y).abs() - ulp;
  if (differing) *differing = (x != y).sum().item<int64_t>();
  if (!x.isfinite().all().item<bool>() || !y.isfinite().all().item<bool>())
    return ::testing::AssertionFailure() << what << ": non-finite values";
  if (excess.numel() && excess.max().item<double>() > 0) {
    const int64_t i = excess.argmax().item<int64_t>();
    return ::testing::AssertionFailure() << what << ": element " << i << " " << x[i].item<double>() << " vs "
                                         << y[i].item<double>() << " differ by more than 1 bf16 ulp";
  }
  return ::testing::AssertionSuccess();
}

// The conversion path the operator used before, through its private forward and backward ops:
// bf16 inputs converted to float32, float32 kernels, outputs rounded to bf16; the backward reads
// the saved bf16 output (converted), as autograd saved it.
Result run_converted(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const Csr& csr, double scale,
                     const at::Tensor& go) {
  using T = const at::Tensor&;
  static auto fwd = c10::Dispatcher::singleton()
                        .findSchemaOrThrow("sparsevit::_sparse_attention_forward", "")
                        .typed<std::tuple<at::Tensor, at::Tensor>(T, T, T, T, T, double)>();
  static auto bwd = c10::Dispatcher::singleton()
                        .findSchemaOrThrow("sparsevit::_sparse_attention_backward", "")
                        .typed<std::tuple<at::Tensor, at::Tensor, at::Tensor>(T, T, T, T, T, T, T, T, double)>();
  const at::Tensor qf = q.to(at::kFloat), kf = k.to(at::kFloat), vf = v.to(at::kFloat);
  const auto [out_f, lse] = fwd.call(qf, kf, vf, csr.row_ptr, csr.col_idx, scale);
  const at::Tensor out = out_f.to(at::kBFloat16);
  const auto [dq, dk, dv] =
      bwd.call(go.to(at::kBFloat16).to(at::kFloat), qf, kf, vf, out.to(at::kFloat), lse, csr.row_ptr, csr.col_idx,
               scale);
  return {out, dq.to(at::kBFloat16), dk.to(at::kBFloat16), dv.to(at::kBFloat16)};
}

// Tolerances of the native bf16 path against the float64 reference on the same bf16 inputs. out
// and dV: the float32 arithmetic adds ~1e-6, what remains is the final rounding to bf16 (relative
// 2^-9 = 0.2%): 1e-2, tighter than the suite's bf16 forward tolerance (2e-2). dQ and dK: the
// backward reads the operator's saved output, which is bf16 (in the conversion path too), and
// dS = P (dP - dO.O) cancels, so O's rounding reaches them amplified (observed up to ~0.06
// absolute on O(1) values): the suite's bf16 gradient tolerance, 5e-2 / 5e-2. The float64 reference
// itself keeps O in float64. Both paths agree to 1 bf16 ulp (see within_one_ulp below).
constexpr double kBf16Rtol = 1e-2, kBf16Atol = 1e-2;
constexpr double kBf16GradRtol = 5e-2, kBf16GradAtol = 5e-2;

void expect_native_case(const std::string& what, const Csr& csr, int64_t B, int64_t N, int64_t D, double scale) {
  const int64_t H = csr.row_ptr.size(0);
  const at::Tensor q = randn_bf16({B, H, N, D}), k = randn_bf16({B, H, N, D}), v = randn_bf16({B, H, N, D}),
                   go = randn_bf16({B, H, N, D});
  const Result r = run_op(q, k, v, csr, scale, go);
  EXPECT_EQ(r.out.scalar_type(), at::kBFloat16) << what;
  EXPECT_EQ(r.dq.scalar_type(), at::kBFloat16) << what;
  EXPECT_EQ(r.dk.scalar_type(), at::kBFloat16) << what;
  EXPECT_EQ(r.dv.scalar_type(), at::kBFloat16) << what;
  const Result want = run_reference(q, k, v, csr, scale, go);
  EXPECT_TRUE(all_close(r.out, want.out, kBf16Rtol, kBf16Atol, what + " out"));
  EXPECT_TRUE(all_close(r.dq, want.dq, kBf16GradRtol, kBf16GradAtol, what + " dq"));
  EXPECT_TRUE(all_close(r.dk, want.dk, kBf16GradRtol, kBf16GradAtol, what + " dk"));
  EXPECT_TRUE(all_close(r.dv, want.dv, kBf16Rtol, kBf16Atol, what + " dv"));
  // The same float32 numbers rounded once to bf16 either way: within 1 ulp (in practice equal).
  const Result c = run_converted(q, k, v, csr, scale, go);
  int64_t n_out = 0, n_dq = 0, n_dk = 0, n_dv = 0;
  EXPECT_TRUE(within_one_ulp(r.out, c.out, what + " out vs conversion path", &n_out));
  EXPECT_TRUE(within_one_ulp(r.dq, c.dq, what + " dq vs conversion path", &n_dq));
  EXPECT_TRUE(within_one_ulp(r.dk, c.dk, what + " dk vs conversion path", &n_dk));
  EXPECT_TRUE(within_one_ulp(r.dv, c.dv, what + " dv vs conversion path", &n_dv));
  if (n_out + n_dq + n_dk + n_dv > 0) {
    std::cout << "[   info   ] " << what << ": elements differing from the conversion path (<= 1 ulp): out "
              << n_out << " dq " << n_dq << " dk " << n_dk << " dv " << n_dv << "\n";
  }
}

TEST(SparseAttentionBf16, NativeMatchesReferenceAndConversionPath) {
  at::manual_seed(71);
  for (const int64_t D : {16, 32, 64, 128}) {
    const std::string d = " D=" + std::to_string(D);
    // Short rows (row blocks) and rows longer than a block's 64 keys (per-row kernel).
    expect_native_case("general short rows" + d, random_csr(3, 41, 1, 12, 710), 2, 41, D, 0.3);
    expect_native_case("general long rows" + d, random_csr(2, 100, 1, 90, 711), 1, 100, D, 0.2);
    // Empty rows: zero output and gradients.
    expect_native_case("general empty rows" + d, random_csr(2, 20, 0, 3, 712), 2, 20, D, 0.5);
    const Csr diag = diagonal_csr(43, {{0, 1, 5}, {2, 9}}, {{0, 7, 30}, {12}});
    ASSERT_TRUE(structured(diag, 2, 43, D));
    expect_native_case("structured" + d, diag, 2, 43, D, 0.3);
    GeneralKernelOnly general;
    expect_native_case("structured pattern, general kernel" + d, diag, 2, 43, D, 0.3);
  }
  // A head size without a compiled kernel (D = 24) still takes the conversion path: same checks.
  expect_native_case("general D=24 (conversion path)", random_csr(2, 30, 1, 10, 713), 2, 30, 24, 0.3);
}

// Round to nearest even on ties, NaN stays NaN: two keys with equal scores average two adjacent
// bf16 values exactly half-way; truncation (or round-half-up) would give a different bf16.
TEST(SparseAttentionBf16, OutputsRoundToNearestEvenAndKeepNaN) {
  for (const bool diagonal : {false, true}) {
    const int64_t N = 2, D = 16;
    // Every row attends to both tokens (offsets 0 and 1 on N = 2).
    const Csr csr = diagonal_csr(N, {{0, 1}}, {{}});
    const at::Tensor q = at::zeros({1, 1, N, D}, at::kBFloat16), k = q.clone();
    at::Tensor v = at::empty({1, 1, N, D}, at::kFloat);
    const float u = std::ldexp(1.0f, -7);  // bf16 ulp at 1
    // Column 0: mean 1 + u/2 -> 1 (even); column 1: mean 1 + 1.5u -> 1 + 2u (even);
    // column 2: mean -(1 + 1.5u) -> -(1 + 2u); column 3: NaN.
    v.select(3, 0).select(2, 0).fill_(1.0f);
    v.select(3, 0).select(2, 1).fill_(1.0f + u);
    v.select(3, 1).select(2, 0).fill_(1.0f + u);
    v.select(3, 1).select(2, 1).fill_(1.0f + 2 * u);
    v.select(3, 2).select(2, 0).fill_(-(1.0f + u));
    v.select(3, 2).select(2, 1).fill_(-(1.0f + 2 * u));
    v.select(3, 3).select(2, 0).fill_(std::numeric_limits<float>::quiet_NaN());
    v.narrow(3, 4, D - 4).fill_(0.5f);
    const at::Tensor vb = v.to(at::kBFloat16);
    ASSERT_TRUE(at::equal(vb.to(at::kFloat).isnan(), v.isnan()));
    ASSERT_TRUE(structured(csr, 1, N, D));
    std::optional<GeneralKernelOnly> general;
    if (!diagonal) general.emplace();
    const at::Tensor out = sparse_attention(q, k, vb, csr.row_ptr, csr.col_idx, 1.0).to(at::kFloat);
    const std::string what = diagonal ? "structured" : "general";
    for (int64_t j = 0; j < N; ++j) {
      EXPECT_EQ(out[0][0][j][0].item<float>(), 1.0f) << what;
      EXPECT_EQ(out[0][0][j][1].item<float>(), 1.0f + 2 * u) << what;
      EXPECT_EQ(out[0][0][j][2].item<float>(), -(1.0f + 2 * u)) << what;
      EXPECT_TRUE(std::isnan(out[0][0][j][3].item<float>())) << what;
      EXPECT_EQ(out[0][0][j][4].item<float>(), 0.5f) << what;
    }
  }
}

// The forward allocates its bf16 output and float32 lse, not float32 copies of q, k, v: the peak
// extra bytes (LibTorch's CPU allocator, wrapped) with bf16 inputs, against float16 inputs (which
// are still converted: the same measurement must see the three copies there).
TEST(SparseAttentionBf16, NoFloat32CopiesOfTheInputs) {
  using benchmarks::CpuMemoryTracker;
  CpuMemoryTracker::install();
  at::manual_seed(72);
  const int64_t B = 2, H = 3, N = 64, D = 64;
  const Csr csr = random_csr(H, N, 2, 20, 720);
  const int64_t elems = B * H * N * D;
  auto extra_bytes = [&](at::ScalarType dtype, bool packed) {
    c10::InferenceMode guard;
    const at::Tensor qkv = at::randn({B, N, 3 * H * D}).to(dtype);
    const at::Tensor q = at::randn({B, H, N, D}).to(dtype), k = at::randn({B, H, N, D}).to(dtype),
                     v = at::randn({B, H, N, D}).to(dtype);
    auto call = [&] {
      return packed ? sparse_attention_qkv(qkv, H, csr.row_ptr, csr.col_idx, 0.125)
                    : sparse_attention(q, k, v, csr.row_ptr, csr.col_idx, 0.125);
    };
    call();  // prepares and caches the pattern's indices
    const int64_t baseline = CpuMemoryTracker::current_bytes();
    CpuMemoryTracker::reset_peak();
    const at::Tensor out = call();
    EXPECT_EQ(out.scalar_type(), dtype);
    return CpuMemoryTracker::peak_bytes() - baseline;
  };
  const int64_t out_lse = elems * 2 + B * H * N * 4;  // bf16 out + float32 lse
  for (const bool packed : {false, true}) {
    const std::string what = packed ? "packed" : "unpacked";
    const int64_t bf16 = extra_bytes(at::kBFloat16, packed), half = extra_bytes(at::kHalf, packed);
    std::cout << "[   info   ] " << what << " forward extra bytes: bf16 " << bf16 << " (out + lse " << out_lse
              << "), float16 " << half << "\n";
    EXPECT_LE(bf16, out_lse + 4096) << what;
    EXPECT_GE(bf16, out_lse) << what;
    // float16: three float32 input copies (12 bytes per element) on top.
    EXPECT_GE(half, out_lse + 3 * elems * 4) << what;
  }
}

// NaN-padded strided bf16 views, packed and unpacked: nothing outside the views is read (a read
// past a row, or a bf16 load of the wrong width, would surface as NaN), and the views are read in
// place (equal to the same values made contiguous).
TEST(SparseAttentionBf16, NanPaddedStridedViews) {
  at::manual_seed(73);
  const int64_t B = 2, H = 2, N = 43, D = 32;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (const bool diagonal : {true, false}) {
    const Csr csr = diagonal ? diagonal_csr(N, {{0, 1, 5}, {2, 9}}, {{0, 7, 30}, {12}}) : random_csr(H, N, 1, 70, 730);
    const std::string what = diagonal ? "structured" : "general";
    ASSERT_EQ(structured(csr, B, N, D), diagonal);
    // Packed: qkv [B, N, 3*H*D] inside a NaN-filled buffer.
    at::Tensor big = at::full({B + 1, N + 2, 3 * H * D + 8}, nan, at::kBFloat16);
    at::Tensor qkv = big.narrow(0, 1, B).narrow(1, 1, N).narrow(2, 8, 3 * H * D);
    qkv.copy_(randn_bf16({B, N, 3 * H * D}));
    at::Tensor gbig = at::full({B, N + 1, H * D + 8}, nan, at::kBFloat16);
    at::Tensor go = gbig.narrow(1, 1, N).narrow(2, 8, H * D);
    go.copy_(randn_bf16({B, N, H * D}));
    auto run_packed = [&](const at::Tensor& x, const at::Tensor& g) {
      const at::Tensor leaf = x.detach().requires_grad_(true);
      const at::Tensor out = sparse_attention_qkv(leaf, H, csr.row_ptr, csr.col_idx, 0.2);
      const at::Tensor d = torch::autograd::grad({out}, {leaf}, {g})[0];
      return std::make_pair(out.detach(), d);
    };
    const auto a = run_packed(qkv, go);
    const auto b = run_packed(qkv.contiguous(), go.contiguous());
    EXPECT_EQ(a.first.scalar_type(), at::kBFloat16);
    EXPECT_EQ(a.second.scalar_type(), at::kBFloat16);
    EXPECT_TRUE(a.first.isfinite().all().item<bool>()) << what;
    EXPECT_TRUE(a.second.isfinite().all().item<bool>()) << what;
    EXPECT_TRUE(at::equal(a.first, b.first)) << what << " packed out";
    EXPECT_TRUE(at::equal(a.second, b.second)) << what << " packed dqkv";
    // Against the float64 reference on the same bf16 values.
    const at::Tensor t = qkv.reshape({B, N, 3, H, D}).permute({2, 0, 3, 1, 4});
    const at::Tensor go4 = go.reshape({B, N, H, D}).transpose(1, 2);
    const Result want = run_reference(t[0], t[1], t[2], csr, 0.2, go4);
    EXPECT_TRUE(all_close(a.first.reshape({B, N, H, D}).transpose(1, 2), want.out, kBf16Rtol, kBf16Atol,
                          what + " packed out vs reference"));
    const at::Tensor dt = a.second.reshape({B, N, 3, H, D}).permute({2, 0, 3, 1, 4});
    EXPECT_TRUE(all_close(dt[0], want.dq, kBf16GradRtol, kBf16GradAtol, what + " packed dq vs reference"));
    EXPECT_TRUE(all_close(dt[1], want.dk, kBf16GradRtol, kBf16GradAtol, what + " packed dk vs reference"));
    EXPECT_TRUE(all_close(dt[2], want.dv, kBf16Rtol, kBf16Atol, what + " packed dv vs reference"));
    // Unpacked: [B, H, N, D] views of a NaN-padded [B, N, H, D + 8] buffer (rows strided).
    at::Tensor ubig = at::full({3, B, N, H, D + 8}, nan, at::kBFloat16);
    at::Tensor views = ubig.narrow(4, 3, D);
    views.copy_(randn_bf16({3, B, N, H, D}));
    const at::Tensor q = views[0].transpose(1, 2), k = views[1].transpose(1, 2), v = views[2].transpose(1, 2);
    const at::Tensor gu = randn_bf16({B, H, N, D});
    const Result u = run_op(q, k, v, csr, 0.2, gu);
    const Result uc = run_op(q.contiguous(), k.contiguous(), v.contiguous(), csr, 0.2, gu);
    EXPECT_TRUE(at::equal(u.out, uc.out)) << what << " unpacked out";
    EXPECT_TRUE(at::equal(u.dq, uc.dq)) << what << " unpacked dq";
    EXPECT_TRUE(at::equal(u.dk, uc.dk)) << what << " unpacked dk";
    EXPECT_TRUE(at::equal(u.dv, uc.dv)) << what << " unpacked dv";
    EXPECT_TRUE(u.out.isfinite().all().item<bool>() && u.dq.isfinite().all().item<bool>() &&
                u.dk.isfinite().all().item<bool>() && u.dv.isfinite().all().item<bool>())
        << what;
  }
}

TEST(SparseAttentionBf16, BitIdenticalAcrossThreadCounts) {
  at::manual_seed(74);
  const int64_t H = 3, N = 197, D = 64;
  for (const bool diagonal : {true, false}) {
    const Csr csr = diagonal ? diagonal_csr(N, {{0, 1, 3, 8}, {0, 2}, {1, 5, 13}}, {{0}, {0, 100}, {}})
                             : random_csr(H, N, 1, 80, 740);
    ASSERT_EQ(structured(csr, 1, N, D), diagonal);
    // B*H = 12: one backward task per (batch, head); B*H = 3: rows split across threads.
    for (const int64_t B : {4, 1}) {
      const at::Tensor q = randn_bf16({B, H, N, D}), k = randn_bf16({B, H, N, D}), v = randn_bf16({B, H, N, D}),
                       go = randn_bf16({B, H, N, D});
      const int saved = at::get_num_threads();
      at::set_num_threads(2);
      const Result a = run_op(q, k, v, csr, 0.125, go);
      at::set_num_threads(1);
      const Result b = run_op(q, k, v, csr, 0.125, go);
      at::set_num_threads(saved);
      const std::string what = std::string(diagonal ? "structured" : "general") + " B=" + std::to_string(B);
      EXPECT_EQ(a.out.scalar_type(), at::kBFloat16) << what;
      EXPECT_TRUE(at::equal(a.out, b.out)) << what;
      EXPECT_TRUE(at::equal(a.dq, b.dq)) << what;
      EXPECT_TRUE(at::equal(a.dk, b.dk)) << what;
      EXPECT_TRUE(at::equal(a.dv, b.dv)) << what;
    }
  }
}

// ---- every compiled instruction set, called directly --------------------------------------------

// Runs one table's bf16 (or f32) kernels on dense [B, H, N, D] tensors; rows split at odd points.
template <typename S>
Result run_table(const cpu::KernelFns<float, S>& fns, bool diagonal, const at::Tensor& q, const at::Tensor& k,
                 const at::Tensor& v, const at::Tensor& go, const Csr& csr, float scale) {
  const int64_t B = q.size(0), H = q.size(1), N = q.size(2), D = q.size(3);
  const AttentionShape shape = AttentionShape::of(B, H, N, D, csr.col_idx.size(1));
  const CsrIndices ci = prepare_csr("test", csr.row_ptr, csr.col_idx, shape);
  const TransposedCsr tc = transpose_csr(ci, shape);
  const auto plan = detect_diagonal_structure(ci, shape);
  const cpu::DiagonalPlan d = diagonal ? diagonal_plan_view(*plan) : cpu::DiagonalPlan{};
  const auto fopts = at::TensorOptions().dtype(at::kFloat);
  Result r;
  r.out = at::empty_like(q);
  at::Tensor lse = at::empty({B, H, N}, fopts);
  const cpu::ForwardParams<float, S> p = forward_params_for<float, S>(q, k, v, r.out, lse, ci, shape, scale, d);
  std::vector<float> scratch(N + 64);
  auto fwd = diagonal ? fns.forward_rows_diagonal : fns.forward_rows;
  fwd(p, 0, 37, scratch.data());
  fwd(p, 37, B * H * N, scratch.data());
  r.dq = at::empty_like(q);
  r.dk = at::empty_like(q);
  r.dv = at::empty_like(q);
  at::Tensor ep = at::empty({B * H, shape.nnz_stride}, fopts), eds = at::empty({B * H, shape.nnz_stride}, fopts);
  const int64_t slots = diagonal ? plan->max_slots * N : 1;
  at::Tensor sp = at::empty({B * H, slots}, fopts), sds = at::empty({B * H, slots}, fopts);
  const cpu::BackwardParams<float, S> b = backward_params_for(p, go, r.dq, r.dk, r.dv, ep, eds, tc, sp, sds, slots);
  auto qrows = diagonal ? fns.backward_query_rows_diagonal : fns.backward_query_rows;
  auto krows = diagonal ? fns.backward_key_rows_diagonal : fns.backward_key_rows;
  qrows(b, 0, 29);
  qrows(b, 29, B * H * N);
  krows(b, 0, 53);
  krows(b, 53, B * H * N);
  return r;
}

TEST(SparseAttentionBf16, EveryCompiledInstructionSetGeneralAndStructured) {
  at::manual_seed(75);
  const std::vector<const cpu::KernelTable*> tables = compiled_kernel_tables();
  std::cout << "[   info   ] instruction sets checked: " << tables.size() << "\n";
  const int64_t B = 2, H = 2, N = 43;
  for (const bool diagonal : {false, true}) {
    const Csr csr = diagonal ? diagonal_csr(N, {{0, 1, 5, 20}, {2, 9}}, {{0, 7, 30}, {12}})
                             : random_csr(H, N, 0, 43, 750);  // empty and short rows
    for (const int64_t D : {16, 32, 64, 128}) {
      const at::Tensor q = randn_bf16({B, H, N, D}), k = randn_bf16({B, H, N, D}), v = randn_bf16({B, H, N, D}),
                       go = randn_bf16({B, H, N, D});
      const Result want = run_reference(q, k, v, csr, 0.3, go);
      const at::Tensor qf = q.to(at::kFloat), kf = k.to(at::kFloat), vf = v.to(at::kFloat), gof = go.to(at::kFloat);
      for (const cpu::KernelTable* t : tables) {
        const std::string what = std::string(t->isa) + (diagonal ? " structured" : " general") +
                                 " D=" + std::to_string(D);
        const Result r = run_table<cpu::BFloat16Bits>(t->bf16, diagonal, q, k, v, go, csr, 0.3f);
        EXPECT_TRUE(all_close(r.out, want.out, kBf16Rtol, kBf16Atol, what + " out"));
        EXPECT_TRUE(all_close(r.dq, want.dq, kBf16GradRtol, kBf16GradAtol, what + " dq"));
        EXPECT_TRUE(all_close(r.dk, want.dk, kBf16GradRtol, kBf16GradAtol, what + " dk"));
        EXPECT_TRUE(all_close(r.dv, want.dv, kBf16Rtol, kBf16Atol, what + " dv"));
        // The same table's float32 kernels on the widened inputs, rounded once to bf16: out and dV
        // (which does not read out) within 1 ulp. (dQ, dK read out, bf16 here and float32 there;
        // the op-level test compares them with the conversion path, which reads the bf16 out.)
        const Result f = run_table<float>(t->f32, diagonal, qf, kf, vf, gof, csr, 0.3f);
        EXPECT_TRUE(within_one_ulp(r.out, f.out.to(at::kBFloat16), what + " out vs float32 kernels"));
        EXPECT_TRUE(within_one_ulp(r.dv, f.dv.to(at::kBFloat16), what + " dv vs float32 kernels"));
      }
    }
  }
}

}  // namespace
}  // namespace sparsevit::ops::testing
