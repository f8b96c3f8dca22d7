#include "train/losses.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "util/errors.h"

namespace sparsevit::train {
namespace {

namespace F = torch::nn::functional;

// log_softmax of {1, 2, 3} and {0, 0, 0} by hand.
double lse123() { return std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0)); }

torch::Tensor logits2x3() { return torch::tensor({{1.0, 2.0, 3.0}, {0.0, 0.0, 0.0}}, torch::kDouble); }

TEST(Losses, LabelSmoothingByHand) {
  const auto labels = torch::tensor({2, 1}, torch::kLong);
  const double nll0 = lse123() - 3.0, nll1 = std::log(3.0);
  const double smooth0 = lse123() - 2.0, smooth1 = std::log(3.0);  // mean of -log p over classes
  const double expected = 0.5 * ((0.9 * nll0 + 0.1 * smooth0) + (0.9 * nll1 + 0.1 * smooth1));
  EXPECT_NEAR(label_smoothing_cross_entropy(logits2x3(), labels, 0.1).item<double>(), expected, 1e-12);
  EXPECT_NEAR(label_smoothing_cross_entropy(logits2x3(), labels, 0.0).item<double>(), 0.5 * (nll0 + nll1), 1e-12);
}

TEST(Losses, MatchTorchCrossEntropy) {
  torch::manual_seed(3);
  const auto logits = torch::randn({7, 5}, torch::kDouble) * 3;
  const auto labels = torch::randint(0, 5, {7}, torch::kLong);
  const auto plain = F::cross_entropy(logits, labels);
  EXPECT_NEAR(label_smoothing_cross_entropy(logits, labels, 0.0).item<double>(), plain.item<double>(), 1e-12);
  // torch's label_smoothing uses the same formula as timm's LabelSmoothingCrossEntropy.
  const auto smoothed = F::cross_entropy(logits, labels, F::CrossEntropyFuncOptions().label_smoothing(0.2));
  EXPECT_NEAR(label_smoothing_cross_entropy(logits, labels, 0.2).item<double>(), smoothed.item<double>(), 1e-12);
  // Soft targets equal to one-hot give the plain cross-entropy.
  const auto one_hot = one_hot_smoothed(labels, 5, 0.0).to(torch::kDouble);
  EXPECT_NEAR(soft_target_cross_entropy(logits, one_hot).item<double>(), plain.item<double>(), 1e-12);
  // And smoothed one-hot targets give the label-smoothing loss.
  EXPECT_NEAR(soft_target_cross_entropy(logits, one_hot_smoothed(labels, 5, 0.2)).item<double>(),
              smoothed.item<double>(), 1e-6);
}

TEST(Losses, SoftTargetByHand) {
  const auto targets = torch::tensor({{0.25, 0.25, 0.5}, {1.0, 0.0, 0.0}}, torch::kDouble);
  const double row0 = 0.25 * (lse123() - 1) + 0.25 * (lse123() - 2) + 0.5 * (lse123() - 3);
  const double row1 = std::log(3.0);
  EXPECT_NEAR(soft_target_cross_entropy(logits2x3(), targets).item<double>(), 0.5 * (row0 + row1), 1e-12);
}

TEST(Losses, GradientsFlow) {
  auto logits = logits2x3().clone().requires_grad_(true);
  label_smoothing_cross_entropy(logits, torch::tensor({0, 2}), 0.1).backward();
  ASSERT_TRUE(logits.grad().defined());
  // Softmax-CE gradients sum to zero over each row.
  EXPECT_NEAR(logits.grad().sum(1).abs().max().item<double>(), 0.0, 1e-12);
}

TEST(Losses, OneHotSmoothed) {
  const auto t = one_hot_smoothed(torch::tensor({2, 0}), 4, 0.1);
  EXPECT_EQ(t.scalar_type(), torch::kFloat);
  ASSERT_EQ(t.sizes(), (std::vector<int64_t>{2, 4}));
  const float off = 0.1f / 4, on = 1.0f - 0.1f + 0.1f / 4;
  EXPECT_FLOAT_EQ(t[0][2].item<float>(), on);
  EXPECT_FLOAT_EQ(t[0][0].item<float>(), off);
  EXPECT_FLOAT_EQ(t[1][0].item<float>(), on);
  EXPECT_FLOAT_EQ(t[1][3].item<float>(), off);
  EXPECT_TRUE(torch::allclose(t.sum(1), torch::ones({2})));
}

TEST(Losses, BadInputsAreUsageErrors) {
  EXPECT_THROW(one_hot_smoothed(torch::tensor({0, 4}), 4, 0.1), UsageError);
  EXPECT_THROW(one_hot_smoothed(torch::tensor({-1}), 4, 0.1), UsageError);
  EXPECT_THROW(one_hot_smoothed(torch::tensor({0}), 4, 1.0), UsageError);
  EXPECT_THROW(label_smoothing_cross_entropy(logits2x3(), torch::tensor({0, 3}), 0.1), UsageError);
  EXPECT_THROW(label_smoothing_cross_entropy(logits2x3(), torch::tensor({0}), 0.1), UsageError);
  EXPECT_THROW(label_smoothing_cross_entropy(logits2x3(), torch::tensor({0.0, 1.0}), 0.1), UsageError);
  EXPECT_THROW(soft_target_cross_entropy(logits2x3(), torch::ones({2, 4})), UsageError);
  EXPECT_THROW(soft_target_cross_entropy(torch::ones({3}), torch::ones({3})), UsageError);
  try {
    one_hot_smoothed(torch::tensor({12}), 10, 0.1);
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--nb_classes"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace sparsevit::train
