// The encoder's ceiling on locating the block (issue #32): the image policy's own encoder and
// readout, trained from scratch to regress the block pose of single frames (a linear head on the
// readout feature, MSE on the standardised position and on cos θ, sin θ), then scored on frames
// of held-out episodes with block_pose_probe.h's errors. The diffusion-trained features locate
// the block to ~31 units / 22° (block_pose_probe.h), and a low-dim policy needs ~5 units / 5° for
// most of its successes (`policy eval --block_noise`). If this fit, told the answer, does no
// better, the frame size and patch grid bound the image policy's success; if it does much
// better, the diffusion objective leaves that precision unused. docs/policy.md, "What bounds success".
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "episodes/episode_set.h"
#include "policy/diffusion_policy.h"

namespace sparsevit::policy {

struct BlockPoseFitOptions {
  int64_t first_episode = -1;    // held-out episodes first_episode.. (-1: the last 10%); earlier ones train
  int64_t steps = 2000;          // optimiser steps
  int64_t batch_size = 64;       // frames per step, drawn uniformly from the training episodes
  double lr = 1e-3, weight_decay = 1e-6;  // AdamW, linear warm-up then cosine to 0
  int64_t warmup_steps = 100;
  int64_t max_test_frames = 2000;  // frames scored on each side at most, evenly spaced
  uint64_t seed = 0;               // frame draws (the weights' initialisation is the caller's)
};

struct BlockPoseFitResult {
  int64_t steps = 0, train_frames = 0, test_frames = 0;
  double final_loss = 0;                         // mean loss of the last 10% of steps
  double position_rmse = 0, angle_median_deg = 0;  // held-out frames, world units / degrees
  double train_position_rmse = 0, train_angle_median_deg = 0;  // training frames (fitting vs generalising)
  double baseline_position_rmse = 0, baseline_angle_median_deg = 0;  // the training mean pose
  double seconds = 0;
  nlohmann::json to_json() const;
  std::string to_table() const;
};

// Trains the encoder and readout of `policy` (its U-Net is left alone) with a fresh head, then
// scores them in eval mode. `progress(step, loss)` is called every `progress_every` steps.
// UsageError for a low-dim policy, non-PushT states, or a split that leaves either side empty.
BlockPoseFitResult fit_block_pose(DiffusionPolicy& policy, const episodes::EpisodeSet& demos,
                                  const BlockPoseFitOptions& options,
                                  const std::function<void(int64_t, double)>& progress = {},
                                  int64_t progress_every = 100);

}  // namespace sparsevit::policy
