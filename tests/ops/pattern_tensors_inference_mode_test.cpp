// A pattern converted for the first time under InferenceMode (an evaluation before training, or a
// library user's inference call) must stay usable for training: the content-keyed cache hands the
// same tensors to every later call, and inference tensors can neither be saved for backward nor
// carry the version counter the operator's prepared-index reuse is keyed by.
#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <gtest/gtest.h>

#include "ops/sparse_attention.h"
#include "patterns/mask_registry.h"
#include "patterns/pattern.h"

namespace sparsevit::ops::testing {
namespace {

TEST(PatternTensorsInferenceMode, FirstConversionUnderInferenceModeStillTrains) {
  patterns::MaskKwargs kw;
  kw.set_scalar("window", "3");
  patterns::MaskContext context;  // fields by name: the struct's layout is being reshaped
  context.num_tokens = 23;
  context.num_heads = 2;
  context.num_layers = 1;
  context.num_prefix_tokens = 1;
  const patterns::Pattern pattern = patterns::build_mask("local", context, kw);
  {
    c10::InferenceMode guard;
    const PatternTensors t = pattern_tensors(pattern);
    EXPECT_FALSE(t.row_ptr.is_inference());
    EXPECT_FALSE(t.col_idx.is_inference());
    const at::Tensor x = at::randn({1, 2, 23, 8});
    EXPECT_EQ(sparse_attention(x, x, x, pattern, 0.3).sizes(), x.sizes());
  }
  EXPECT_FALSE(PatternTensors::from_pattern(pattern).row_ptr.is_inference());
  // Training with the cached (first made under InferenceMode) tensors: saved for backward.
  const at::Tensor q = at::randn({1, 2, 23, 8}).requires_grad_(true);
  sparse_attention(q, q, q, pattern, 0.3).sum().backward();
  ASSERT_TRUE(q.grad().defined());
  EXPECT_TRUE(q.grad().isfinite().all().item<bool>());
}

}  // namespace
}  // namespace sparsevit::ops::testing
