#include "policy/noise_scheduler.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "util/errors.h"

namespace sparsevit::policy {
namespace {

std::vector<double> widened(const at::Tensor& t) {
  const at::Tensor d = t.to(at::kDouble).contiguous();
  return std::vector<double>(d.data_ptr<double>(), d.data_ptr<double>() + d.numel());
}

void check_same_shape(const at::Tensor& model_output, const at::Tensor& sample) {
  if (model_output.sizes() != sample.sizes())
    throw UsageError("scheduler step: model output " + c10::str(model_output.sizes()) + " and sample " +
                     c10::str(sample.sizes()) + " differ in shape");
}

}  // namespace

at::Tensor betas_for_alpha_bar(int64_t num_diffusion_timesteps, double max_beta) {
  if (num_diffusion_timesteps < 1) throw UsageError("betas_for_alpha_bar: need at least one timestep");
  auto alpha_bar = [](double t) {
    const double c = std::cos((t + 0.008) / 1.008 * M_PI / 2);
    return c * c;
  };
  std::vector<double> betas;
  const auto n = static_cast<double>(num_diffusion_timesteps);
  for (int64_t i = 0; i < num_diffusion_timesteps; ++i)
    betas.push_back(std::min(1 - alpha_bar((i + 1) / n) / alpha_bar(i / n), max_beta));
  // Computed in double like diffusers (Python floats), stored as float32 like diffusers.
  return at::tensor(betas, at::kDouble).to(at::kFloat);
}

DiffusionSchedule::DiffusionSchedule(const NoiseScheduleOptions& options) : options_(options) {
  if (options.num_train_timesteps < 1) throw UsageError("noise schedule: num_train_timesteps must be positive");
  if (options.beta_schedule == BetaSchedule::kSquaredCosCapV2) {
    betas_ = betas_for_alpha_bar(options.num_train_timesteps);
  } else {
    betas_ = at::linspace(options.beta_start, options.beta_end, options.num_train_timesteps, at::kFloat);
  }
  alphas_ = 1.0 - betas_;
  alphas_cumprod_ = at::cumprod(alphas_, 0);
  betas_values_ = widened(betas_);
  alphas_values_ = widened(alphas_);
  alphas_cumprod_values_ = widened(alphas_cumprod_);
}

void DiffusionSchedule::check_timestep(int64_t t) const {
  if (t < 0 || t >= options_.num_train_timesteps)
    throw UsageError("diffusion timestep " + std::to_string(t) + " is outside [0, " +
                     std::to_string(options_.num_train_timesteps) + ")");
}

at::Tensor DiffusionSchedule::add_noise(const at::Tensor& original_samples, const at::Tensor& noise,
                                        const at::Tensor& timesteps) const {
  if (original_samples.sizes() != noise.sizes())
    throw UsageError("add_noise: samples " + c10::str(original_samples.sizes()) + " and noise " +
                     c10::str(noise.sizes()) + " differ in shape");
  if (timesteps.dim() != 1 || original_samples.dim() < 1 || timesteps.size(0) != original_samples.size(0))
    throw UsageError("add_noise: timesteps must be [B] for samples " + c10::str(original_samples.sizes()) + ", got " +
                     c10::str(timesteps.sizes()));
  const at::Tensor steps = timesteps.to(original_samples.device(), at::kLong);
  if (steps.numel() > 0 && (steps.min().item<int64_t>() < 0 || steps.max().item<int64_t>() >= num_train_timesteps()))
    throw UsageError("add_noise: timesteps outside [0, " + std::to_string(num_train_timesteps()) + ")");
  // As diffusers: the table cast to the samples' dtype, then indexed.
  const at::Tensor abar = alphas_cumprod_.to(original_samples.options()).index_select(0, steps);
  std::vector<int64_t> shape(original_samples.dim(), 1);
  shape[0] = steps.size(0);
  const at::Tensor a = abar.view(shape);
  return a.sqrt() * original_samples + (1 - a).sqrt() * noise;
}

at::Tensor DiffusionSchedule::random_timesteps(int64_t batch, c10::optional<at::Generator> generator) const {
  return at::randint(0, num_train_timesteps(), {batch}, std::move(generator), at::TensorOptions().dtype(at::kLong));
}

at::Tensor DiffusionSchedule::predict_original_sample(const at::Tensor& model_output, int64_t t,
                                                      const at::Tensor& sample) const {
  const double abar = alpha_cumprod(t);
  at::Tensor x0 = (sample - std::sqrt(1 - abar) * model_output) / std::sqrt(abar);
  if (options_.clip_sample) x0 = x0.clamp(-options_.clip_sample_range, options_.clip_sample_range);
  return x0;
}

DDPMScheduler::DDPMScheduler(const NoiseScheduleOptions& options) : DiffusionSchedule(options) {}

std::vector<int64_t> DDPMScheduler::timesteps() const {
  std::vector<int64_t> steps;
  for (int64_t t = num_train_timesteps() - 1; t >= 0; --t) steps.push_back(t);
  return steps;
}

double DDPMScheduler::variance(int64_t t) const {
  check_timestep(t);
  const double abar_t = alpha_cumprod(t), abar_prev = t > 0 ? alpha_cumprod(t - 1) : 1.0;
  return std::max((1 - abar_prev) / (1 - abar_t) * betas_values_[static_cast<size_t>(t)], 1e-20);
}

at::Tensor DDPMScheduler::step_with_noise(const at::Tensor& model_output, int64_t t, const at::Tensor& sample,
                                          const at::Tensor& noise) const {
  check_timestep(t);
  check_same_shape(model_output, sample);
  const double abar_t = alpha_cumprod(t), abar_prev = t > 0 ? alpha_cumprod(t - 1) : 1.0;
  const double beta_prod_t = 1 - abar_t, beta_prod_prev = 1 - abar_prev;
  const at::Tensor x0 = predict_original_sample(model_output, t, sample);
  // The posterior q(x_{t-1} | x_t, x0) mean (Ho et al. 2020, eq. 7).
  const double x0_coeff = std::sqrt(abar_prev) * betas_values_[static_cast<size_t>(t)] / beta_prod_t;
  const double xt_coeff = std::sqrt(alphas_values_[static_cast<size_t>(t)]) * beta_prod_prev / beta_prod_t;
  at::Tensor prev = x0_coeff * x0 + xt_coeff * sample;
  if (t > 0) {
    check_same_shape(noise, sample);
    prev = prev + std::sqrt(variance(t)) * noise;
  }
  return prev;
}

at::Tensor DDPMScheduler::step(const at::Tensor& model_output, int64_t t, const at::Tensor& sample,
                               c10::optional<at::Generator> generator) const {
  at::Tensor noise;
  if (t > 0) noise = at::randn(model_output.sizes(), std::move(generator), model_output.options());
  return step_with_noise(model_output, t, sample, noise);
}

DDIMScheduler::DDIMScheduler(const NoiseScheduleOptions& options) : DiffusionSchedule(options) {
  set_timesteps(options.num_train_timesteps);
}

void DDIMScheduler::set_timesteps(int64_t num_inference_steps) {
  if (num_inference_steps < 1 || num_inference_steps > num_train_timesteps())
    throw UsageError("DDIM: num_inference_steps must be in [1, " + std::to_string(num_train_timesteps()) + "], got " +
                     std::to_string(num_inference_steps));
  num_inference_steps_ = num_inference_steps;
  const int64_t ratio = num_train_timesteps() / num_inference_steps;
  timesteps_.clear();
  for (int64_t i = num_inference_steps - 1; i >= 0; --i) timesteps_.push_back(i * ratio);
}

at::Tensor DDIMScheduler::step(const at::Tensor& model_output, int64_t t, const at::Tensor& sample) const {
  check_timestep(t);
  check_same_shape(model_output, sample);
  const int64_t prev_t = t - num_train_timesteps() / num_inference_steps_;
  const double abar_prev = prev_t >= 0 ? alpha_cumprod(prev_t) : 1.0;  // set_alpha_to_one
  const at::Tensor x0 = predict_original_sample(model_output, t, sample);
  // eta = 0: no noise, and the direction uses the unclipped epsilon (use_clipped_model_output false).
  return std::sqrt(abar_prev) * x0 + std::sqrt(1 - abar_prev) * model_output;
}

}  // namespace sparsevit::policy
