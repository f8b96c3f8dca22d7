#include "train/mixup.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "train/losses.h"
#include "util/errors.h"

namespace sparsevit::train {
namespace {

struct Moments {
  double mean = 0, var = 0;
};

template <typename Draw>
Moments moments(int n, Draw draw) {
  double s = 0, s2 = 0;
  for (int i = 0; i < n; ++i) {
    const double x = draw();
    s += x;
    s2 += x * x;
  }
  const double mean = s / n;
  return {mean, s2 / n - mean * mean};
}

TEST(MixupSamplers, UniformAndNormalMoments) {
  std::mt19937_64 rng(1);
  const auto u = moments(50000, [&] { return uniform01(rng); });
  EXPECT_NEAR(u.mean, 0.5, 0.01);
  EXPECT_NEAR(u.var, 1.0 / 12, 0.003);
  const auto z = moments(50000, [&] { return standard_normal(rng); });
  EXPECT_NEAR(z.mean, 0.0, 0.02);
  EXPECT_NEAR(z.var, 1.0, 0.03);
  std::vector<int> counts(5, 0);
  for (int i = 0; i < 50000; ++i) ++counts[uniform_int(rng, 3, 8) - 3];
  for (int c : counts) EXPECT_NEAR(c, 10000, 400);
  EXPECT_EQ(uniform_int(rng, 4, 4), 4);
}

TEST(MixupSamplers, GammaMoments) {
  // Gamma(k, 1): mean k, variance k; covers both branches of Marsaglia–Tsang (k < 1 boosts).
  for (double k : {0.2, 0.8, 1.0, 2.5, 7.0}) {
    std::mt19937_64 rng(42);
    const auto m = moments(40000, [&] { return sample_gamma(rng, k); });
    EXPECT_NEAR(m.mean, k, 0.03 * std::max(1.0, k)) << "shape " << k;
    EXPECT_NEAR(m.var, k, 0.08 * std::max(1.0, k)) << "shape " << k;
  }
  std::mt19937_64 rng(0);
  EXPECT_THROW(sample_gamma(rng, 0.0), UsageError);
}

TEST(MixupSamplers, BetaMoments) {
  for (double a : {0.1, 0.8, 1.0, 2.0}) {
    std::mt19937_64 rng(7);
    const auto m = moments(40000, [&] {
      const double x = sample_beta(rng, a, a);
      EXPECT_TRUE(x >= 0.0 && x <= 1.0);
      return x;
    });
    EXPECT_NEAR(m.mean, 0.5, 0.01) << "alpha " << a;
    EXPECT_NEAR(m.var, 1.0 / (4 * (2 * a + 1)), 0.01) << "alpha " << a;  // ab/((a+b)^2(a+b+1))
  }
  std::mt19937_64 rng(7);
  const auto m = moments(40000, [&] { return sample_beta(rng, 2.0, 6.0); });
  EXPECT_NEAR(m.mean, 0.25, 0.005);
  // Tiny shapes stay finite (no 0/0 from underflowing gamma draws).
  for (int i = 0; i < 1000; ++i) EXPECT_TRUE(std::isfinite(sample_beta(rng, 1e-3, 1e-3)));
}

TEST(MixupSamplers, SameStreamForTheSameSeed) {
  std::mt19937_64 a(123), b(123);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(sample_beta(a, 0.8, 0.8), sample_beta(b, 0.8, 0.8));
  // Pinned: the samplers use nothing but mt19937_64 (fully specified by the standard) and IEEE
  // arithmetic, so these draws are the same with every standard library (std::gamma_distribution
  // would not be).
  std::mt19937_64 rng(2024);
  const double u = uniform01(rng);
  const double beta1 = sample_beta(rng, 0.8, 0.8);
  const double beta2 = sample_beta(rng, 0.8, 0.8);
  const double gamma = sample_gamma(rng, 2.5);
  // Values from an independent Python re-implementation (mt19937_64 + these samplers).
  EXPECT_NEAR(u, 0.612684545263525, 1e-15);
  EXPECT_NEAR(beta1, 0.6312971663681353, 1e-12);
  EXPECT_NEAR(beta2, 0.4012206232585035, 1e-12);
  EXPECT_NEAR(gamma, 2.170273936235081, 1e-12);
}

MixupConfig base_config() {
  MixupConfig c;
  c.num_classes = 5;
  c.label_smoothing = 0.1;
  return c;
}

torch::Tensor images(int64_t b, int64_t h = 8, int64_t w = 8) {
  return torch::arange(b * 2 * h * w, torch::kFloat).reshape({b, 2, h, w});
}

TEST(Mixup, DisabledGivesSmoothedOneHot) {
  Mixup mixup(base_config());
  EXPECT_FALSE(mixup.enabled());
  std::mt19937_64 rng(0);
  const auto x = images(4);
  const auto y = torch::tensor({0, 1, 2, 3});
  const auto [mixed, targets] = mixup.apply(x, y, rng);
  EXPECT_TRUE(mixed.equal(x));
  EXPECT_TRUE(targets.equal(one_hot_smoothed(y, 5, 0.1)));
  EXPECT_FALSE(mixup.last_draw().mixed);
}

TEST(Mixup, MixupBlendsWithTheFlippedBatch) {
  auto c = base_config();
  c.mixup_alpha = 0.8;
  Mixup mixup(c);
  EXPECT_TRUE(mixup.enabled());
  std::mt19937_64 rng(5);
  const auto x = images(4);
  const auto x_copy = x.clone();
  const auto y = torch::tensor({0, 1, 2, 4});
  const auto [mixed, targets] = mixup.apply(x, y, rng);
  const auto& d = mixup.last_draw();
  ASSERT_TRUE(d.mixed);
  EXPECT_FALSE(d.cutmix);
  EXPECT_GT(d.lambda, 0.0);
  EXPECT_LT(d.lambda, 1.0);
  EXPECT_TRUE(x.equal(x_copy)) << "input modified";
  EXPECT_TRUE(torch::allclose(mixed, x * d.lambda + x.flip(0) * (1 - d.lambda)));
  const auto expected = one_hot_smoothed(y, 5, 0.1) * d.lambda + one_hot_smoothed(y.flip(0), 5, 0.1) * (1 - d.lambda);
  EXPECT_TRUE(torch::allclose(targets, expected));
  // Label mass: each row sums to 1 and each class keeps its total mass (flip is a permutation).
  EXPECT_TRUE(torch::allclose(targets.sum(1), torch::ones({4})));
  EXPECT_TRUE(torch::allclose(targets.sum(0), one_hot_smoothed(y, 5, 0.1).sum(0), 1e-5, 1e-6));
  // Sample 0 got lambda of its label (+ smoothing) and 1 - lambda of sample 3's.
  EXPECT_NEAR(targets[0][0].item<float>(), d.lambda * (0.9 + 0.02) + (1 - d.lambda) * 0.02, 1e-6);
  EXPECT_NEAR(targets[0][4].item<float>(), (1 - d.lambda) * (0.9 + 0.02) + d.lambda * 0.02, 1e-6);
}

TEST(Mixup, CutmixPastesABoxAndCorrectsLambdaByArea) {
  auto c = base_config();
  c.cutmix_alpha = 1.0;
  Mixup mixup(c);
  std::mt19937_64 rng(11);
  int boxes = 0;
  for (int trial = 0; trial < 20; ++trial) {
    const auto x = images(6, 16, 12);
    const auto y = torch::tensor({0, 1, 2, 3, 4, 0});
    const auto [mixed, targets] = mixup.apply(x, y, rng);
    const auto& d = mixup.last_draw();
    ASSERT_TRUE(d.cutmix);
    ASSERT_TRUE(d.y0 >= 0 && d.y0 <= d.y1 && d.y1 <= 16 && d.x0 >= 0 && d.x0 <= d.x1 && d.x1 <= 12);
    const double area = static_cast<double>((d.y1 - d.y0) * (d.x1 - d.x0));
    EXPECT_DOUBLE_EQ(d.lambda, 1.0 - area / (16.0 * 12.0));
    auto expected = x.clone();
    expected.index_put_({torch::indexing::Slice(), torch::indexing::Slice(), torch::indexing::Slice(d.y0, d.y1),
                         torch::indexing::Slice(d.x0, d.x1)},
                        x.flip(0).index({torch::indexing::Slice(), torch::indexing::Slice(),
                                         torch::indexing::Slice(d.y0, d.y1), torch::indexing::Slice(d.x0, d.x1)}));
    EXPECT_TRUE(mixed.equal(expected));
    EXPECT_TRUE(torch::allclose(targets, mixup_target(y, 5, d.lambda, 0.1)));
    EXPECT_TRUE(torch::allclose(targets.sum(0), one_hot_smoothed(y, 5, 0.1).sum(0), 1e-5, 1e-6));
    boxes += area > 0;
  }
  EXPECT_GT(boxes, 10);
}

TEST(Mixup, CutmixMinMaxBoxSizes) {
  auto c = base_config();
  c.cutmix_minmax = std::make_pair(0.25, 0.5);
  Mixup mixup(c);
  EXPECT_TRUE(mixup.enabled());
  std::mt19937_64 rng(3);
  for (int trial = 0; trial < 30; ++trial) {
    mixup.apply(images(2, 32, 32), torch::tensor({0, 1}), rng);
    const auto& d = mixup.last_draw();
    ASSERT_TRUE(d.cutmix);
    EXPECT_GE(d.y1 - d.y0, 8);
    EXPECT_LT(d.y1 - d.y0, 16);
    EXPECT_GE(d.x1 - d.x0, 8);
    EXPECT_LT(d.x1 - d.x0, 16);
    EXPECT_DOUBLE_EQ(d.lambda, 1.0 - (d.y1 - d.y0) * (d.x1 - d.x0) / 1024.0);
  }
}

TEST(Mixup, SwitchAndApplyProbabilities) {
  auto c = base_config();
  c.mixup_alpha = 0.8;
  c.cutmix_alpha = 1.0;
  c.prob = 0.6;
  c.switch_prob = 0.5;
  Mixup mixup(c);
  std::mt19937_64 rng(9);
  int mixed = 0, cut = 0;
  for (int i = 0; i < 1000; ++i) {
    mixup.apply(images(2, 4, 4), torch::tensor({0, 1}), rng);
    mixed += mixup.last_draw().mixed;
    cut += mixup.last_draw().cutmix;
  }
  EXPECT_NEAR(mixed, 600, 60);
  EXPECT_NEAR(cut, 300, 50);
}

TEST(Mixup, ProbabilityZeroNeverMixes) {
  auto c = base_config();
  c.mixup_alpha = 1.0;
  c.prob = 0.0;
  Mixup mixup(c);
  std::mt19937_64 rng(0);
  for (int i = 0; i < 20; ++i) {
    const auto x = images(2);
    const auto [mixed, targets] = mixup.apply(x, torch::tensor({1, 2}), rng);
    EXPECT_TRUE(mixed.equal(x));
    EXPECT_FALSE(mixup.last_draw().mixed);
  }
}

TEST(Mixup, OddBatchAndVideoShapes) {
  auto c = base_config();
  c.mixup_alpha = 1.0;
  Mixup mixup(c);
  std::mt19937_64 rng(4);
  const auto x = images(5);
  const auto y = torch::tensor({0, 1, 2, 3, 4});
  const auto [mixed, targets] = mixup.apply(x, y, rng);
  ASSERT_TRUE(mixup.last_draw().mixed);
  // The middle sample is mixed with itself.
  EXPECT_TRUE(torch::allclose(mixed[2], x[2]));
  EXPECT_TRUE(torch::allclose(targets[2], one_hot_smoothed(y, 5, 0.1)[2]));
  EXPECT_TRUE(torch::allclose(targets.sum(0), one_hot_smoothed(y, 5, 0.1).sum(0), 1e-5, 1e-6));

  auto cut = base_config();
  cut.cutmix_alpha = 1.0;
  Mixup cutmix(cut);
  const auto video = torch::rand({3, 2, 4, 8, 8});  // [B, C, T, H, W]
  const auto [v, t] = cutmix.apply(video, torch::tensor({0, 1, 2}), rng);
  EXPECT_EQ(v.sizes(), video.sizes());
}

TEST(Mixup, SameSeedSameBatch) {
  auto c = base_config();
  c.mixup_alpha = 0.8;
  c.cutmix_alpha = 1.0;
  Mixup a(c), b(c);
  std::mt19937_64 ra(77), rb(77);
  for (int i = 0; i < 10; ++i) {
    const auto x = torch::rand({4, 3, 8, 8});
    const auto y = torch::tensor({0, 1, 2, 3});
    const auto [xa, ta] = a.apply(x, y, ra);
    const auto [xb, tb] = b.apply(x, y, rb);
    EXPECT_TRUE(xa.equal(xb));
    EXPECT_TRUE(ta.equal(tb));
  }
}

TEST(Mixup, InvalidConfigAndInputs) {
  auto c = base_config();
  c.mixup_alpha = -1;
  EXPECT_THROW(Mixup{c}, UsageError);
  c = base_config();
  c.prob = 1.5;
  EXPECT_THROW(Mixup{c}, UsageError);
  c = base_config();
  c.num_classes = 0;
  EXPECT_THROW(Mixup{c}, UsageError);
  c = base_config();
  c.cutmix_minmax = std::make_pair(0.5, 0.4);
  EXPECT_THROW(Mixup{c}, UsageError);
  c = base_config();
  c.mixup_alpha = 1;
  Mixup mixup(c);
  std::mt19937_64 rng(0);
  EXPECT_THROW(mixup.apply(images(2), torch::tensor({0, 1, 2}), rng), UsageError);
  EXPECT_THROW(mixup.apply(images(2).to(torch::kByte), torch::tensor({0, 1}), rng), UsageError);
  EXPECT_THROW(mixup.apply(images(2), torch::tensor({0, 7}), rng), UsageError);
}

}  // namespace
}  // namespace sparsevit::train
