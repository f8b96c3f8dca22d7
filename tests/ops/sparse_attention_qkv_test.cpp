// The packed op sparsevit::sparse_attention_qkv (qkv [B, N, 3*H*D] from a fused projection, out
// [B, N, H*D], d(qkv) in one buffer) against sparse_attention on the three views followed by
// transpose + reshape (bit-identical: the same kernels, the same summation order), against the
// float64 reference, on NaN-padded strided views, across thread counts, under InferenceMode, by
// finite differences, and its error messages.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>
#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

#include "ops/sparse_attention.h"
#include "ops_test_helpers.h"

namespace sparsevit::ops::testing {
namespace {

// [B, H, N, D] views of q, k, v in qkv [B, N, 3*H*D] (timm: [B, N, 3, H, D]).
std::vector<at::Tensor> split_views(const at::Tensor& qkv, int64_t H) {
  const int64_t B = qkv.size(0), N = qkv.size(1), D = qkv.size(2) / (3 * H);
  const at::Tensor t = qkv.reshape({B, N, 3, H, D}).permute({2, 0, 3, 1, 4});
  return {t[0], t[1], t[2]};
}

// [B, H, N, D] -> [B, N, H*D]
at::Tensor merge_heads(const at::Tensor& t) {
  return t.transpose(1, 2).reshape({t.size(0), t.size(2), t.size(1) * t.size(3)});
}

struct QkvResult {
  at::Tensor out, dqkv;
};

QkvResult run_qkv(const at::Tensor& qkv, int64_t H, const Csr& csr, double scale, const at::Tensor& go) {
  const at::Tensor x = qkv.detach().clone().requires_grad_(true);
  QkvResult r;
  r.out = sparse_attention_qkv(x, H, csr.row_ptr, csr.col_idx, scale);
  r.dqkv = torch::autograd::grad({r.out}, {x}, {go.to(r.out.scalar_type())})[0];
  r.out = r.out.detach();
  return r;
}

// The unpacked path: views, sparse_attention, transpose + reshape, gradients stacked back.
QkvResult run_unpacked(const at::Tensor& qkv, int64_t H, const Csr& csr, double scale, const at::Tensor& go) {
  const at::Tensor x = qkv.detach().clone().requires_grad_(true);
  const auto qkvs = split_views(x, H);
  QkvResult r;
  r.out = merge_heads(sparse_attention(qkvs[0], qkvs[1], qkvs[2], csr.row_ptr, csr.col_idx, scale));
  r.dqkv = torch::autograd::grad({r.out}, {x}, {go.to(r.out.scalar_type())})[0];
  r.out = r.out.detach();
  return r;
}

TEST(SparseAttentionQkv, EqualsUnpackedOpBitForBitAndMatchesReference) {
  at::manual_seed(41);
  int case_id = 0;
  for (const at::ScalarType dtype : {at::kFloat, at::kDouble}) {
    for (const int64_t N : {1, 2, 50}) {
      for (const int64_t D : {8, 16, 64}) {
        const int64_t B = 2, H = 3;
        const Csr csr = random_csr(H, N, 0, 12, 4100 + ++case_id);
        const auto opts = at::TensorOptions().dtype(dtype);
        const at::Tensor qkv = at::randn({B, N, 3 * H * D}, opts), go = at::randn({B, N, H * D}, opts);
        const double scale = default_scale(D);
        const std::string what = std::string(c10::toString(dtype)) + " N=" + std::to_string(N) +
                                 " D=" + std::to_string(D);
        const QkvResult got = run_qkv(qkv, H, csr, scale, go);
        const QkvResult want = run_unpacked(qkv, H, csr, scale, go);
        ASSERT_EQ(got.out.sizes(), (std::vector<int64_t>{B, N, H * D})) << what;
        ASSERT_EQ(got.dqkv.sizes(), qkv.sizes()) << what;
        EXPECT_TRUE(at::equal(got.out, want.out)) << what;
        EXPECT_TRUE(at::equal(got.dqkv, want.dqkv)) << what;
        // And against the float64 dense reference.
        const auto v = split_views(qkv, H);
        const at::Tensor go4 = go.view({B, N, H, D}).transpose(1, 2);
        const Result ref = run_reference(v[0], v[1], v[2], csr, scale, go4);
        const auto d = split_views(got.dqkv, H);
        Result packed{got.out.view({B, N, H, D}).transpose(1, 2), d[0], d[1], d[2]};
        EXPECT_TRUE(matches_reference(packed, ref, dtype, what));
      }
    }
  }
}

// qkv and grad_out as views into NaN-filled bigger buffers (row stride > 3*H*D, offset start):
// a read outside the described elements would put NaN into the results.
TEST(SparseAttentionQkv, NanPaddedStridedViews) {
  at::manual_seed(42);
  for (const at::ScalarType dtype : {at::kFloat, at::kDouble}) {
    for (const int64_t D : {13, 64}) {
      const int64_t B = 2, H = 2, N = 37;
      const Csr csr = random_csr(H, N, 0, 9, 420 + D);
      const auto opts = at::TensorOptions().dtype(dtype);
      const double nan = std::numeric_limits<double>::quiet_NaN();
      const at::Tensor qkv = at::randn({B, N, 3 * H * D}, opts), go = at::randn({B, N, H * D}, opts);
      at::Tensor big = at::full({B + 1, N + 2, 3 * H * D + 5}, nan, opts);
      at::Tensor qkv_view = big.narrow(0, 1, B).narrow(1, 1, N).narrow(2, 3, 3 * H * D);
      qkv_view.copy_(qkv);
      at::Tensor gbig = at::full({B, N + 1, H * D + 7}, nan, opts);
      at::Tensor go_view = gbig.narrow(1, 1, N).narrow(2, 2, H * D);
      go_view.copy_(go);
      ASSERT_FALSE(qkv_view.is_contiguous());
      const QkvResult got = run_qkv(qkv_view, H, csr, 0.3, go_view);
      const QkvResult want = run_unpacked(qkv, H, csr, 0.3, go);
      EXPECT_TRUE(at::equal(got.out, want.out)) << "D=" << D;
      EXPECT_TRUE(at::equal(got.dqkv, want.dqkv)) << "D=" << D;
    }
  }
}

TEST(SparseAttentionQkv, BitIdenticalAcrossThreadCounts) {
  at::manual_seed(43);
  for (const int64_t B : {1, 4}) {  // B*H = 3: rows split; B*H = 12: one task per (batch, head)
    const int64_t H = 3, N = 197, D = 64;
    const Csr csr = random_csr(H, N, 0, 30, 430 + B);
    const at::Tensor qkv = at::randn({B, N, 3 * H * D}), go = at::randn({B, N, H * D});
    const int saved = at::get_num_threads();
    at::set_num_threads(2);
    const QkvResult a = run_qkv(qkv, H, csr, 0.125, go);
    at::set_num_threads(1);
    const QkvResult b = run_qkv(qkv, H, csr, 0.125, go);
    at::set_num_threads(saved);
    EXPECT_TRUE(at::equal(a.out, b.out)) << "B=" << B;
    EXPECT_TRUE(at::equal(a.dqkv, b.dqkv)) << "B=" << B;
  }
}

TEST(SparseAttentionQkv, InferenceModeNoGradAndBFloat16) {
  at::manual_seed(44);
  const int64_t B = 1, H = 2, N = 20, D = 16;
  const Csr csr = random_csr(H, N, 0, 6, 44);
  const at::Tensor qkv = at::randn({B, N, 3 * H * D});
  const at::Tensor want = sparse_attention_qkv(qkv, H, csr.row_ptr, csr.col_idx, 0.5);
  {
    c10::InferenceMode guard;
    EXPECT_TRUE(at::equal(sparse_attention_qkv(qkv, H, csr.row_ptr, csr.col_idx, 0.5), want));
    const auto v = split_views(qkv, H);
    EXPECT_TRUE(at::equal(merge_heads(sparse_attention(v[0], v[1], v[2], csr.row_ptr, csr.col_idx, 0.5)), want));
  }
  {
    torch::NoGradGuard guard;
    EXPECT_FALSE(sparse_attention_qkv(qkv.clone().requires_grad_(true), H, csr.row_ptr, csr.col_idx, 0.5)
                     .requires_grad());
  }
  // bfloat16 in, bfloat16 out (computed in float32), gradients in bfloat16 too.
  const at::Tensor go = at::randn({B, N, H * D});
  const QkvResult bf = run_qkv(qkv.to(at::kBFloat16), H, csr, 0.5, go);
  EXPECT_EQ(bf.out.scalar_type(), at::kBFloat16);
  EXPECT_EQ(bf.dqkv.scalar_type(), at::kBFloat16);
  const QkvResult f = run_qkv(qkv.to(at::kBFloat16).to(at::kFloat), H, csr, 0.5, go);
  EXPECT_TRUE(all_close(bf.out, f.out, 2e-2, 2e-2, "bf16 out"));
  EXPECT_TRUE(all_close(bf.dqkv, f.dqkv, 5e-2, 5e-2, "bf16 dqkv"));
}

// Central differences of L = sum(out * w) in float64 against d(qkv).
TEST(SparseAttentionQkv, FiniteDifferenceGradcheckFloat64) {
  at::manual_seed(45);
  const int64_t B = 2, H = 2, N = 5, D = 3;
  const Csr csr = random_csr(H, N, 0, 4, 145);
  at::Tensor qkv = at::randn({B, N, 3 * H * D}, at::kDouble);
  const at::Tensor w = at::randn({B, N, H * D}, at::kDouble);
  const at::Tensor g = run_qkv(qkv, H, csr, 0.7, w).dqkv.reshape({-1});
  auto loss = [&] { return (sparse_attention_qkv(qkv, H, csr.row_ptr, csr.col_idx, 0.7) * w).sum().item<double>(); };
  expect_matches_finite_differences(qkv, g, loss, "qkv");
}

TEST(SparseAttentionQkv, InvalidInputsAndDoubleBackwardGiveClearErrors) {
  const Csr csr = random_csr(2, 4, 1, 3, 46);
  const at::Tensor qkv = at::randn({1, 4, 3 * 2 * 8});
  auto call = [&](const at::Tensor& x, int64_t heads, const at::Tensor& rp) {
    return [=] { sparse_attention_qkv(x, heads, rp, csr.col_idx, 1.0); };
  };
  expect_error(call(qkv.view({4, 48}), 2, csr.row_ptr), "qkv must be [B, N, 3*H*D]");
  expect_error(call(qkv.narrow(2, 0, 47), 2, csr.row_ptr), "must be a positive multiple of 3 * num_heads = 6");
  expect_error(call(qkv, 0, csr.row_ptr), "num_heads must be positive");
  expect_error(call(qkv.to(at::kInt), 2, csr.row_ptr), "qkv must be float32, float64");
  expect_error(call(qkv, 4, csr.row_ptr), "row_ptr must be [H, N+1] = [4, 5] for qkv of shape");
  expect_error(call(qkv.narrow(1, 0, 3), 2, csr.row_ptr), "row_ptr must be [H, N+1] = [2, 4]");
  const at::Tensor x = at::randn({1, 4, 48}, at::kDouble).requires_grad_(true);
  const at::Tensor out = sparse_attention_qkv(x, 2, csr.row_ptr, csr.col_idx, 0.5);
  const auto g = torch::autograd::grad({out.pow(2).sum()}, {x}, {}, true, /*create_graph=*/true);
  ASSERT_TRUE(g[0].requires_grad());
  expect_error([&] { g[0].sum().backward(); }, "double backward of sparsevit::sparse_attention_qkv is not supported");
}

}  // namespace
}  // namespace sparsevit::ops::testing
