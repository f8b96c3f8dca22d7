// The image probe (issue #32): does the policy use its image? On windows of held-out episodes,
// the diffusion loss with (a) the true observations, (b) the images of other windows, (c) the
// agent positions of other windows, all three with the same noise and timesteps (one fixed
// generator), plus the spread of the encoder's readout feature across frames. A blind policy has
// (b) = (a); one that reads the image loses more when its image is swapped. docs/policy.md.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "episodes/episode_set.h"
#include "policy/diffusion_policy.h"

namespace sparsevit::policy {

struct ImageProbeOptions {
  int64_t first_episode = -1;  // probe episodes first_episode.. (-1: the last 10%, at least one)
  int64_t batches = 0;         // batches of windows at most (0: every window of those episodes)
  int64_t batch_size = 64;
  uint64_t seed = 0;           // the window order, the noise and the timesteps
};

struct ImageProbeResult {
  std::string readout;               // the policy's observation readout
  int64_t first_episode = 0, episodes = 0, windows = 0;
  bool held_out = true;              // false: the run trained on these episodes
  double loss_true = 0;              // mean epsilon MSE per window, true observations
  double loss_images_permuted = 0;   // images taken from other windows
  double loss_agent_pos_permuted = 0;  // agent positions taken from other windows
  // ||per-dimension std of the readout feature across frames|| / mean ||feature||: 0 when every
  // frame gives the same feature (the class token after ~100 steps in issue #32).
  double feature_spread = 0;
  double image_gap() const { return loss_images_permuted - loss_true; }
  double agent_pos_gap() const { return loss_agent_pos_permuted - loss_true; }
  nlohmann::json to_json() const;
  std::string to_table() const;  // a few aligned lines for the terminal
};

// The first probed episode for `first_episode` (-1: the last 10%) on a set of `episodes`
// episodes. UsageError when it leaves no episode.
int64_t probe_first_episode(int64_t episodes, int64_t first_episode);

// Runs the probe with `policy` in eval mode (no shift; its mode is restored after) and without
// gradients. `held_out` is copied into the result (the caller knows what the policy trained on).
ImageProbeResult probe_images(DiffusionPolicy& policy, std::shared_ptr<const episodes::EpisodeSet> demos,
                              const ImageProbeOptions& options, bool held_out);

}  // namespace sparsevit::policy
