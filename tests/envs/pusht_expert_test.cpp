// The scripted expert: a pinned number of successes on fixed seeds, so regressions fail.
#include "envs/pusht_expert.h"

#include <gtest/gtest.h>

#include <cstdio>

namespace sparsevit::envs {
namespace {

// Runs one episode; returns whether it succeeded and the steps it took.
bool solve(std::uint64_t seed, int* steps_taken = nullptr, double* best_coverage = nullptr) {
  PushTEnv env;
  env.reset(seed);
  PushTExpert expert;
  double best = 0.0;
  for (;;) {
    const Point2 target = expert.act(env.state());
    // Commands stay in the original's action space.
    EXPECT_TRUE(target.x >= 0.0 && target.x <= 512.0 && target.y >= 0.0 && target.y <= 512.0)
        << "seed " << seed << " step " << env.steps();
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
  EXPECT_GE(solved, 10);  // measured: 10 of 10 (100 of seeds 0..99, docs/pusht.md)
}

TEST(PushTExpert, LeavesAnOverlappedBlockWithoutDraggingIt) {
  // Seed 162 resets the agent inside the T; stepping away from the block's centre dragged it.
  EXPECT_TRUE(solve(162));
}

// The measurements behind docs/pusht.md (seconds, so not in the default run):
//   build/test_envs --gtest_also_run_disabled_tests --gtest_filter='*SuccessRateOnSeeds*'
void measure(std::uint64_t first, std::uint64_t end) {
  int solved = 0, total_steps = 0;
  for (std::uint64_t seed = first; seed < end; ++seed) {
    int steps = 0;
    double best = 0.0;
    const bool ok = solve(seed, &steps, &best);
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

}  // namespace
}  // namespace sparsevit::envs
