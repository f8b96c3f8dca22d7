// The DDPM / DDIM schedules: the cosine betas and alphas_cumprod against their closed form,
// add_noise, DDPM and DDIM steps against diffusers-0.11.1 formulas evaluated by the independent
// reference (tests/golden/conditional_unet1d_reference.py), DDIM spacing, determinism.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <vector>

#include "policy/noise_scheduler.h"
#include "policy_golden.h"
#include "util/errors.h"

namespace sparsevit::golden::diffusion_policy {
namespace {

double alpha_bar(double t) {
  const double c = std::cos((t + 0.008) / 1.008 * M_PI / 2);
  return c * c;
}

at::Tensor schedule_input(const float* values) { return float_tensor(values, {2, 8, 2}); }

TEST(NoiseSchedule, CosineBetasAndCumprodFollowTheClosedForm) {
  policy::DDPMScheduler ddpm;
  ASSERT_EQ(ddpm.betas().numel(), 100);
  EXPECT_EQ(ddpm.betas().scalar_type(), at::kFloat);
  for (int64_t i = 0; i < 100; ++i) {
    const double beta = std::min(1 - alpha_bar((i + 1) / 100.0) / alpha_bar(i / 100.0), 0.999);
    EXPECT_NEAR(ddpm.betas()[i].item<double>(), beta, 1e-7 * beta) << i;
    EXPECT_EQ(ddpm.betas()[i].item<double>(), kBetas[i]) << i;
    EXPECT_NEAR(ddpm.alphas_cumprod()[i].item<double>(), kAlphasCumprod[i], 1e-7) << i;
    // The product telescopes to abar((i + 1) / n) / abar(0) until the last step's beta is capped.
    if (i < 99) {
      EXPECT_NEAR(ddpm.alphas_cumprod()[i].item<double>(), alpha_bar((i + 1) / 100.0) / alpha_bar(0), 2e-6);
    }
  }
  EXPECT_FLOAT_EQ(ddpm.betas()[99].item<float>(), 0.999f);
}

TEST(NoiseSchedule, AddNoiseMatchesTheReference) {
  policy::DDPMScheduler ddpm;
  const at::Tensor noisy = ddpm.add_noise(schedule_input(kScheduleX0), schedule_input(kScheduleNoise),
                                          at::tensor({3, 71}, at::kLong));
  EXPECT_LT(max_relative_error(noisy, double_tensor(kAddNoise, {2, 8, 2})), 1e-6);
  EXPECT_THROW(ddpm.add_noise(schedule_input(kScheduleX0), schedule_input(kScheduleNoise), at::tensor({3, 100})),
               UsageError);
}

TEST(NoiseSchedule, DdpmStepMatchesTheReference) {
  policy::DDPMScheduler ddpm;
  const at::Tensor eps = schedule_input(kScheduleEpsilon), x = schedule_input(kScheduleSample);
  EXPECT_LT(max_relative_error(ddpm.step_with_noise(eps, 37, x, schedule_input(kScheduleStepNoise)),
                               double_tensor(kDdpmStep37, {2, 8, 2})),
            2e-6);
  // t = 0 adds no noise; the clipped x0 estimate shows as the +-1 entries.
  EXPECT_LT(max_relative_error(ddpm.step(eps, 0, x), double_tensor(kDdpmStep0, {2, 8, 2})), 2e-6);
  // The noise comes from the generator exactly as torch.randn(shape, generator=...) draws it.
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(1234);
  EXPECT_LT(max_relative_error(ddpm.step(eps, 37, x, gen), double_tensor(kDdpmStep37Seeded, {2, 8, 2})), 2e-6);
  const double abar = kAlphasCumprod[37], abar_prev = kAlphasCumprod[36];
  EXPECT_NEAR(ddpm.variance(37), (1 - abar_prev) / (1 - abar) * kBetas[37], 1e-12);
  EXPECT_DOUBLE_EQ(ddpm.variance(0), 1e-20);  // (1 - 1) / ... clamped
}

TEST(NoiseSchedule, DdpmIsDeterministicUnderASeed) {
  policy::DDPMScheduler ddpm;
  const at::Tensor eps = schedule_input(kScheduleEpsilon), x = schedule_input(kScheduleSample);
  at::Generator a = at::make_generator<at::CPUGeneratorImpl>(7), b = at::make_generator<at::CPUGeneratorImpl>(7);
  at::Generator c = at::make_generator<at::CPUGeneratorImpl>(8);
  const at::Tensor first = ddpm.step(eps, 50, x, a);
  EXPECT_TRUE(at::equal(first, ddpm.step(eps, 50, x, b)));
  EXPECT_FALSE(at::equal(first, ddpm.step(eps, 50, x, c)));
  const std::vector<int64_t> steps = ddpm.timesteps();
  ASSERT_EQ(steps.size(), 100u);
  EXPECT_EQ(steps.front(), 99);
  EXPECT_EQ(steps.back(), 0);
  at::Generator d = at::make_generator<at::CPUGeneratorImpl>(3), e = at::make_generator<at::CPUGeneratorImpl>(3);
  const at::Tensor t = ddpm.random_timesteps(64, d);
  EXPECT_TRUE(at::equal(t, ddpm.random_timesteps(64, e)));
  EXPECT_GE(t.min().item<int64_t>(), 0);
  EXPECT_LT(t.max().item<int64_t>(), 100);
}

TEST(NoiseSchedule, DdimSpacingAndStepMatchDiffusers) {
  policy::DDIMScheduler ddim;
  ddim.set_timesteps(10);
  EXPECT_EQ(ddim.timesteps(), (std::vector<int64_t>{90, 80, 70, 60, 50, 40, 30, 20, 10, 0}));
  const at::Tensor eps = schedule_input(kScheduleEpsilon), x = schedule_input(kScheduleSample);
  EXPECT_LT(max_relative_error(ddim.step(eps, 90, x), double_tensor(kDdimStep90, {2, 8, 2})), 2e-6);
  EXPECT_LT(max_relative_error(ddim.step(eps, 0, x), double_tensor(kDdimStep0, {2, 8, 2})), 2e-6);
  ddim.set_timesteps(3);  // ratio 100 / 3 = 33: the schedule stops short of the top
  EXPECT_EQ(ddim.timesteps(), (std::vector<int64_t>{66, 33, 0}));
  ddim.set_timesteps(100);
  ASSERT_EQ(ddim.timesteps().size(), 100u);
  for (int64_t i = 0; i < 100; ++i) EXPECT_EQ(ddim.timesteps()[static_cast<size_t>(i)], 99 - i);
  EXPECT_THROW(ddim.set_timesteps(0), UsageError);
  EXPECT_THROW(ddim.set_timesteps(101), UsageError);
  EXPECT_THROW(ddim.step(eps, 100, x), UsageError);
}

// With eta = 0, a perfect epsilon prediction inverts add_noise exactly (x0 inside the clip range).
TEST(NoiseSchedule, DdimWithTheTrueNoiseRecoversTheSample) {
  policy::DDIMScheduler ddim;
  ddim.set_timesteps(10);
  const at::Tensor x0 = schedule_input(kScheduleX0).clamp(-1, 1), noise = schedule_input(kScheduleNoise);
  const at::Tensor xt = ddim.add_noise(x0, noise, at::full({2}, 90, at::kLong));
  const at::Tensor abar80 = ddim.alphas_cumprod()[80];
  const at::Tensor expected = abar80.sqrt() * x0 + (1 - abar80).sqrt() * noise;
  EXPECT_LT(max_relative_error(ddim.step(noise, 90, xt), expected), 1e-5);
}

}  // namespace
}  // namespace sparsevit::golden::diffusion_policy
