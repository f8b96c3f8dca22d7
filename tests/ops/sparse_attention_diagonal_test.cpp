// The structured (diagonal) kernels: detection of diagonal structure from the CSR (against the
// pattern library's own structure hints), rejection of patterns that are not such unions, and the
// structured kernels against the general CSR kernels (SPARSEVIT_STRUCTURED_KERNEL=0) and the float64
// reference, forward and all three gradients; determinism across thread counts and backward
// schedules; NaN-padded strided views through the packed qkv op; finite differences.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include "ops/cpu/sparse_attention_cpu_kernels.h"
#include "ops/sparse_attention.h"
#include "ops/sparse_attention_inputs.h"
#include "ops_test_helpers.h"
#include "patterns/mask_registry.h"
#include "patterns/pattern.h"

namespace sparsevit::ops::testing {
namespace {

// Forces the general kernels while alive.

std::optional<DiagonalPlanTensors> detect(const Csr& csr, int64_t N) {
  const AttentionShape shape = AttentionShape::of(1, csr.row_ptr.size(0), N, 16, csr.col_idx.size(1));
  return detect_diagonal_structure(prepare_csr("test", csr.row_ptr, csr.col_idx, shape), shape);
}



struct Case {
  std::string name;
  Csr csr;
  int64_t N;
};

Case library_case(const std::string& mask, int32_t N, int32_t prefix, int32_t H, int64_t layer,
                  const patterns::MaskKwargs& kw, patterns::Pattern* out = nullptr) {
  const patterns::Pattern p = patterns::build_mask(mask, patterns::MaskContext{{N, prefix, H, 64, 12}, layer}, kw);
  if (out) *out = p;
  const PatternTensors t = PatternTensors::from_pattern(p);
  return {mask + " N=" + std::to_string(N) + " prefix=" + std::to_string(prefix), {t.row_ptr, t.col_idx}, N};
}

std::vector<Case> diagonal_cases() {
  std::vector<Case> cases;
  for (const int32_t N : {50, 197}) {
    for (const int32_t prefix : {0, 1}) {
      patterns::MaskKwargs kw;
      kw.set_scalar("w_min", "5").set_scalar("w_max", std::to_string(N / 3));
      cases.push_back(library_case("fibo", N, prefix, 4, 3, kw));
    }
  }
  {
    patterns::MaskKwargs kw;
    kw.set_scalar("window", "3");
    cases.push_back(library_case("local", 50, 1, 2, 0, kw));
    patterns::MaskKwargs dil;
    dil.set_scalar("window", "2").set_scalar("dilation", "3");
    cases.push_back(library_case("local", 61, 0, 2, 0, dil));
  }
  {
    patterns::MaskKwargs kw;
    kw.set_scalar("window", "4").set_scalar("dilated_heads", "1");
    cases.push_back(library_case("longformer", 197, 1, 2, 11, kw));
  }
  // Several global tokens per head, different per head; offsets >= N/2; tiny N.
  cases.push_back({"globals {0, 7, 30}", diagonal_csr(43, {{0, 1, 5}, {2, 9}}, {{0, 7, 30}, {12}}), 43});
  cases.push_back({"offsets >= N/2", diagonal_csr(20, {{0, 11, 15}, {10, 19}}, {{}, {3}}), 20});
  cases.push_back({"N=1", diagonal_csr(1, {{0}, {0}}, {{}, {}}), 1});
  cases.push_back({"N=2", diagonal_csr(2, {{1}, {0}}, {{}, {}}), 2});
  cases.push_back({"no main diagonal, rows that are empty", diagonal_csr(30, {{25}, {29}}, {{}, {}}), 30});
  cases.push_back({"an empty head", diagonal_csr(10, {{}, {1}}, {{}, {}}), 10});
  return cases;
}

struct Both {
  Result structured, general;
};

Both run_both(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const Csr& csr, double scale,
              const at::Tensor& go) {
  Both r;
  r.structured = run_op(q, k, v, csr, scale, go);
  GeneralKernelOnly general;
  r.general = run_op(q, k, v, csr, scale, go);
  return r;
}

TEST(SparseAttentionDiagonal, DetectsTheLibrarysDiagonalStructure) {
  int checked = 0;
  for (const int32_t N : {50, 197}) {
    for (const int32_t prefix : {0, 1}) {
      patterns::MaskKwargs kw;
      kw.set_scalar("w_min", "5").set_scalar("w_max", std::to_string(N / 3));
      patterns::Pattern p;
      const Case c = library_case("fibo", N, prefix, 4, 3, kw, &p);
      const auto plan = detect(c.csr, N);
      ASSERT_TRUE(plan.has_value()) << c.name;
      const int32_t* dp = plan->delta_ptr.data_ptr<int32_t>();
      const int32_t* gp = plan->global_ptr.data_ptr<int32_t>();
      for (int32_t h = 0; h < p.num_heads(); ++h) {
        ASSERT_TRUE(p.diagonals(h).has_value());
        const auto& hint = *p.diagonals(h);
        const std::vector<int32_t> globals(plan->globals.data_ptr<int32_t>() + gp[h],
                                           plan->globals.data_ptr<int32_t>() + gp[h + 1]);
        EXPECT_EQ(globals, hint.global_tokens) << c.name << " head " << h;
        // The hint's offsets that select an edge between non-global tokens, as signed deltas.
        const std::set<int32_t> g(hint.global_tokens.begin(), hint.global_tokens.end());
        std::set<int32_t> want;
        for (const int32_t o : hint.offsets) {
          for (int32_t j = 0; j + o < N; ++j) {
            if (!g.count(j) && !g.count(j + o)) {
              want.insert(o);
              want.insert(-o);
              break;
            }
          }
        }
        const std::vector<int32_t> got(plan->deltas.data_ptr<int32_t>() + dp[h],
                                       plan->deltas.data_ptr<int32_t>() + dp[h + 1]);
        EXPECT_EQ(got, std::vector<int32_t>(want.begin(), want.end())) << c.name << " head " << h;
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, 16);
  for (const Case& c : diagonal_cases()) EXPECT_TRUE(detect(c.csr, c.N).has_value()) << c.name;
}

TEST(SparseAttentionDiagonal, RejectsPatternsThatAreNotUnionsOfDiagonals) {
  at::manual_seed(51);
  std::vector<Case> cases;
  cases.push_back({"random", random_csr(3, 40, 1, 8, 510), 40});
  {
    patterns::MaskKwargs kw;
    kw.set_scalar("window", "2").set_scalar("num_global", "2").set_scalar("random_per_query", "3");
    cases.push_back(library_case("bigbird", 50, 1, 2, 0, kw));
  }
  // A diagonal pattern with one edge removed, and one with an extra edge.
  Csr minus = diagonal_csr(20, {{0, 2}}, {{5}});
  {
    // Row 10 (keys 5, 8, 10, 12): drop its last key, 12.
    const int64_t end = minus.row_ptr[0][11].item<int64_t>();
    const at::Tensor ci = minus.col_idx.clone();
    ci[0].narrow(0, end - 1, ci.size(1) - end).copy_(minus.col_idx[0].narrow(0, end, ci.size(1) - end));
    const at::Tensor rp = minus.row_ptr.clone();
    rp[0].narrow(0, 11, 10).sub_(1);
    minus = {rp, ci};
  }
  cases.push_back({"diagonal minus one edge", minus, 20});
  // Too many deltas for one block's tile (> 64 slots).
  std::vector<int32_t> many;
  for (int32_t o = 0; o < 40; ++o) many.push_back(o);
  cases.push_back({"40 offsets", diagonal_csr(90, {many}, {{}}), 90});
  for (const Case& c : cases) {
    EXPECT_FALSE(detect(c.csr, c.N).has_value()) << c.name;
    const int64_t H = c.csr.row_ptr.size(0), B = 2, D = 64;
    const at::Tensor q = at::randn({B, H, c.N, D}, at::kDouble), k = at::randn({B, H, c.N, D}, at::kDouble),
                     v = at::randn({B, H, c.N, D}, at::kDouble), go = at::randn({B, H, c.N, D}, at::kDouble);
    EXPECT_TRUE(matches_reference(run_op(q, k, v, c.csr, 0.125, go), run_reference(q, k, v, c.csr, 0.125, go),
                                  at::kDouble, c.name));
  }
}

TEST(SparseAttentionDiagonal, StructuredKernelsMatchTheGeneralKernelsAndTheReference) {
  at::manual_seed(52);
  for (const Case& c : diagonal_cases()) {
    for (const int64_t D : {16, 64}) {
      const int64_t H = c.csr.row_ptr.size(0), B = 2;
      ASSERT_TRUE(structured(c.csr, B, c.N, D)) << c.name;
      for (const at::ScalarType dtype : {at::kFloat, at::kDouble}) {
        const auto opts = at::TensorOptions().dtype(dtype);
        const at::Tensor q = at::randn({B, H, c.N, D}, opts), k = at::randn({B, H, c.N, D}, opts),
                         v = at::randn({B, H, c.N, D}, opts), go = at::randn({B, H, c.N, D}, opts);
        const std::string what = c.name + " D=" + std::to_string(D) + " " + c10::toString(dtype);
        const Both r = run_both(q, k, v, c.csr, 0.3, go);
        // Agreement with the general kernel: float64 to 1e-10 relative; float32 forward to 1e-5
        // relative; float32 gradients to 1e-4 relative + 1e-5 absolute, since the two kernels sum in
        // different orders and dS = P (dP - dO.O) cancels (a global column sums ~N such terms).
        const double rf = dtype == at::kDouble ? 1e-10 : 1e-5, af = dtype == at::kDouble ? 1e-12 : 1e-6;
        const double rg = dtype == at::kDouble ? 1e-10 : 1e-4, ag = dtype == at::kDouble ? 1e-12 : 1e-5;
        EXPECT_TRUE(all_close(r.structured.out, r.general.out, rf, af, what + " out"));
        EXPECT_TRUE(all_close(r.structured.dq, r.general.dq, rg, ag, what + " dq"));
        EXPECT_TRUE(all_close(r.structured.dk, r.general.dk, rg, ag, what + " dk"));
        EXPECT_TRUE(all_close(r.structured.dv, r.general.dv, rg, ag, what + " dv"));
        EXPECT_TRUE(matches_reference(r.structured, run_reference(q, k, v, c.csr, 0.3, go), dtype, what));
      }
    }
  }
}

TEST(SparseAttentionDiagonal, BitIdenticalAcrossThreadCountsAndSchedules) {
  at::manual_seed(53);
  patterns::MaskKwargs kw;
  kw.set_scalar("w_min", "5").set_scalar("w_max", "65");
  const Case c = library_case("fibo", 197, 1, 3, 5, kw);
  // B*H = 12: one backward task per (batch, head); B*H = 3: rows split across threads.
  for (const int64_t B : {4, 1}) {
    const int64_t H = 3, N = 197, D = 64;
    ASSERT_TRUE(structured(c.csr, B, N, D));
    const at::Tensor q = at::randn({B, H, N, D}), k = at::randn({B, H, N, D}), v = at::randn({B, H, N, D}),
                     go = at::randn({B, H, N, D});
    const int saved = at::get_num_threads();
    at::set_num_threads(2);
    const Result a = run_op(q, k, v, c.csr, 0.125, go);
    at::set_num_threads(1);
    const Result b = run_op(q, k, v, c.csr, 0.125, go);
    at::set_num_threads(saved);
    EXPECT_TRUE(at::equal(a.out, b.out)) << "B=" << B;
    EXPECT_TRUE(at::equal(a.dq, b.dq)) << "B=" << B;
    EXPECT_TRUE(at::equal(a.dk, b.dk)) << "B=" << B;
    EXPECT_TRUE(at::equal(a.dv, b.dv)) << "B=" << B;
  }
}

// The packed op on a NaN-padded qkv view with a diagonal pattern: structured vs general.
TEST(SparseAttentionDiagonal, PackedQkvOnNanPaddedViews) {
  at::manual_seed(54);
  const int64_t B = 2, H = 2, N = 43, D = 32;
  const Csr csr = diagonal_csr(N, {{0, 1, 5}, {2, 9}}, {{0, 7, 30}, {12}});
  ASSERT_TRUE(structured(csr, B, N, D));
  const double nan = std::numeric_limits<double>::quiet_NaN();
  at::Tensor big = at::full({B + 1, N + 2, 3 * H * D + 5}, nan, at::kDouble);
  at::Tensor qkv = big.narrow(0, 1, B).narrow(1, 1, N).narrow(2, 3, 3 * H * D);
  qkv.copy_(at::randn({B, N, 3 * H * D}, at::kDouble));
  at::Tensor gbig = at::full({B, N + 1, H * D + 7}, nan, at::kDouble);
  at::Tensor go = gbig.narrow(1, 1, N).narrow(2, 2, H * D);
  go.copy_(at::randn({B, N, H * D}, at::kDouble));
  auto run = [&] {
    const at::Tensor leaf = qkv.detach().requires_grad_(true);  // still the NaN-padded view
    const at::Tensor out = sparse_attention_qkv(leaf, H, csr.row_ptr, csr.col_idx, 0.2);
    const at::Tensor g = torch::autograd::grad({out}, {leaf}, {go})[0];
    return std::make_pair(out.detach(), g);
  };
  const auto s = run();
  GeneralKernelOnly general;
  const auto g = run();
  EXPECT_TRUE(all_close(s.first, g.first, 1e-10, 1e-12, "out"));
  EXPECT_TRUE(all_close(s.second, g.second, 1e-10, 1e-12, "dqkv"));
}

// Central differences in float64 through the structured kernels (D = 16, a global token).
TEST(SparseAttentionDiagonal, FiniteDifferenceGradcheckFloat64) {
  at::manual_seed(55);
  const int64_t B = 1, H = 1, N = 7, D = 16;
  const Csr csr = diagonal_csr(N, {{0, 2}}, {{3}});
  ASSERT_TRUE(structured(csr, B, N, D));
  std::vector<at::Tensor> in = {at::randn({B, H, N, D}, at::kDouble), at::randn({B, H, N, D}, at::kDouble),
                                at::randn({B, H, N, D}, at::kDouble)};
  const at::Tensor w = at::randn({B, H, N, D}, at::kDouble);
  const Result a = run_op(in[0], in[1], in[2], csr, 0.6, w);
  const at::Tensor grads[3] = {a.dq, a.dk, a.dv};
  auto loss = [&] { return (sparse_attention(in[0], in[1], in[2], csr.row_ptr, csr.col_idx, 0.6) * w).sum().item<double>(); };
  for (int which = 0; which < 3; ++which) {
    expect_matches_finite_differences(in[which], grads[which], loss, "input " + std::to_string(which));
  }
}

// The structured kernels of every compiled instruction set (the dispatcher only ever runs the
// widest one), called directly: float32 and float64, D 16 / 32 / 128, rows split at odd points,
// against the float64 reference.
template <typename T>
const cpu::KernelFns<T>& fns_of(const cpu::KernelTable& t) {
  if constexpr (std::is_same_v<T, float>) {
    return t.f32;
  } else {
    return t.f64;
  }
}

template <typename T>
void check_tables_diagonal(const std::vector<const cpu::KernelTable*>& tables, int64_t D) {
  const int64_t B = 2, H = 2, N = 43;
  const Csr csr = diagonal_csr(N, {{0, 1, 5, 20}, {2, 9}}, {{0, 7, 30}, {12}});
  const at::ScalarType dtype = std::is_same_v<T, float> ? at::kFloat : at::kDouble;
  const auto opts = at::TensorOptions().dtype(dtype);
  const at::Tensor q = at::randn({B, H, N, D}, opts), k = at::randn({B, H, N, D}, opts),
                   v = at::randn({B, H, N, D}, opts), go = at::randn({B, H, N, D}, opts);
  const Result want = run_reference(q, k, v, csr, 0.3, go);
  const AttentionShape shape = AttentionShape::of(B, H, N, D, csr.col_idx.size(1));
  const CsrIndices ci = prepare_csr("test", csr.row_ptr, csr.col_idx, shape);
  const TransposedCsr tc = transpose_csr(ci, shape);
  const auto plan = detect_diagonal_structure(ci, shape);
  ASSERT_TRUE(plan.has_value());
  const cpu::DiagonalPlan d = diagonal_plan_view(*plan);
  for (const cpu::KernelTable* t : tables) {
    const cpu::KernelFns<T>& fns = fns_of<T>(*t);
    const std::string what = std::string(t->isa) + " " + c10::toString(dtype) + " D=" + std::to_string(D);
    at::Tensor out = at::empty_like(q), lse = at::empty({B, H, N}, opts);
    const cpu::ForwardParams<T> p = forward_params_for<T>(q, k, v, out, lse, ci, shape, T(0.3), d);
    std::vector<T> scratch(N + 64);
    fns.forward_rows_diagonal(p, 0, 37, scratch.data());
    fns.forward_rows_diagonal(p, 37, B * H * N, scratch.data());
    const Tolerance f = forward_tolerance(dtype), g = grad_tolerance(dtype);
    EXPECT_TRUE(all_close(out, want.out, f.rtol, f.atol, what + " out"));
    at::Tensor dq = at::empty_like(q), dk = at::empty_like(q), dv = at::empty_like(q);
    at::Tensor ep = at::empty({B * H, shape.nnz_stride}, opts), eds = at::empty({B * H, shape.nnz_stride}, opts);
    at::Tensor sp = at::empty({B * H, plan->max_slots * N}, opts), sds = at::empty({B * H, plan->max_slots * N}, opts);
    const cpu::BackwardParams<T> b =
        backward_params_for(p, go, dq, dk, dv, ep, eds, tc, sp, sds, plan->max_slots * N);
    fns.backward_query_rows_diagonal(b, 0, 29);
    fns.backward_query_rows_diagonal(b, 29, B * H * N);
    fns.backward_key_rows_diagonal(b, 0, 53);
    fns.backward_key_rows_diagonal(b, 53, B * H * N);
    EXPECT_TRUE(all_close(dq, want.dq, g.rtol, g.atol, what + " dq"));
    EXPECT_TRUE(all_close(dk, want.dk, g.rtol, g.atol, what + " dk"));
    EXPECT_TRUE(all_close(dv, want.dv, g.rtol, g.atol, what + " dv"));
  }
}

TEST(SparseAttentionDiagonal, EveryCompiledInstructionSetAgrees) {
  at::manual_seed(56);
  const std::vector<const cpu::KernelTable*> tables = compiled_kernel_tables();
  for (const int64_t D : {16, 32, 128}) {
    check_tables_diagonal<float>(tables, D);
    check_tables_diagonal<double>(tables, D);
  }
}

}  // namespace
}  // namespace sparsevit::ops::testing
