// The diffusion policy's noise schedules: diffusers' DDPMScheduler and DDIMScheduler as of
// diffusers 0.11.1 (the version Diffusion Policy pins), in the configuration Diffusion Policy
// trains with: num_train_timesteps 100, beta_schedule squaredcos_cap_v2 (betas_for_alpha_bar),
// clip_sample true (x0 clamped to [-1, 1]), prediction_type epsilon, DDPM variance_type
// fixed_small; DDIM set_alpha_to_one true, steps_offset 0, eta 0.
// The tables (betas, alphas, alphas_cumprod) are float32 like diffusers'.
#pragma once

#include <ATen/ATen.h>
#include <c10/util/Optional.h>

#include <vector>

namespace sparsevit::policy {

enum class BetaSchedule { kSquaredCosCapV2, kLinear };

struct NoiseScheduleOptions {
  int64_t num_train_timesteps = 100;
  BetaSchedule beta_schedule = BetaSchedule::kSquaredCosCapV2;
  double beta_start = 1e-4, beta_end = 0.02;  // kLinear only
  bool clip_sample = true;
  double clip_sample_range = 1.0;
};

// diffusers' betas_for_alpha_bar: beta_i = min(1 - abar((i + 1) / n) / abar(i / n), max_beta)
// with abar(t) = cos((t + 0.008) / 1.008 * pi / 2)^2 (Nichol & Dhariwal's cosine schedule), float32 [n].
at::Tensor betas_for_alpha_bar(int64_t num_diffusion_timesteps, double max_beta = 0.999);

// What DDPM and DDIM share: the tables, the forward process and the x0 estimate.
class DiffusionSchedule {
 public:
  explicit DiffusionSchedule(const NoiseScheduleOptions& options = {});

  // q(x_t | x_0): sqrt(abar_t) * x0 + sqrt(1 - abar_t) * noise; timesteps [B] (integer), one
  // per leading index of x0.
  at::Tensor add_noise(const at::Tensor& original_samples, const at::Tensor& noise, const at::Tensor& timesteps) const;
  // Training timesteps: uniform integers in [0, num_train_timesteps), [batch] int64.
  at::Tensor random_timesteps(int64_t batch, c10::optional<at::Generator> generator = c10::nullopt) const;

  const at::Tensor& betas() const { return betas_; }
  const at::Tensor& alphas() const { return alphas_; }
  const at::Tensor& alphas_cumprod() const { return alphas_cumprod_; }
  const NoiseScheduleOptions& options() const { return options_; }
  int64_t num_train_timesteps() const { return options_.num_train_timesteps; }

 protected:
  void check_timestep(int64_t t) const;
  double alpha_cumprod(int64_t t) const { return alphas_cumprod_values_[static_cast<size_t>(t)]; }
  // epsilon -> x0 = (x_t - sqrt(1 - abar_t) eps) / sqrt(abar_t), clipped if configured.
  at::Tensor predict_original_sample(const at::Tensor& model_output, int64_t t, const at::Tensor& sample) const;

  NoiseScheduleOptions options_;
  at::Tensor betas_, alphas_, alphas_cumprod_;
  std::vector<double> betas_values_, alphas_values_, alphas_cumprod_values_;  // the float32 values, widened
};

// Ancestral DDPM sampling over every training step (T-1, ..., 0), as Diffusion Policy runs it
// (num_inference_steps = num_train_timesteps; the previous step is t - 1).
class DDPMScheduler : public DiffusionSchedule {
 public:
  explicit DDPMScheduler(const NoiseScheduleOptions& options = {});

  std::vector<int64_t> timesteps() const;  // num_train_timesteps - 1, ..., 0
  // The posterior mean of x_{t-1} plus sqrt(variance(t)) * N(0, 1) noise drawn from `generator`
  // in model_output's shape and dtype (none at t = 0).
  at::Tensor step(const at::Tensor& model_output, int64_t t, const at::Tensor& sample,
                  c10::optional<at::Generator> generator = c10::nullopt) const;
  // The same with the standard normal noise given (ignored at t = 0).
  at::Tensor step_with_noise(const at::Tensor& model_output, int64_t t, const at::Tensor& sample,
                             const at::Tensor& noise) const;
  // fixed_small: (1 - abar_{t-1}) / (1 - abar_t) * beta_t, at least 1e-20.
  double variance(int64_t t) const;
};

// Deterministic DDIM (eta = 0) on a subsequence of the training steps.
class DDIMScheduler : public DiffusionSchedule {
 public:
  explicit DDIMScheduler(const NoiseScheduleOptions& options = {});

  // diffusers 0.11.1 spacing: ratio = T / n (integer division), steps (n-1)*ratio, ..., ratio, 0.
  void set_timesteps(int64_t num_inference_steps);
  const std::vector<int64_t>& timesteps() const { return timesteps_; }
  int64_t num_inference_steps() const { return num_inference_steps_; }
  // x_{t - ratio} = sqrt(abar_prev) x0 + sqrt(1 - abar_prev) eps (abar of a negative step: 1).
  at::Tensor step(const at::Tensor& model_output, int64_t t, const at::Tensor& sample) const;

 private:
  int64_t num_inference_steps_ = 0;
  std::vector<int64_t> timesteps_;
};

}  // namespace sparsevit::policy
