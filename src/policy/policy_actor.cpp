#include "policy/policy_actor.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <cmath>

#include "policy/observation_images.h"
#include "util/errors.h"

namespace sparsevit::policy {

namespace {

constexpr double kRadiansPerDegree = 3.14159265358979323846 / 180.0;
// The block-pose noise's stream, apart from the sampling noise's.
uint64_t noise_seed(uint64_t seed) { return seed ^ 0x9e3779b97f4a7c15ULL; }

}  // namespace

DiffusionPolicyActor::DiffusionPolicyActor(DiffusionPolicy& policy, uint64_t seed, BlockPoseNoise noise)
    : policy_(policy),
      seed_(seed),
      generator_(at::make_generator<at::CPUGeneratorImpl>(seed)),
      noise_(noise),
      noise_rng_(noise_seed(seed)) {
  if (noise_.position < 0 || noise_.angle_deg < 0 || !std::isfinite(noise_.position) || !std::isfinite(noise_.angle_deg))
    throw UsageError("block-pose noise must be finite and >= 0");
  if (noise_.any() && policy_.config().observation != PolicyObservation::kLowdim)
    throw UsageError("block-pose noise perturbs what a low-dim policy reads; an image policy reads the block from its image");
}

void DiffusionPolicyActor::reset() {
  generator_ = at::make_generator<at::CPUGeneratorImpl>(seed_);
  noise_rng_.seed(noise_seed(seed_));
}

std::vector<envs::Point2> DiffusionPolicyActor::act(const std::vector<envs::PushTObservation>& history,
                                                    const envs::PushTState&) {
  const int64_t to = policy_.config().obs_horizon;
  if (static_cast<int64_t>(history.size()) < to)
    throw UsageError("policy actor: " + std::to_string(history.size()) + " observations for obs_horizon " +
                     std::to_string(to));
  const auto first = history.end() - to;  // the last obs_horizon, oldest first
  const int64_t side = first->image_size, ld = policy_.lowdim_dim();
  std::vector<uint8_t> frames;
  at::Tensor agent_pos = at::empty({1, to, ld}, at::kFloat);
  float* pos = agent_pos.data_ptr<float>();
  for (int64_t t = 0; t < to; ++t) {
    const envs::PushTObservation& o = first[t];
    if (policy_.has_encoder()) frames.insert(frames.end(), o.image.begin(), o.image.end());
    double bx = o.block_x, by = o.block_y, ba = o.block_angle;
    if (noise_.any()) {
      std::normal_distribution<double> normal(0.0, 1.0);
      bx += noise_.position * normal(noise_rng_);
      by += noise_.position * normal(noise_rng_);
      ba += noise_.angle_deg * kRadiansPerDegree * normal(noise_rng_);
    }
    const float state[kPushTStateDim] = {static_cast<float>(o.agent_x), static_cast<float>(o.agent_y),
                                         static_cast<float>(bx), static_cast<float>(by), static_cast<float>(ba)};
    lowdim_features(policy_.config().observation, state, pos + t * ld);
  }
  const int64_t s = policy_.image_size();
  const at::Tensor images =
      policy_.has_encoder() ? observation_images(frames.data(), to, side, side, s).view({1, to, 3, s, s}) : at::Tensor();
  const at::Tensor actions = policy_.predict_action(images, agent_pos, generator_).to(at::kDouble).contiguous();
  std::vector<envs::Point2> out;
  const auto a = actions.accessor<double, 3>();
  for (int64_t i = 0; i < actions.size(1); ++i) out.push_back({a[0][i][0], a[0][i][1]});
  return out;
}

}  // namespace sparsevit::policy
