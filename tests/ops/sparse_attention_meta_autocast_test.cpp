// The Meta and AutocastCPU kernels of every sparsevit operator, on every LibTorch the project builds
// against (1.13 here has no torch.compile, so python/tests/test_compile.py skips there; these run):
// meta tensors get the CPU kernels' shapes, dtypes and strides without touching row_ptr's values,
// and inside bfloat16 autocast the public ops run in bfloat16 (equal to the op on bfloat16 inputs)
// while float64 is left alone and gradients reach float32 inputs.
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <tuple>

#include "ops/sparse_attention.h"
#include "ops_test_helpers.h"
#include "runtime/autocast.h"

namespace sparsevit::ops::testing {
namespace {

void expect_same_metadata(const at::Tensor& meta, const at::Tensor& real, const char* what) {
  EXPECT_TRUE(meta.is_meta()) << what;
  EXPECT_EQ(meta.sizes(), real.sizes()) << what;
  EXPECT_EQ(meta.strides(), real.strides()) << what;
  EXPECT_EQ(meta.scalar_type(), real.scalar_type()) << what;
}

at::Tensor meta(const at::Tensor& t) { return t.to(at::kMeta); }

TEST(SparseAttentionMeta, ForwardAndBackwardGiveTheCpuKernelsMetadata) {
  const Csr csr = random_csr(3, 11, 0, 5, 7);
  for (const at::ScalarType dtype : {at::kFloat, at::kDouble, at::kBFloat16}) {
    // Strided views, as timm's permute gives them.
    const at::Tensor q = at::randn({2, 11, 3, 16}).to(dtype).transpose(1, 2);
    const at::Tensor k = at::randn({2, 11, 3, 16}).to(dtype).transpose(1, 2);
    const at::Tensor v = at::randn({2, 11, 3, 16}).to(dtype).transpose(1, 2);
    static auto forward = c10::Dispatcher::singleton()
                              .findSchemaOrThrow("sparsevit::_sparse_attention_forward", "")
                              .typed<std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&,
                                                                        const at::Tensor&, const at::Tensor&,
                                                                        const at::Tensor&, double)>();
    const auto [out, lse] = forward.call(q, k, v, csr.row_ptr, csr.col_idx, 0.25);
    const auto [meta_out, meta_lse] =
        forward.call(meta(q), meta(k), meta(v), meta(csr.row_ptr), meta(csr.col_idx), 0.25);
    expect_same_metadata(meta_out, out, "out");
    expect_same_metadata(meta_lse, lse, "lse");
    expect_same_metadata(sparse_attention(meta(q), meta(k), meta(v), meta(csr.row_ptr), meta(csr.col_idx), 0.25), out,
                         "sparse_attention");

    static auto backward = c10::Dispatcher::singleton()
                               .findSchemaOrThrow("sparsevit::_sparse_attention_backward", "")
                               .typed<std::tuple<at::Tensor, at::Tensor, at::Tensor>(
                                   const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                   const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                   double)>();
    const at::Tensor go = at::randn_like(out);
    const auto real = backward.call(go, q, k, v, out, lse, csr.row_ptr, csr.col_idx, 0.25);
    const auto fake = backward.call(meta(go), meta(q), meta(k), meta(v), meta(out), meta(lse), meta(csr.row_ptr),
                                    meta(csr.col_idx), 0.25);
    expect_same_metadata(std::get<0>(fake), std::get<0>(real), "dq");
    expect_same_metadata(std::get<1>(fake), std::get<1>(real), "dk");
    expect_same_metadata(std::get<2>(fake), std::get<2>(real), "dv");
  }
}

TEST(SparseAttentionMeta, PackedQkvGivesTheCpuKernelsMetadata) {
  const Csr csr = random_csr(4, 9, 1, 4, 3);
  const at::Tensor qkv = at::randn({2, 9, 3 * 4 * 8});
  const at::Tensor out = sparse_attention_qkv(qkv, 4, csr.row_ptr, csr.col_idx, 0.3);
  expect_same_metadata(sparse_attention_qkv(meta(qkv), 4, meta(csr.row_ptr), meta(csr.col_idx), 0.3), out, "out");
}

TEST(SparseAttentionMeta, RefusesInputsOfTheWrongRankInOneLine) {
  const Csr csr = random_csr(2, 5, 1, 3, 1);
  const at::Tensor q = at::empty({2, 5, 8}, at::kMeta);  // [B, N, D]: no head dimension
  try {
    sparse_attention(q, q, q, meta(csr.row_ptr), meta(csr.col_idx), 1.0);
    FAIL() << "expected an error";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what_without_backtrace()).find("q must have 4 dimensions, got 3"), std::string::npos)
        << e.what_without_backtrace();
  }
}

TEST(SparseAttentionAutocast, RunsInBfloat16OnTheCpuAndLeavesFloat64Alone) {
  const Csr csr = random_csr(3, 13, 1, 6, 11);
  const at::Tensor q = at::randn({2, 3, 13, 16}).requires_grad_(true);
  const at::Tensor k = at::randn({2, 3, 13, 16}), v = at::randn({2, 3, 13, 16});
  at::Tensor out;
  {
    runtime::AutocastGuard autocast(true);
    out = sparse_attention(q, k, v, csr.row_ptr, csr.col_idx, 0.25);
    EXPECT_EQ(out.scalar_type(), at::kBFloat16);
    const at::Tensor d = at::randn({2, 3, 13, 16}, at::kDouble);
    EXPECT_EQ(sparse_attention(d, d, d, csr.row_ptr, csr.col_idx, 0.25).scalar_type(), at::kDouble);
    const at::Tensor qkv = at::randn({2, 13, 3 * 3 * 16});
    EXPECT_EQ(sparse_attention_qkv(qkv, 3, csr.row_ptr, csr.col_idx, 0.25).scalar_type(), at::kBFloat16);
  }
  const at::Tensor expected = sparse_attention(q.detach().to(at::kBFloat16), k.to(at::kBFloat16),
                                               v.to(at::kBFloat16), csr.row_ptr, csr.col_idx, 0.25);
  EXPECT_TRUE(at::equal(out.detach(), expected));
  out.to(at::kFloat).sum().backward();
  ASSERT_TRUE(q.grad().defined());
  EXPECT_EQ(q.grad().scalar_type(), at::kFloat);
  EXPECT_GT(q.grad().abs().sum().item<double>(), 0.0);
}

}  // namespace
}  // namespace sparsevit::ops::testing
