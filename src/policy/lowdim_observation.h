// What the policy's U-Net sees besides image features at each observation step: the agent
// position (image policies, Diffusion Policy's `agent_pos`) or the whole PushT state as a
// low-dimensional observation (DP's low-dim policies; here agent position + block pose, the
// angle as cos/sin so that it does not jump at +-pi). Torch-free.
#pragma once

#include <cstdint>
#include <string>

namespace sparsevit::policy {

enum class PolicyObservation { kImage, kLowdim };

// PushT's recorded state row: agent x, y, block x, y, block angle (docs/episode_files.md).
inline constexpr int64_t kPushTStateDim = 5;

// "image" | "lowdim"; UsageError naming the accepted values otherwise.
PolicyObservation parse_policy_observation(const std::string& name);
std::string policy_observation_name(PolicyObservation observation);

// Width of the low-dimensional vector per step: 2 (agent x, y) or 6 (+ block x, y, cos, sin).
int64_t lowdim_dim(PolicyObservation observation);

// state [kPushTStateDim] -> out [lowdim_dim(observation)].
void lowdim_features(PolicyObservation observation, const float* state, float* out);

// The block pose as the low-dim observation holds it: x, y, cos, sin (also the target of an image
// policy's auxiliary pose loss and of the block-pose probes).
inline constexpr int64_t kBlockPoseDim = 4;
// state [kPushTStateDim] -> out [kBlockPoseDim].
void block_pose_features(const float* state, float* out);

}  // namespace sparsevit::policy
