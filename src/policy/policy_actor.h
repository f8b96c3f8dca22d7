// A trained DiffusionPolicy acting in PushT (envs::PushTActor): the last obs_horizon images and
// agent positions in (a low-dim policy: agent positions and block poses), action_horizon
// commanded positions out, as Diffusion Policy's MultiStepWrapper runs a policy. Sees only the
// observations, never the simulator's state.
#pragma once

#include <ATen/core/Generator.h>

#include <cstdint>
#include <vector>

#include "envs/pusht_rollout.h"
#include "policy/diffusion_policy.h"

namespace sparsevit::policy {

class DiffusionPolicyActor : public envs::PushTActor {
 public:
  // The sampling noise of episode i comes from generator seed `seed` (reset() restarts it), so an
  // evaluation is repeatable.
  DiffusionPolicyActor(DiffusionPolicy& policy, uint64_t seed);
  void reset() override;
  std::vector<envs::Point2> act(const std::vector<envs::PushTObservation>& history,
                                const envs::PushTState& state) override;

 private:
  DiffusionPolicy& policy_;
  uint64_t seed_;
  at::Generator generator_;
};

}  // namespace sparsevit::policy
