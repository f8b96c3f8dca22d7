// ActionNormalizer: Diffusion Policy's LinearNormalizer in limits mode.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "policy/action_normalizer.h"
#include "util/errors.h"

namespace sparsevit::policy {
namespace {

TEST(ActionNormalizer, MapsTheFittedLimitsToMinusOneAndOne) {
  // Dimension 0 spans [10, 30], dimension 1 [-2, 6], dimension 2 is constant 4.
  const at::Tensor data = at::tensor({10.0f, -2.0f, 4.0f, 30.0f, 6.0f, 4.0f, 20.0f, 0.0f, 4.0f}).view({3, 3});
  const ActionNormalizer n = ActionNormalizer::fit(data);
  const at::Tensor y = n.normalize(data);
  EXPECT_TRUE(at::allclose(y, at::tensor({-1.0f, -1.0f, 0.0f, 1.0f, 1.0f, 0.0f, 0.0f, -0.5f, 0.0f}).view({3, 3})));
  EXPECT_TRUE(at::allclose(n.scale(), at::tensor({0.1f, 0.25f, 1.0f})));
  // The constant dimension: scale 1, offset 0 - 4 (shifted to the output midpoint, not stretched).
  EXPECT_FLOAT_EQ(n.offset()[2].item<float>(), -4.0f);
  EXPECT_FLOAT_EQ(n.normalize(at::tensor({20.0f, 2.0f, 5.0f}))[2].item<float>(), 1.0f);
}

TEST(ActionNormalizer, RoundTripsAndRestoresFromScaleAndOffset) {
  const at::Tensor data = at::randn({50, 4, 2}) * 37.0 + 5.0;  // [N, T, D]: leading indices are samples
  const ActionNormalizer n = ActionNormalizer::fit(data);
  const at::Tensor y = n.normalize(data);
  EXPECT_NEAR(y.min().item<double>(), -1.0, 1e-6);
  EXPECT_NEAR(y.max().item<double>(), 1.0, 1e-6);
  EXPECT_TRUE(at::allclose(n.unnormalize(y), data, 1e-5, 1e-4));
  const ActionNormalizer restored(n.scale(), n.offset());
  EXPECT_TRUE(at::equal(restored.normalize(data), y));
  EXPECT_EQ(restored.dim(), 2);
}

TEST(ActionNormalizer, RangeEpsDecidesWhatIsConstant) {
  const at::Tensor almost = at::tensor({1.0f, 1.00005f}).view({2, 1});  // range 5e-5 < 1e-4
  EXPECT_FLOAT_EQ(ActionNormalizer::fit(almost).scale()[0].item<float>(), 1.0f);
  const at::Tensor wider = at::tensor({1.0f, 1.001f}).view({2, 1});
  EXPECT_NEAR(ActionNormalizer::fit(wider).scale()[0].item<double>(), 2000.0, 1.0);
}

TEST(ActionNormalizer, RejectsMisuse) {
  ActionNormalizer unfitted;
  EXPECT_THROW(unfitted.normalize(at::zeros({2, 2})), UsageError);
  const ActionNormalizer n = ActionNormalizer::fit(at::rand({8, 2}));
  EXPECT_THROW(n.normalize(at::zeros({2, 3})), UsageError);
  EXPECT_THROW(ActionNormalizer(at::zeros({2}), at::zeros({2})), UsageError);
  EXPECT_THROW(ActionNormalizer::fit(at::zeros({0, 2})), UsageError);
}

}  // namespace
}  // namespace sparsevit::policy
