// Prepared indices (defect: every call re-checked the CSR serially and every backward rebuilt
// its transpose) and the refusing autograd kernels of the private ops (defect: double backward
// returned gradients without a graph).
#include <ATen/ATen.h>
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
