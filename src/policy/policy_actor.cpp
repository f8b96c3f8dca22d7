#include "policy/policy_actor.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include "policy/observation_images.h"
#include "util/errors.h"

namespace sparsevit::policy {

DiffusionPolicyActor::DiffusionPolicyActor(DiffusionPolicy& policy, uint64_t seed)
    : policy_(policy), seed_(seed), generator_(at::make_generator<at::CPUGeneratorImpl>(seed)) {}

void DiffusionPolicyActor::reset() { generator_ = at::make_generator<at::CPUGeneratorImpl>(seed_); }

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
    const float state[kPushTStateDim] = {static_cast<float>(o.agent_x), static_cast<float>(o.agent_y),
                                         static_cast<float>(o.block_x), static_cast<float>(o.block_y),
                                         static_cast<float>(o.block_angle)};
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
