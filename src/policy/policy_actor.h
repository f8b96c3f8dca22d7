// A trained DiffusionPolicy acting in PushT (envs::PushTActor): the last obs_horizon images and
// agent positions in (a low-dim policy: agent positions and block poses), action_horizon
// commanded positions out, as Diffusion Policy's MultiStepWrapper runs a policy. Sees only the
// observations, never the simulator's state.
#pragma once

#include <ATen/core/Generator.h>

#include <cstdint>
#include <random>
#include <vector>

#include "envs/pusht_rollout.h"
#include "policy/diffusion_policy.h"

namespace sparsevit::policy {

// Gaussian error added to the block pose a low-dim policy reads (each observation anew): what
// `policy eval --block_noise` uses to ask how precise a pose the policy needs (docs/policy.md,
// "What bounds success"). Zero: the exact pose.
struct BlockPoseNoise {
  double position = 0.0;   // standard deviation of x and y, workspace units
  double angle_deg = 0.0;  // standard deviation of the angle, degrees
  bool any() const { return position > 0.0 || angle_deg > 0.0; }
};

class DiffusionPolicyActor : public envs::PushTActor {
 public:
  // The sampling noise of episode i comes from generator seed `seed` (reset() restarts it), so an
  // evaluation is repeatable; so does the block-pose noise (its own stream). UsageError for
  // block noise on an image policy, which reads the block from its image.
  DiffusionPolicyActor(DiffusionPolicy& policy, uint64_t seed, BlockPoseNoise noise = {});
  void reset() override;
  std::vector<envs::Point2> act(const std::vector<envs::PushTObservation>& history,
                                const envs::PushTState& state) override;

 private:
  DiffusionPolicy& policy_;
  uint64_t seed_;
  at::Generator generator_;
  BlockPoseNoise noise_;
  std::mt19937_64 noise_rng_;
};

}  // namespace sparsevit::policy
