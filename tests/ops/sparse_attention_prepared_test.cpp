// Prepared indices (defect: every call re-checked the CSR serially and every backward rebuilt
// its transpose) and the refusing autograd kernels of the private ops (defect: double backward
// returned gradients without a graph).
#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <gtest/gtest.h>
#include <torch/autograd.h>

#include <string>

#include "ops/sparse_attention.h"
#include "ops/sparse_attention_inputs.h"
#include "ops_test_helpers.h"

namespace sparsevit::ops::testing {
namespace {

TEST(SparseAttentionPrepared, APatternIsCheckedAndTransposedOnce) {
  at::manual_seed(31);
  const Csr csr = random_csr(3, 40, 1, 6, 77);
  const at::Tensor q = at::randn({2, 3, 40, 16}).requires_grad_(true);
  const PreparedCsrCacheStats before = prepared_csr_cache_stats();
  for (int step = 0; step < 4; ++step) sparse_attention(q, q, q, csr.row_ptr, csr.col_idx, 0.25).sum().backward();
  const PreparedCsrCacheStats after = prepared_csr_cache_stats();
  // 4 forwards + 4 backwards on one pattern: one preparation, seven reuses.
  EXPECT_EQ(after.misses - before.misses, 1);
  EXPECT_EQ(after.hits - before.hits, 7);
}

TEST(SparseAttentionPrepared, ReusedIndicesGiveTheSameResultsAsFreshOnes) {
  at::manual_seed(32);
  const Csr csr = random_csr(2, 50, 0, 9, 78);
  const at::Tensor q = at::randn({2, 2, 50, 8}, at::kDouble), k = at::randn({2, 2, 50, 8}, at::kDouble),
                   v = at::randn({2, 2, 50, 8}, at::kDouble), go = at::randn({2, 2, 50, 8}, at::kDouble);
  const Result first = run_op(q, k, v, csr, 0.3, go);
  const Result again = run_op(q, k, v, csr, 0.3, go);  // prepared indices reused
  const Csr fresh{csr.row_ptr.clone(), csr.col_idx.clone()};
  const Result cloned = run_op(q, k, v, fresh, 0.3, go);  // prepared again
  for (const Result* r : {&again, &cloned}) {
    EXPECT_TRUE(at::equal(first.out, r->out));
    EXPECT_TRUE(at::equal(first.dq, r->dq));
    EXPECT_TRUE(at::equal(first.dk, r->dk));
    EXPECT_TRUE(at::equal(first.dv, r->dv));
  }
  EXPECT_TRUE(matches_reference(first, run_reference(q, k, v, csr, 0.3, go), at::kDouble, "prepared"));
}

TEST(SparseAttentionPrepared, AnInPlaceEditIsCheckedAgain) {
  // The version counter changes with every in-place ATen write: an index made invalid after a
  // successful call is still rejected, never read out of bounds from a stale preparation.
  const at::Tensor q = at::randn({1, 1, 3, 4});
  at::Tensor row_ptr = at::tensor({0, 2, 3, 5}, at::kInt).view({1, 4});
  at::Tensor col_idx = at::tensor({0, 1, 1, 0, 2}, at::kInt).view({1, 5});
  EXPECT_NO_THROW(sparse_attention(q, q, q, row_ptr, col_idx, 1.0));
  col_idx[0][4] = 7;
  try {
    sparse_attention(q, q, q, row_ptr, col_idx, 1.0);
    ADD_FAILURE() << "expected an error";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("is not a token index"), std::string::npos) << e.what();
  }
  col_idx[0][4] = 2;
  EXPECT_NO_THROW(sparse_attention(q, q, q, row_ptr, col_idx, 1.0));
}

TEST(SparseAttentionPrepared, WithTheCacheOffEveryCallPreparesAgain) {
  // What `sparsevit bench` times as "prepared on every call": forward and backward each prepare,
  // as before; switching the cache back on finds the entry it had.
  at::manual_seed(34);
  const Csr csr = random_csr(2, 30, 1, 5, 80);
  const at::Tensor q = at::randn({1, 2, 30, 8}).requires_grad_(true);
  sparse_attention(q, q, q, csr.row_ptr, csr.col_idx, 0.25).sum().backward();  // prepared once
  const PreparedCsrCacheStats before = prepared_csr_cache_stats();
  set_prepared_csr_cache_enabled(false);
  sparse_attention(q, q, q, csr.row_ptr, csr.col_idx, 0.25).sum().backward();
  set_prepared_csr_cache_enabled(true);
  const PreparedCsrCacheStats off = prepared_csr_cache_stats();
  EXPECT_EQ(off.misses - before.misses, 2);
  EXPECT_EQ(off.hits - before.hits, 0);
  sparse_attention(q, q, q, csr.row_ptr, csr.col_idx, 0.25).sum().backward();
  const PreparedCsrCacheStats on = prepared_csr_cache_stats();
  EXPECT_EQ(on.misses - off.misses, 0);
  EXPECT_EQ(on.hits - off.hits, 2);
}

TEST(SparseAttentionPrepared, AWriteThatSkipsTheVersionCounterIsCheckedAgain) {
  // Tensor::data() shares storage but not the version counter: a write through it must not let
  // the operator read indices it never checked (out of bounds) from a stale preparation.
  const at::Tensor q = at::randn({1, 1, 3, 4});
  at::Tensor row_ptr = at::tensor({0, 2, 3, 5}, at::kInt).view({1, 4});
  at::Tensor col_idx = at::tensor({0, 1, 1, 0, 2}, at::kInt).view({1, 5});
  const at::Tensor before = sparse_attention(q, q, q, row_ptr, col_idx, 1.0);
  const int64_t version = col_idx._version();
  col_idx.data()[0][4] = 7;
  ASSERT_EQ(col_idx._version(), version);  // the premise: no version bump
  try {
    sparse_attention(q, q, q, row_ptr, col_idx, 1.0);
    ADD_FAILURE() << "expected an error";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("is not a token index"), std::string::npos) << e.what();
  }
  col_idx.data()[0][4] = 1;  // valid again, but a different pattern: the result must follow it
  const at::Tensor after = sparse_attention(q, q, q, row_ptr, col_idx, 1.0);
  const at::Tensor fresh = sparse_attention(q, q, q, row_ptr.clone(), col_idx.clone(), 1.0);
  EXPECT_TRUE(at::equal(after, fresh));
  EXPECT_FALSE(at::equal(after, before));
}

