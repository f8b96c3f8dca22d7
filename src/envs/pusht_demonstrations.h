// Expert demonstrations for PushT, recorded as Diffusion Policy's pusht data is: per control
// step the image rendered before the step, the state [agent_x, agent_y, block_x, block_y,
// block_angle] before the step and the commanded agent position. Seeds first_seed,
// first_seed + 1, ... in order; the result does not depend on the thread count.
#pragma once

#include <cstdint>
#include <functional>

#include "envs/pusht_expert.h"
#include "episodes/episode_set.h"

namespace sparsevit::envs {

struct DemonstrationOptions {
  int episodes = 0;              // episodes to return (>= 1)
  std::uint64_t first_seed = 0;  // env.reset(first_seed), then first_seed + 1, ...
  int image_size = 96;           // observation image side (1..4096)
  bool successful_only = true;   // skip (and count) episodes the expert fails
  int max_steps = 300;           // steps per episode at most
  int threads = 1;               // episodes run at once (>= 1)
  PushTExpertConfig expert;      // the default: bounded commands, no memory (docs/pusht.md)
};

// Counts so far (after each episode, in seed order) or in total.
struct DemonstrationProgress {
  int episodes_run = 0;   // expert episodes finished, kept or skipped
  int episodes_kept = 0;  // in the set
  int successes = 0;      // of episodes_run
  std::int64_t steps_kept = 0;
  std::uint64_t last_seed = 0;
  double seconds = 0.0;   // since the collection started
};
using DemonstrationProgressCallback = std::function<void(const DemonstrationProgress&)>;

// With successful_only, seeds go on until `episodes` successes, but at most
// 2 * episodes + 100 seeds: RuntimeError "the expert solved only K of N episodes ..." beyond.
// UsageError for options out of range. `totals`, when given, receives the final counts.
episodes::EpisodeSet collect_pusht_demonstrations(const DemonstrationOptions& options,
                                                  const DemonstrationProgressCallback& on_episode = {},
                                                  DemonstrationProgress* totals = nullptr);

}  // namespace sparsevit::envs
