// Edge cases of the sparse attention operator: empty rows and heads, N = 1, one-key rows, logits
// around +-1e4, NaN-padded strided inputs (out-of-bounds reads would show), bit-identical reruns,
// finite-difference gradcheck in float64, InferenceMode, index dtypes, every compiled instruction
// set, bfloat16, and the error messages of invalid inputs.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/InferenceMode.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "ops/cpu/sparse_attention_cpu_kernels.h"
#include "benchmarks/cpu_memory_tracker.h"
#include "ops/sparse_attention.h"
#include "ops/sparse_attention_inputs.h"
#include "ops_test_helpers.h"

namespace sparsevit::ops::testing {
namespace {

Csr csr_from_rows(const std::vector<std::vector<std::vector<int64_t>>>& heads) {
  const int64_t H = static_cast<int64_t>(heads.size()), N = static_cast<int64_t>(heads[0].size());
  int64_t nnz = 0;
  for (const auto& rows : heads) {
    int64_t n = 0;
    for (const auto& r : rows) n += static_cast<int64_t>(r.size());
    nnz = std::max(nnz, n);
  }
  Csr csr{at::zeros({H, N + 1}, at::kInt), at::zeros({H, nnz}, at::kInt)};
  for (int64_t h = 0; h < H; ++h) {
    int64_t e = 0;
    for (int64_t j = 0; j < N; ++j) {
      for (int64_t key : heads[h][j]) csr.col_idx[h][e++] = key;
      csr.row_ptr[h][j + 1] = e;
    }
  }
  return csr;
}

TEST(SparseAttentionEdgeCases, EmptyRowsGiveZeroOutputAndZeroGradients) {
  at::manual_seed(10);
  // Head 0: rows 1 and 3 empty, key 4 never attended. Head 1: no keys at all.
  const Csr csr = csr_from_rows({{{0, 2}, {}, {1}, {}, {0, 1, 2, 3}}, {{}, {}, {}, {}, {}}});
  for (const at::ScalarType dtype : {at::kFloat, at::kDouble}) {
    const auto opts = at::TensorOptions().dtype(dtype);
    const at::Tensor q = at::randn({2, 2, 5, 7}, opts), k = at::randn({2, 2, 5, 7}, opts),
                     v = at::randn({2, 2, 5, 7}, opts), go = at::randn({2, 2, 5, 7}, opts);
    const Result r = run_op(q, k, v, csr, 0.5, go);
    for (const at::Tensor& t : {r.out, r.dq, r.dk, r.dv}) EXPECT_TRUE(t.isfinite().all().item<bool>());
    using at::indexing::Slice;
    EXPECT_EQ(r.out.index({Slice(), 0, 1}).abs().max().item<double>(), 0.0);
    EXPECT_EQ(r.out.index({Slice(), 0, 3}).abs().max().item<double>(), 0.0);
    EXPECT_EQ(r.out.index({Slice(), 1}).abs().max().item<double>(), 0.0);
    EXPECT_EQ(r.dq.index({Slice(), 0, 1}).abs().max().item<double>(), 0.0);
    EXPECT_EQ(r.dq.index({Slice(), 0, 3}).abs().max().item<double>(), 0.0);
    EXPECT_EQ(r.dk.index({Slice(), 0, 4}).abs().max().item<double>(), 0.0);
    EXPECT_EQ(r.dv.index({Slice(), 0, 4}).abs().max().item<double>(), 0.0);
    for (const at::Tensor& t : {r.dq, r.dk, r.dv}) EXPECT_EQ(t.index({Slice(), 1}).abs().max().item<double>(), 0.0);
    EXPECT_TRUE(matches_reference(r, run_reference(q, k, v, csr, 0.5, go), dtype, "empty rows"));
  }
}

TEST(SparseAttentionEdgeCases, EmptyPatternWithZeroWidthColIdx) {
  const Csr csr{at::zeros({3, 5}, at::kInt), at::zeros({3, 0}, at::kInt)};
  const at::Tensor q = at::randn({1, 3, 4, 8});
  const Result r = run_op(q, q, q, csr, 1.0, at::ones_like(q));
  EXPECT_EQ(r.out.abs().max().item<double>(), 0.0);
  EXPECT_EQ(r.dq.abs().max().item<double>() + r.dk.abs().max().item<double>() + r.dv.abs().max().item<double>(), 0.0);
}

TEST(SparseAttentionEdgeCases, SingleTokenAndOneKeyRows) {
  at::manual_seed(11);
  // N = 1 attending itself: the output is v exactly (softmax of one key is 1).
  const Csr one = csr_from_rows({{{0}}});
  const at::Tensor q1 = at::randn({3, 1, 1, 5}), k1 = at::randn({3, 1, 1, 5}), v1 = at::randn({3, 1, 1, 5});
  EXPECT_TRUE(at::equal(sparse_attention(q1, k1, v1, one.row_ptr, one.col_idx, 1.0), v1));
  // Every row one key (a permutation): the output is the gathered v rows exactly, dq = dk = 0.
  const Csr perm = csr_from_rows({{{3}, {0}, {2}, {1}}});
  const at::Tensor q = at::randn({2, 1, 4, 9}), k = at::randn({2, 1, 4, 9}), v = at::randn({2, 1, 4, 9});
  const at::Tensor go = at::randn({2, 1, 4, 9});
  const Result r = run_op(q, k, v, perm, 0.7, go);
  const at::Tensor idx = at::tensor({3, 0, 2, 1}, at::kLong);
  EXPECT_TRUE(at::equal(r.out, v.index_select(2, idx)));
  EXPECT_EQ(r.dq.abs().max().item<double>(), 0.0);
  EXPECT_EQ(r.dk.abs().max().item<double>(), 0.0);
  EXPECT_TRUE(matches_reference(r, run_reference(q, k, v, perm, 0.7, go), at::kFloat, "one-key rows"));
}

TEST(SparseAttentionEdgeCases, LargeLogitsStayFinite) {
  at::manual_seed(12);
  // Integer q, k with D = 8 and entries up to 50: logits up to +-2e4, exact in float32, so the
  // float32 kernel can be held to float32 rounding of the softmax itself.
  const int64_t B = 2, H = 2, N = 33, D = 8;
  const Csr csr = random_csr(H, N, 1, 10, 5);
  for (const at::ScalarType dtype : {at::kFloat, at::kDouble}) {
    const auto opts = at::TensorOptions().dtype(dtype);
    const at::Tensor q = at::randint(-50, 51, {B, H, N, D}, opts), k = at::randint(-50, 51, {B, H, N, D}, opts);
    const at::Tensor v = at::randn({B, H, N, D}, opts), go = at::randn({B, H, N, D}, opts);
    const at::Tensor logits = at::matmul(q, k.transpose(-2, -1));
    EXPECT_GT(logits.abs().max().item<double>(), 5e3);
    const Result r = run_op(q, k, v, csr, 1.0, go);
    const Result want = run_reference(q, k, v, csr, 1.0, go);
    EXPECT_TRUE(all_close(r.out, want.out, forward_tolerance(dtype).rtol, forward_tolerance(dtype).atol, "out"));
    EXPECT_TRUE(all_close(r.dv, want.dv, grad_tolerance(dtype).rtol, grad_tolerance(dtype).atol, "dv"));
    // dq, dk scale with the logits' magnitude (|k| ~ 50): compare relative to their size.
    const double gq = want.dq.abs().max().item<double>() + 1.0, gk = want.dk.abs().max().item<double>() + 1.0;
    EXPECT_TRUE(all_close(r.dq, want.dq, 0, grad_tolerance(dtype).atol * gq, "dq"));
    EXPECT_TRUE(all_close(r.dk, want.dk, 0, grad_tolerance(dtype).atol * gk, "dk"));
  }
}

// A [B, H, N, D] view into a NaN-filled bigger tensor, not contiguous.
at::Tensor nan_padded(const at::Tensor& t, int64_t seed) {
  const auto s = t.sizes();
  at::Tensor big = at::full({s[0] + 1, s[1] + 2, s[2] + 3, s[3] + 4}, std::numeric_limits<double>::quiet_NaN(),
                            t.options());
  at::Tensor view = big.narrow(0, 1, s[0]).narrow(1, seed % 2, s[1]).narrow(2, 1 + seed % 3, s[2]).narrow(3, 2, s[3]);
  view.copy_(t);
  return view;
}

TEST(SparseAttentionEdgeCases, NanPaddedStridedInputs) {
  at::manual_seed(13);
  for (const at::ScalarType dtype : {at::kFloat, at::kDouble}) {
    for (const int64_t D : {8, 13, 64}) {
      const int64_t B = 2, H = 3, N = 41;
      const Csr csr = random_csr(H, N, 0, 9, 50 + D);
      // row_ptr and col_idx as strided views of bigger tensors too.
      at::Tensor rp_big = at::full({H, 2 * (N + 1)}, -5, at::kInt);
      rp_big.narrow(1, 0, 2 * (N + 1)).slice(1, 0, 2 * (N + 1), 2).copy_(csr.row_ptr);
      const Csr strided{rp_big.slice(1, 0, 2 * (N + 1), 2), csr.col_idx.t().contiguous().t()};
      ASSERT_FALSE(strided.row_ptr.is_contiguous());
      const auto opts = at::TensorOptions().dtype(dtype);
      const at::Tensor q = at::randn({B, H, N, D}, opts), k = at::randn({B, H, N, D}, opts),
                       v = at::randn({B, H, N, D}, opts), go = at::randn({B, H, N, D}, opts);
      const at::Tensor qp = nan_padded(q, 1), kp = nan_padded(k, 2), vp = nan_padded(v, 3), gp = nan_padded(go, 4);
      ASSERT_FALSE(qp.is_contiguous());
      // A transposed-layout input as well: [B, N, H, D] memory viewed as [B, H, N, D].
      const at::Tensor vt = v.transpose(1, 2).contiguous().transpose(1, 2);
      const Result r = run_op(qp, kp, vt, strided, 0.4, gp);
      EXPECT_TRUE(matches_reference(r, run_reference(q, k, v, csr, 0.4, go), dtype,
                                    std::string("nan-padded D=") + std::to_string(D)));
    }
  }
}

TEST(SparseAttentionEdgeCases, RerunsAreBitIdenticalAcrossRunsAndThreadCounts) {
  at::manual_seed(14);
  // B*H = 12: one backward task per (batch, head) at 1 and 2 threads. B*H = 3: per head at one
  // thread, rows split across two threads. Every scheme must give the same bits.
  for (const auto& [B, H] : std::vector<std::pair<int64_t, int64_t>>{{3, 4}, {1, 3}}) {
    const int64_t N = 197, D = 64;
    const Csr csr = random_csr(H, N, 0, 30, 99);
    const at::Tensor q = at::randn({B, H, N, D}), k = at::randn({B, H, N, D}), v = at::randn({B, H, N, D});
    const at::Tensor go = at::randn({B, H, N, D});
    const int saved_threads = at::get_num_threads();
    at::set_num_threads(2);
    const Result a = run_op(q, k, v, csr, 0.125, go);
    const Result b = run_op(q, k, v, csr, 0.125, go);
    at::set_num_threads(1);
    const Result c = run_op(q, k, v, csr, 0.125, go);
    at::set_num_threads(saved_threads);
    for (const Result* x : {&b, &c}) {
      EXPECT_TRUE(at::equal(a.out, x->out)) << "B=" << B << " H=" << H;
      EXPECT_TRUE(at::equal(a.dq, x->dq)) << "B=" << B << " H=" << H;
      EXPECT_TRUE(at::equal(a.dk, x->dk)) << "B=" << B << " H=" << H;
      EXPECT_TRUE(at::equal(a.dv, x->dv)) << "B=" << B << " H=" << H;
    }
  }
}

// Central differences of L = sum(out * w) in float64 against the operator's analytic gradients.
TEST(SparseAttentionEdgeCases, FiniteDifferenceGradcheckFloat64) {
  at::manual_seed(15);
  const int64_t B = 2, H = 2, N = 6, D = 3;
  const Csr csr = random_csr(H, N, 0, 4, 123);
  const auto opts = at::TensorOptions().dtype(at::kDouble);
  std::vector<at::Tensor> inputs = {at::randn({B, H, N, D}, opts), at::randn({B, H, N, D}, opts),
                                    at::randn({B, H, N, D}, opts)};
  const at::Tensor w = at::randn({B, H, N, D}, opts);
  const Result analytic = run_op(inputs[0], inputs[1], inputs[2], csr, 0.8, w);
  const at::Tensor grads[3] = {analytic.dq, analytic.dk, analytic.dv};
  auto loss = [&] {
    return (sparse_attention(inputs[0], inputs[1], inputs[2], csr.row_ptr, csr.col_idx, 0.8) * w).sum().item<double>();
  };
  for (int which = 0; which < 3; ++which) {
    expect_matches_finite_differences(inputs[which], grads[which], loss, "input " + std::to_string(which));
  }
}

TEST(SparseAttentionEdgeCases, WorksUnderInferenceModeAndNoGrad) {
  at::manual_seed(16);
  const Csr csr = random_csr(2, 20, 0, 6, 7);
  const at::Tensor q = at::randn({1, 2, 20, 8}), k = at::randn({1, 2, 20, 8}), v = at::randn({1, 2, 20, 8});
  const at::Tensor want = sparse_attention(q, k, v, csr.row_ptr, csr.col_idx, 0.5);
  {
    c10::InferenceMode guard;
    EXPECT_TRUE(at::equal(sparse_attention(q, k, v, csr.row_ptr, csr.col_idx, 0.5), want));
  }
  {
    torch::NoGradGuard guard;
    const at::Tensor qg = q.clone().requires_grad_(true);
    EXPECT_FALSE(sparse_attention(qg, k, v, csr.row_ptr, csr.col_idx, 0.5).requires_grad());
  }
  const at::Tensor qg = q.clone().requires_grad_(true);
  EXPECT_TRUE(sparse_attention(qg, k, v, csr.row_ptr, csr.col_idx, 0.5).requires_grad());
}

TEST(SparseAttentionEdgeCases, PrivateForwardReturnsLogSumExp) {
  at::manual_seed(17);
  const Csr csr = csr_from_rows({{{0, 1}, {}, {2}}});
  const at::Tensor q = at::randn({1, 1, 3, 4}, at::kDouble), k = at::randn({1, 1, 3, 4}, at::kDouble);
  auto op = c10::Dispatcher::singleton()
                .findSchemaOrThrow("sparsevit::_sparse_attention_forward", "")
                .typed<std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                                          const at::Tensor&, const at::Tensor&, double)>();
  const auto [out, lse] = op.call(q, k, k, csr.row_ptr, csr.col_idx, 0.5);
  const at::Tensor s = at::matmul(q, k.transpose(-2, -1))[0][0] * 0.5;
  EXPECT_NEAR(lse[0][0][0].item<double>(), at::logsumexp(s[0].slice(0, 0, 2), 0).item<double>(), 1e-12);
  EXPECT_TRUE(std::isinf(lse[0][0][1].item<double>()) && lse[0][0][1].item<double>() < 0);
  EXPECT_NEAR(lse[0][0][2].item<double>(), s[2][2].item<double>(), 1e-12);
}

TEST(SparseAttentionEdgeCases, IndexDtypesAndKeyOrderAgree) {
  at::manual_seed(18);
  const Csr sorted = random_csr(3, 40, 0, 12, 21, at::kInt);
  const Csr sorted64{sorted.row_ptr.to(at::kLong), sorted.col_idx.to(at::kLong)};
  const Csr mixed{sorted.row_ptr.to(at::kLong), sorted.col_idx};
  const at::Tensor q = at::randn({2, 3, 40, 16}), k = at::randn({2, 3, 40, 16}), v = at::randn({2, 3, 40, 16});
  const at::Tensor a = sparse_attention(q, k, v, sorted.row_ptr, sorted.col_idx, 0.25);
  EXPECT_TRUE(at::equal(a, sparse_attention(q, k, v, sorted64.row_ptr, sorted64.col_idx, 0.25)));
  EXPECT_TRUE(at::equal(a, sparse_attention(q, k, v, mixed.row_ptr, mixed.col_idx, 0.25)));
  const Csr shuffled = random_csr(3, 40, 0, 12, 21, at::kInt, /*shuffle_keys=*/true);  // same sets, any order
  const at::Tensor go = at::randn({2, 3, 40, 16});
  EXPECT_TRUE(matches_reference(run_op(q, k, v, shuffled, 0.25, go), run_reference(q, k, v, shuffled, 0.25, go),
                                at::kFloat, "unsorted keys"));
}

// Every compiled instruction set this CPU can run, called directly (forward and both backward
// passes), against the reference: D = 64 takes the row-block path, D = 21 the generic one, and
// the pattern has long rows (> 64 keys, per-row path) next to short and empty ones.
TEST(SparseAttentionEdgeCases, EveryCompiledInstructionSetAgrees) {
  at::manual_seed(19);
  const std::vector<const cpu::KernelTable*> tables = compiled_kernel_tables();
  for (const int64_t D : {21, 64}) {
    const int64_t B = 2, H = 2, N = 83;
    // 0..11 random keys per row; rows 5 and 40 of head 0 attend to every key (long rows).
    std::mt19937 rng(static_cast<uint32_t>(31 + D));
    std::vector<std::vector<std::vector<int64_t>>> rows(H, std::vector<std::vector<int64_t>>(N));
    for (int64_t h = 0; h < H; ++h) {
      for (int64_t j = 0; j < N; ++j) {
        std::vector<int64_t> all(N);
        for (int64_t c = 0; c < N; ++c) all[c] = c;
        std::shuffle(all.begin(), all.end(), rng);
        const int64_t n = (h == 0 && (j == 5 || j == 40)) ? N : static_cast<int64_t>(rng() % 12);
        rows[h][j].assign(all.begin(), all.begin() + n);
      }
    }
    const Csr csr = csr_from_rows(rows);
    const at::Tensor q = at::randn({B, H, N, D}), k = at::randn({B, H, N, D}), v = at::randn({B, H, N, D});
    const at::Tensor go = at::randn({B, H, N, D});
    const Result want = run_reference(q, k, v, csr, 0.3, go);
    const AttentionShape shape = AttentionShape::of(B, H, N, D, csr.col_idx.size(1));
    const CsrIndices ci = prepare_csr("test", csr.row_ptr, csr.col_idx, shape);
    const TransposedCsr tc = transpose_csr(ci, shape);
    for (const cpu::KernelTable* t : tables) {
      at::Tensor out = at::empty_like(q), lse = at::empty({B, H, N});
      const cpu::ForwardParams<float> p = forward_params_for<float>(q, k, v, out, lse, ci, shape, 0.3f);
      std::vector<float> scratch(N + 64);
      // Odd split points: blocks never straddle a call, results must not depend on it.
      t->f32.forward_rows(p, 0, 37, scratch.data());
      t->f32.forward_rows(p, 37, B * H * N, scratch.data());
      const std::string what = std::string(t->isa) + " D=" + std::to_string(D);
      EXPECT_TRUE(all_close(out, want.out, 1e-4, 1e-5, what + " out"));

      at::Tensor dq = at::empty_like(q), dk = at::empty_like(q), dv = at::empty_like(q);
      at::Tensor ep = at::empty({B * H, shape.nnz_stride}), eds = at::empty({B * H, shape.nnz_stride});
      const cpu::BackwardParams<float> b = backward_params_for(p, go, dq, dk, dv, ep, eds, tc);
      t->f32.backward_query_rows(b, 0, B * H * N);
      t->f32.backward_key_rows(b, 0, B * H * N);
      EXPECT_TRUE(all_close(dq, want.dq, 1e-3, 1e-4, what + " dq"));
      EXPECT_TRUE(all_close(dk, want.dk, 1e-3, 1e-4, what + " dk"));
      EXPECT_TRUE(all_close(dv, want.dv, 1e-3, 1e-4, what + " dv"));
    }
  }
  std::cout << "[   info   ] kernel table in use: " << cpu::kernel_table().isa << "\n";
}

TEST(SparseAttentionEdgeCases, BFloat16ComputesInFloat32) {
  at::manual_seed(20);
  const Csr csr = random_csr(2, 30, 1, 8, 3);
  const auto opts = at::TensorOptions().dtype(at::kBFloat16);
  const at::Tensor q = at::randn({2, 2, 30, 16}, opts), k = at::randn({2, 2, 30, 16}, opts),
                   v = at::randn({2, 2, 30, 16}, opts), go = at::randn({2, 2, 30, 16}, opts);
  const Result r = run_op(q, k, v, csr, 0.25, go);
  EXPECT_EQ(r.out.scalar_type(), at::kBFloat16);
  EXPECT_EQ(r.dq.scalar_type(), at::kBFloat16);
  EXPECT_TRUE(matches_reference(r, run_reference(q, k, v, csr, 0.25, go), at::kBFloat16, "bf16"));
}

TEST(SparseAttentionEdgeCases, MemoryIsLinearInEdges) {
  // Same keys per row at N = 64 and N = 512: the peak allocated during forward + backward grows
  // ~8x (linear in B*H*(N*D + nnz)), never 64x as an N x N buffer would. Measured by the
  // benchmark's allocator wrapper, so the kernels pay nothing for the accounting.
  using benchmarks::CpuMemoryTracker;
  CpuMemoryTracker::install();
  auto bytes_for = [](int64_t N) {
    const Csr csr = random_csr(2, N, 4, 4, 8);
    const at::Tensor q = at::randn({1, 2, N, 16}).requires_grad_(true);
    const int64_t baseline = CpuMemoryTracker::current_bytes();
    CpuMemoryTracker::reset_peak();
    sparse_attention(q, q, q, csr.row_ptr, csr.col_idx, 0.25).sum().backward();
    return CpuMemoryTracker::peak_bytes() - baseline;
  };
  const int64_t small = bytes_for(64), large = bytes_for(512);
  EXPECT_GT(small, 0);
  EXPECT_LT(large, 10 * small);
  EXPECT_LT(large, 2 * 512 * 512 * 4);  // less than the float32 scores of the two heads
}

TEST(SparseAttentionEdgeCases, InvalidInputsAreRejectedWithClearMessages) {
  const Csr csr = csr_from_rows({{{0, 1}, {1}, {0, 2}}});
  const at::Tensor q = at::randn({1, 1, 3, 4});
  auto call = [&](const at::Tensor& qq, const at::Tensor& kk, const at::Tensor& rp, const at::Tensor& ci) {
    return [=] { sparse_attention(qq, kk, qq, rp, ci, 1.0); };
  };
  expect_error(call(q.view({3, 4}), q.view({3, 4}), csr.row_ptr, csr.col_idx), "q must be [B, H, N, D]");
  expect_error(call(q, at::randn({1, 1, 3, 5}), csr.row_ptr, csr.col_idx), "k must have the shape of q");
  expect_error(call(q, q.to(at::kDouble), csr.row_ptr, csr.col_idx), "one dtype");
  expect_error(call(q.to(at::kInt), q.to(at::kInt), csr.row_ptr, csr.col_idx), "float32, float64");
  expect_error(call(q, q, csr.row_ptr.to(at::kShort), csr.col_idx), "row_ptr must be int32 or int64");
  expect_error(call(q, q, csr.row_ptr.narrow(1, 0, 3), csr.col_idx), "row_ptr must be [H, N+1]");
  expect_error(call(q, q, csr.row_ptr, at::zeros({2, 5}, at::kInt)), "col_idx must be [H, nnz_max]");
  at::Tensor bad_col = csr.col_idx.clone();
  bad_col[0][1] = 3;
  expect_error(call(q, q, csr.row_ptr, bad_col), "is not a token index");
  at::Tensor dup = csr.col_idx.clone();
  dup[0][1] = 0;
  expect_error(call(q, q, csr.row_ptr, dup), "twice");
  at::Tensor decreasing = csr.row_ptr.clone();
  decreasing[0][2] = 1;
  decreasing[0][1] = 2;
  expect_error(call(q, q, decreasing, csr.col_idx), "non-decreasing");
  at::Tensor overflow = csr.row_ptr.clone();
  overflow[0][3] = 9;
  expect_error(call(q, q, overflow, csr.col_idx), "exceeds col_idx.size(1)");
}

}  // namespace
}  // namespace sparsevit::ops::testing