TEST(SparseAttentionPrepared, InferenceTensorIndicesAreReusedToo) {
  const Csr csr = random_csr(2, 30, 1, 5, 81);
  c10::InferenceMode guard;
  const at::Tensor rp = csr.row_ptr.clone(), ci = csr.col_idx.clone();  // inference tensors
  ASSERT_TRUE(rp.is_inference());
  const at::Tensor q = at::randn({1, 2, 30, 8});
  const PreparedCsrCacheStats before = prepared_csr_cache_stats();
  for (int i = 0; i < 3; ++i) sparse_attention(q, q, q, rp, ci, 0.25);
  const PreparedCsrCacheStats after = prepared_csr_cache_stats();
  EXPECT_EQ(after.misses - before.misses, 1);
  EXPECT_EQ(after.hits - before.hits, 2);
}

TEST(SparseAttentionAutograd, DoubleBackwardFailsWithAClearMessage) {
  at::manual_seed(33);
  const Csr csr = random_csr(2, 20, 1, 5, 79);
  const at::Tensor q = at::randn({1, 2, 20, 8}, at::kDouble).requires_grad_(true);
  const at::Tensor out = sparse_attention(q, q, q, csr.row_ptr, csr.col_idx, 0.5);
  const auto grads = torch::autograd::grad({out.pow(2).sum()}, {q}, {}, /*retain_graph=*/true, /*create_graph=*/true);
  // The gradient is part of a graph (not silently detached) ...
  ASSERT_TRUE(grads[0].requires_grad());
  // ... whose derivative through the operator refuses with a message that names it.
  try {
    grads[0].sum().backward();
    ADD_FAILURE() << "expected double backward to fail";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("double backward of sparsevit::sparse_attention is not supported"),
              std::string::npos)
        << e.what();
  }
  // First-order gradients are unaffected.
  at::Tensor p = q.detach().clone().requires_grad_(true);
  sparse_attention(p, p, p, csr.row_ptr, csr.col_idx, 0.5).pow(2).sum().backward();
  EXPECT_TRUE(at::allclose(p.grad(), grads[0].detach(), 1e-12, 1e-12));
}

}  // namespace
}  // namespace sparsevit::ops::testing
