// The scripted expert: a pinned number of successes on fixed seeds, so regressions fail.
#include "envs/pusht_expert.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

namespace sparsevit::envs {
namespace {

// Runs one episode; returns whether it succeeded and the steps it took.
bool solve(std::uint64_t seed, int* steps_taken = nullptr, double* best_coverage = nullptr,
           const PushTExpertConfig& config = {}) {
  PushTEnv env;
  env.reset(seed);
  PushTExpert expert(config);
  double best = 0.0;
  for (;;) {
    const Point2 target = expert.act(env.state());
    // Commands stay in the original's action space.
    EXPECT_TRUE(target.x >= 0.0 && target.x <= 512.0 && target.y >= 0.0 && target.y <= 512.0)
        << "seed " << seed << " step " << env.steps();
    if (config.max_command_distance > 0.0) {
      const PushTState s = env.state();
      EXPECT_LE(std::hypot(target.x - s.agent_x, target.y - s.agent_y), config.max_command_distance + 1e-9)
          << "seed " << seed << " step " << env.steps();
    }
    const PushTStepResult r = env.step(target.x, target.y);
    best = std::max(best, r.coverage);
    if (r.done) {
      if (steps_taken) *steps_taken = env.steps();
      if (best_coverage) *best_coverage = best;
      return r.success;
    }
  }
}

TEST(PushTExpert, IsDeterministic) {
  PushTEnv env;
  env.reset(4);
  PushTExpert a, b;
  for (int i = 0; i < 50; ++i) {
    const Point2 pa = a.act(env.state()), pb = b.act(env.state());
    ASSERT_EQ(pa.x, pb.x);
    ASSERT_EQ(pa.y, pb.y);
    env.step(pa.x, pa.y);
  }
}

TEST(PushTExpert, SolvesThePinnedCountOfSeeds0To9) {
  int solved = 0;
  for (std::uint64_t seed = 0; seed < 10; ++seed) solved += solve(seed) ? 1 : 0;
  EXPECT_GE(solved, 10);  // measured: 10 of 10 (docs/pusht.md)
}

TEST(PushTExpert, WaypointExpertSolvesThePinnedCountOfSeeds0To9) {
  int solved = 0;
  for (std::uint64_t seed = 0; seed < 10; ++seed)
    solved += solve(seed, nullptr, nullptr, PushTExpertConfig::waypoints()) ? 1 : 0;
  EXPECT_GE(solved, 10);  // measured: 10 of 10
}

// A policy sees the image and the agent position: the default expert's command must be a
// function of what they show. A fresh expert asked at every state of an episode commands what
// the expert that lived through the episode commands; the waypoint expert's hysteresis does not.
int commands_differing_from_a_fresh_expert(const PushTExpertConfig& config, std::uint64_t seed) {
  PushTEnv env;
  env.reset(seed);
  PushTExpert lived(config);
  int differing = 0;
  for (int i = 0; i < 300; ++i) {
    const Point2 a = lived.act(env.state());
    PushTExpert fresh(config);
    const Point2 b = fresh.act(env.state());
    differing += (a.x != b.x || a.y != b.y) ? 1 : 0;
    if (env.step(a.x, a.y).done) break;
  }
  return differing;
}

TEST(PushTExpert, DefaultCommandIsAFunctionOfTheStateAlone) {
  for (std::uint64_t seed : {0, 3, 7}) EXPECT_EQ(commands_differing_from_a_fresh_expert({}, seed), 0) << seed;
  int waypoint_differing = 0;
  for (std::uint64_t seed : {0, 3, 7})
    waypoint_differing += commands_differing_from_a_fresh_expert(PushTExpertConfig::waypoints(), seed);
  EXPECT_GT(waypoint_differing, 0);  // the check can see memory
}

TEST(PushTExpert, LeavesAnOverlappedBlockWithoutDraggingIt) {
  // Seed 162 resets the agent inside the T; stepping away from the block's centre dragged it.
  EXPECT_TRUE(solve(162));
}

// The measurements behind docs/pusht.md (seconds, so not in the default run):
//   build/test_envs --gtest_also_run_disabled_tests --gtest_filter='*SuccessRateOnSeeds*'
void measure(std::uint64_t first, std::uint64_t end, const PushTExpertConfig& config = {}) {
  int solved = 0, total_steps = 0;
  for (std::uint64_t seed = first; seed < end; ++seed) {
    int steps = 0;
    double best = 0.0;
    const bool ok = solve(seed, &steps, &best, config);
    solved += ok ? 1 : 0;
    if (ok) total_steps += steps;
    std::printf("seed %3llu: %s in %3d steps, best coverage %.3f\n", static_cast<unsigned long long>(seed),
                ok ? "solved" : "failed", steps, best);
  }
  std::printf("seeds %llu..%llu: solved %d / %llu (mean steps of the solved: %.1f)\n",
              static_cast<unsigned long long>(first), static_cast<unsigned long long>(end - 1), solved,
              static_cast<unsigned long long>(end - first), solved ? double(total_steps) / solved : 0.0);
}

// The seeds the expert's parameters were tuned on.
TEST(PushTExpert, DISABLED_SuccessRateOnSeeds0To99) { measure(0, 100); }
// Held out from the tuning.
TEST(PushTExpert, DISABLED_SuccessRateOnSeeds100To999) { measure(100, 1000); }
// Held out from the tuning of the bounded, memoryless default (tuned on 100000..100199).
TEST(PushTExpert, DISABLED_SuccessRateOnSeeds200000To200999) { measure(200000, 201000); }
TEST(PushTExpert, DISABLED_WaypointSuccessRateOnSeeds100To999) { measure(100, 1000, PushTExpertConfig::waypoints()); }

}  // namespace
}  // namespace sparsevit::envs
