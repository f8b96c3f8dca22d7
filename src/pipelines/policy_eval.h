// Closed-loop evaluation of a diffusion policy in PushT (Diffusion Policy's PushTImageRunner):
// episode i starts from reset(first_seed + i) and runs until the block covers the goal (> 95%)
// or 300 steps; the score is the success rate and the mean over episodes of the best coverage.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "policy/diffusion_policy.h"

namespace sparsevit::pipelines {

struct PolicyEvalOptions {
  int64_t episodes = 50;
  int64_t first_seed = 100000;  // DP's test seeds start at 100000
  int64_t observation_image_size = 96;  // what the policy was trained on (rendered, then resized)
  int64_t max_steps = 300;
  std::string save_video;       // "" : none; a folder for per-episode videos
};

struct PolicyEpisode {
  int64_t seed = 0;
  bool success = false;
  double max_coverage = 0, final_coverage = 0;
  int64_t steps = 0;
};

struct PolicyEvalResult {
  std::vector<PolicyEpisode> episodes;
  double success_rate = 0;       // share of episodes solved
  double mean_max_coverage = 0;  // DP's PushT score: mean over episodes of max coverage
  double seconds = 0;
  nlohmann::json to_json() const;
};

// Runs the episodes (progress lines on `progress` every 10 episodes) with the policy in eval mode.
PolicyEvalResult evaluate_policy(policy::DiffusionPolicy& policy, const PolicyEvalOptions& options,
                                 std::ostream& progress);

}  // namespace sparsevit::pipelines
