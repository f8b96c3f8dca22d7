#include "envs/pusht_rollout.h"

#include <algorithm>
#include <string>

#include "util/errors.h"

namespace sparsevit::envs {
namespace {

PushTObservation observe(const PushTEnv& env, int image_size) {
  PushTObservation obs;
  env.render(obs.image, image_size);
  obs.image_size = image_size;
  const PushTState s = env.state();
  obs.agent_x = s.agent_x;
  obs.agent_y = s.agent_y;
  obs.block_x = s.block_x;
  obs.block_y = s.block_y;
  obs.block_angle = s.block_angle;
  return obs;
}

void check_options(const RolloutOptions& o) {
  if (o.image_size < 1 || o.image_size > 4096)
    throw UsageError("rollout image_size " + std::to_string(o.image_size) + " must be within 1..4096");
  if (o.obs_horizon < 1) throw UsageError("rollout obs_horizon " + std::to_string(o.obs_horizon) + " must be >= 1");
  if (o.max_steps < 1) throw UsageError("rollout max_steps " + std::to_string(o.max_steps) + " must be >= 1");
}

}  // namespace

RolloutResult run_pusht_rollout(PushTEnv& env, PushTActor& actor, std::uint64_t seed, const RolloutOptions& options,
                                const RolloutStepCallback& on_step) {
  check_options(options);
  env.reset(seed);
  actor.reset();
  // Oldest first; padded with the first observation, as MultiStepWrapper does.
  std::vector<PushTObservation> history(static_cast<std::size_t>(options.obs_horizon), observe(env, options.image_size));
  RolloutResult result;
  for (;;) {
    const std::vector<Point2> actions = actor.act(history, env.state());
    if (actions.empty()) throw RuntimeError("PushT actor returned no action at step " + std::to_string(result.steps));
    for (const Point2& action : actions) {
      const PushTState before = env.state();
      const PushTStepResult step = env.step(action.x, action.y);
      ++result.steps;
      result.max_coverage = std::max(result.max_coverage, step.coverage);
      result.final_coverage = step.coverage;
      result.max_reward = std::max(result.max_reward, step.reward);
      result.success = result.success || step.success;
      if (on_step) on_step(history.back(), before, action, step);
      if (step.done || result.steps >= options.max_steps) return result;
      // Render only when another step follows: the last image would never be seen.
      std::rotate(history.begin(), history.begin() + 1, history.end());
      history.back() = observe(env, options.image_size);
    }
  }
}

std::vector<Point2> PushTExpertActor::act(const std::vector<PushTObservation>& /*history*/, const PushTState& state) {
  return {expert_.act(state)};
}

std::vector<Point2> PushTDoNothingActor::act(const std::vector<PushTObservation>& history, const PushTState&) {
  return {{history.back().agent_x, history.back().agent_y}};
}

}  // namespace sparsevit::envs
