#include "policy/lowdim_observation.h"

#include <cmath>

#include "util/errors.h"

namespace sparsevit::policy {

PolicyObservation parse_policy_observation(const std::string& name) {
  if (name == "image") return PolicyObservation::kImage;
  if (name == "lowdim") return PolicyObservation::kLowdim;
  throw UsageError("policy observation '" + name + "' is not one of image, lowdim");
}

std::string policy_observation_name(PolicyObservation observation) {
  return observation == PolicyObservation::kImage ? "image" : "lowdim";
}

int64_t lowdim_dim(PolicyObservation observation) { return observation == PolicyObservation::kImage ? 2 : 6; }

void lowdim_features(PolicyObservation observation, const float* state, float* out) {
  out[0] = state[0];
  out[1] = state[1];
  if (observation == PolicyObservation::kImage) return;
  block_pose_features(state, out + 2);
}

void block_pose_features(const float* state, float* out) {
  out[0] = state[2];
  out[1] = state[3];
  out[2] = std::cos(state[4]);
  out[3] = std::sin(state[4]);
}

}  // namespace sparsevit::policy
