// Closed-loop evaluation of a diffusion policy in PushT (Diffusion Policy's PushTImageRunner):
// episode i starts from reset(first_seed + i) and runs until the block covers the goal (> 95%)
// or 300 steps. Reported as the field reports it: DP's score (mean over episodes of
// min(max coverage / 0.95, 1)), the success rate, the mean max coverage, and the same three for
// a do-nothing actor on the same seeds (the floor).
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "policy/diffusion_policy.h"
#include "policy/policy_actor.h"

namespace sparsevit::pipelines {

struct PolicyEvalOptions {
  int64_t episodes = 50;
  int64_t first_seed = 100000;  // DP's test seeds start at 100000
  int64_t observation_image_size = 96;  // what the policy was trained on (rendered, then resized)
  int64_t max_steps = 300;
  std::string save_video;       // "" : none; a folder for per-episode videos
  bool floor = true;            // also run the do-nothing actor on the same seeds
  policy::BlockPoseNoise block_noise;  // error on the block pose a low-dim policy reads (default none)
};

struct PolicyEpisode {
  int64_t seed = 0;
  bool success = false;
  double max_coverage = 0, final_coverage = 0, score = 0;  // score: min(max coverage / 0.95, 1)
  int64_t steps = 0;
};

// Means over episodes.
struct PushTScores {
  double score = 0;              // Diffusion Policy's test_mean_score: mean of min(max coverage / 0.95, 1)
  double success_rate = 0;       // share of episodes solved
  double mean_max_coverage = 0;
  nlohmann::json to_json() const;  // {"score", "success_rate", "mean_max_coverage"}
};

struct PolicyEvalResult {
  std::vector<PolicyEpisode> episodes;
  double score = 0, success_rate = 0, mean_max_coverage = 0;  // PushTScores of the policy
  bool has_floor = false;
  PushTScores floor;             // the do-nothing actor on the same seeds
  double seconds = 0;
  policy::BlockPoseNoise block_noise;  // what the evaluation gave the policy (recorded when any)
  PushTScores scores() const { return {score, success_rate, mean_max_coverage}; }
  nlohmann::json to_json() const;
};

// One line: "score S, success P% of N episodes, mean max coverage C (do nothing: ...)".
std::string eval_line(const PolicyEvalResult& result);

// Runs the episodes (progress lines on `progress` every 10 episodes) with the policy in eval mode.
PolicyEvalResult evaluate_policy(policy::DiffusionPolicy& policy, const PolicyEvalOptions& options,
                                 std::ostream& progress);

}  // namespace sparsevit::pipelines
