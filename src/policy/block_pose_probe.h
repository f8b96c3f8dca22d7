// The block-pose probe (issue #32): how precisely do an image policy's encoder features locate
// the block? A ridge regression from the readout feature of one frame (what the U-Net is given)
// to the block's pose (x, y, cos θ, sin θ), fitted on frames of the training episodes and scored
// on frames of the probed ones, beside the training mean (what a blind encoder gives). A linear
// readout is a lower bound on what the U-Net can take from the features. Read it with
// `policy eval --block_noise`, which gives a low-dim policy that much error on the block pose.
// docs/policy.md, "What bounds success".
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "episodes/episode_set.h"
#include "policy/diffusion_policy.h"

namespace sparsevit::policy {

struct BlockPoseProbeOptions {
  int64_t first_episode = -1;  // probed (held-out) episodes first_episode..; earlier ones fit the readout
  int64_t max_fit_frames = 6000;   // frames of the earlier episodes at most, evenly spaced
  int64_t max_test_frames = 2000;  // frames of the probed episodes at most, evenly spaced
  double ridge = 1e-3;             // lambda, relative to the mean diagonal of the standardised X^T X / n
  // What is regressed: "readout" (the feature the U-Net is given) or "tokens" (the encoder's
  // patch tokens, flattened: what any readout could take; for an encoder whose readout was never
  // trained, e.g. straight after MAE).
  std::string features = "readout";
};

struct BlockPoseProbeResult {
  int64_t fit_frames = 0, test_frames = 0, feature_dim = 0;
  std::string features = "readout";
  double position_rmse = 0;          // world units (the 512-unit PushT workspace), readout
  double angle_median_deg = 0;       // median |angle error|, readout
  double baseline_position_rmse = 0; // the fitted frames' mean pose
  double baseline_angle_median_deg = 0;
  nlohmann::json to_json() const;
  std::string to_table() const;
};

// Ridge regression with a bias: x [n, d], y [n, k] (any float type) -> predict(x') = [x', 1] W.
// Features are standardised first, so lambda is relative. Returns W [d + 1, k] on standardised
// inputs together with their mean and scale (see ridge_predict).
struct RidgeFit {
  at::Tensor mean, scale, weights;
};
RidgeFit ridge_fit(const at::Tensor& x, const at::Tensor& y, double lambda);
at::Tensor ridge_predict(const RidgeFit& fit, const at::Tensor& x);

// The pose errors of `predicted` against `truth`, both [n, 4] (x, y, cos, sin) in double:
// position RMSE and the median absolute angle error in degrees (angles from atan2).
void pose_errors(const at::Tensor& predicted, const at::Tensor& truth, double* position_rmse, double* angle_median_deg);

// Up to `limit` steps of [begin, end), evenly spaced (every step when there are fewer).
std::vector<int64_t> spaced_steps(int64_t begin, int64_t end, int64_t limit);

// The block pose of each of `steps` -> [steps, 4] double (x, y, cos θ, sin θ), from PushT states.
at::Tensor block_poses(const episodes::EpisodeSet& demos, const std::vector<int64_t>& steps);

// The frames at `steps` through the policy's readout -> [steps, feature_dim] (the policy's
// dtype, with gradients when enabled). Frames go through in groups of obs_horizon (the readout's
// input shape); the last group is padded with its last frame and the padding dropped.
at::Tensor frame_features(DiffusionPolicy& policy, const episodes::EpisodeSet& demos, const std::vector<int64_t>& steps,
                          const std::string& features = "readout");

// frame_features over many steps, 64 windows of frames at a time -> [steps, feature_dim] double.
at::Tensor frame_features_in_batches(DiffusionPolicy& policy, const episodes::EpisodeSet& demos,
                                     const std::vector<int64_t>& steps, const std::string& features = "readout");

// Runs the probe with `policy` in eval mode (restored after), without gradients. UsageError for
// a low-dim policy, or when the split leaves no frame on either side.
BlockPoseProbeResult probe_block_pose(DiffusionPolicy& policy, const episodes::EpisodeSet& demos,
                                      const BlockPoseProbeOptions& options);

}  // namespace sparsevit::policy
