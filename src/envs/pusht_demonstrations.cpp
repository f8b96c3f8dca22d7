#include "envs/pusht_demonstrations.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include "envs/pusht_rollout.h"
#include "util/errors.h"

namespace sparsevit::envs {
namespace {

inline constexpr int kStateDim = 5, kActionDim = 2;

struct RecordedEpisode {
  std::vector<std::uint8_t> images;
  std::vector<float> state, action;
  bool success = false;
};

RecordedEpisode record_episode(std::uint64_t seed, const DemonstrationOptions& o) {
  PushTConfig config;
  config.max_steps = o.max_steps;
  PushTEnv env(config);
  PushTExpertActor expert(o.expert);
  RecordedEpisode e;
  RolloutOptions rollout;
  rollout.image_size = o.image_size;
  rollout.obs_horizon = 1;
  rollout.max_steps = o.max_steps;
  const auto record = [&e](const PushTObservation& obs, const PushTState& s, Point2 action, const PushTStepResult&) {
    e.images.insert(e.images.end(), obs.image.begin(), obs.image.end());
    for (double v : {s.agent_x, s.agent_y, s.block_x, s.block_y, s.block_angle}) e.state.push_back(static_cast<float>(v));
    e.action.push_back(static_cast<float>(action.x));
    e.action.push_back(static_cast<float>(action.y));
  };
  e.success = run_pusht_rollout(env, expert, seed, rollout, record).success;
  return e;
}

void check_options(const DemonstrationOptions& o) {
  if (o.episodes < 1) throw UsageError("episodes " + std::to_string(o.episodes) + " must be >= 1");
  if (o.image_size < 1 || o.image_size > 4096)
    throw UsageError("image_size " + std::to_string(o.image_size) + " must be within 1..4096");
  if (o.max_steps < 1) throw UsageError("max_steps " + std::to_string(o.max_steps) + " must be >= 1");
  if (o.threads < 1) throw UsageError("threads " + std::to_string(o.threads) + " must be >= 1");
}

// Records the episodes of seeds [first, first + count) on `threads` threads, in seed order.
std::vector<RecordedEpisode> record_batch(std::uint64_t first, int count, const DemonstrationOptions& o) {
  std::vector<RecordedEpisode> out(static_cast<std::size_t>(count));
  std::vector<std::exception_ptr> errors(out.size());
  std::atomic<int> next{0};
  auto work = [&] {
    for (int i = next++; i < count; i = next++) {
      try {
        out[i] = record_episode(first + static_cast<std::uint64_t>(i), o);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < std::min(o.threads, count); ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
  return out;
}

}  // namespace

episodes::EpisodeSet collect_pusht_demonstrations(const DemonstrationOptions& o,
                                                  const DemonstrationProgressCallback& on_episode,
                                                  DemonstrationProgress* totals) {
  check_options(o);
  const auto start = std::chrono::steady_clock::now();
  const std::int64_t max_seeds = o.successful_only ? 2 * static_cast<std::int64_t>(o.episodes) + 100 : o.episodes;
  episodes::EpisodeSet set;
  set.image_height = set.image_width = o.image_size;
  set.state_dim = kStateDim;
  set.action_dim = kActionDim;
  set.task = "pusht";
  DemonstrationProgress progress;
  // Batches of a few episodes per thread: parallel, yet little is run past the last success.
  const int batch = 4 * o.threads;
  while (progress.episodes_kept < o.episodes && progress.episodes_run < max_seeds) {
    const int wanted = o.successful_only ? batch : std::min(batch, o.episodes - progress.episodes_kept);
    const int count = static_cast<int>(std::min<std::int64_t>(wanted, max_seeds - progress.episodes_run));
    const std::uint64_t first = o.first_seed + static_cast<std::uint64_t>(progress.episodes_run);
    std::vector<RecordedEpisode> recorded = record_batch(first, count, o);
    for (int i = 0; i < count && progress.episodes_kept < o.episodes; ++i) {
      RecordedEpisode& e = recorded[i];
      ++progress.episodes_run;
      progress.successes += e.success ? 1 : 0;
      progress.last_seed = first + static_cast<std::uint64_t>(i);
      if (e.success || !o.successful_only) {
        set.append_episode(e.images, e.state, e.action);
        ++progress.episodes_kept;
        progress.steps_kept += static_cast<std::int64_t>(e.action.size()) / kActionDim;
      }
      e = RecordedEpisode{};  // images are the bulk: free them once copied
      progress.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (on_episode) on_episode(progress);
    }
  }
  if (totals) *totals = progress;
  if (progress.episodes_kept < o.episodes)
    throw RuntimeError("the expert solved only " + std::to_string(progress.successes) + " of " +
                       std::to_string(progress.episodes_run) + " episodes (seeds " + std::to_string(o.first_seed) +
                       ".." + std::to_string(progress.last_seed) + "), fewer than the " + std::to_string(o.episodes) +
                       " successful episodes asked for");
  return set;
}

}  // namespace sparsevit::envs
