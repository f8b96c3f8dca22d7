// PushT: determinism, physics invariants, coverage, reward/done semantics, reset_to_state.
#include "envs/pusht_env.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "util/errors.h"

namespace sparsevit::envs {
namespace {

std::vector<PushTState> roll_out(PushTEnv& env, int steps) {
  std::vector<PushTState> states;
  for (int i = 0; i < steps; ++i) {
    // A fixed zig-zag through the workspace: it meets the block on most seeds.
    const double t = i * 0.3;
    env.step(256 + 200 * std::sin(t), 256 + 200 * std::cos(0.7 * t));
    states.push_back(env.state());
  }
  return states;
}

bool same(const PushTState& a, const PushTState& b) {
  return a.agent_x == b.agent_x && a.agent_y == b.agent_y && a.block_x == b.block_x && a.block_y == b.block_y &&
         a.block_angle == b.block_angle && a.agent_vx == b.agent_vx && a.agent_vy == b.agent_vy;
}

TEST(PushTEnv, SameSeedGivesIdenticalTrajectoriesAndImages) {
  PushTEnv a, b;
  b.reset(99);
  roll_out(b, 7);  // history before the reset must not matter
  a.reset(5);
  b.reset(5);
  const auto ta = roll_out(a, 40), tb = roll_out(b, 40);
  for (std::size_t i = 0; i < ta.size(); ++i) ASSERT_TRUE(same(ta[i], tb[i])) << "step " << i;
  EXPECT_EQ(a.render(), b.render());
}

TEST(PushTEnv, DifferentSeedsGiveDifferentStates) {
  PushTEnv env;
  env.reset(1);
  const PushTState s1 = env.state();
  env.reset(2);
  const PushTState s2 = env.state();
  EXPECT_FALSE(same(s1, s2));
}

TEST(PushTEnv, ResetRangesAsTheOriginal) {
  PushTEnv env;
  double min_angle = 10, max_angle = -10;
  for (std::uint64_t seed = 0; seed < 200; ++seed) {
    env.reset(seed);
    const PushTState s = env.state();
    // Integers as numpy's randint; the one settling substep may push an overlapped block a few px.
    EXPECT_GE(s.block_x, 100 - 5.0);
    EXPECT_LT(s.block_x, 400 + 5.0);
    EXPECT_GE(s.block_y, 100 - 5.0);
    EXPECT_LT(s.block_y, 400 + 5.0);
    EXPECT_GE(s.agent_x, 50 - 1e-3);
    EXPECT_LT(s.agent_x, 450 + 1e-3);
    EXPECT_GE(s.agent_y, 50 - 1e-3);
    EXPECT_LT(s.agent_y, 450 + 1e-3);
    EXPECT_NEAR(s.agent_x, std::round(s.agent_x), 1e-3);
    min_angle = std::min(min_angle, s.block_angle);
    max_angle = std::max(max_angle, s.block_angle);
  }
  EXPECT_LT(min_angle, -2.5);
  EXPECT_GT(max_angle, 2.5);
  EXPECT_GE(min_angle, -M_PI - 1e-3);
  EXPECT_LE(max_angle, M_PI + 1e-3);
}

TEST(PushTEnv, ResetToStateReproducesTheState) {
  PushTEnv env;
  const PushTState given{100.25, 420.5, 300.75, 200.125, 1.2345};
  env.reset_to_state(given);
  const PushTState s = env.state();
  EXPECT_NEAR(s.agent_x, given.agent_x, 1e-3);
  EXPECT_NEAR(s.agent_y, given.agent_y, 1e-3);
  EXPECT_NEAR(s.block_x, given.block_x, 1e-3);
  EXPECT_NEAR(s.block_y, given.block_y, 1e-3);
  EXPECT_NEAR(s.block_angle, given.block_angle, 1e-6);
  EXPECT_EQ(env.steps(), 0);
}

TEST(PushTEnv, BlockDoesNotMoveWithoutContact) {
  PushTEnv env;
  env.reset_to_state({60, 60, 300, 300, 0.3});
  const Pose2 before = env.block_pose();
  for (int i = 0; i < 100; ++i) env.step(80 + (i % 7), 60 + (i % 5));  // wiggles far from the block
  const Pose2 after = env.block_pose();
  EXPECT_EQ(after.x, before.x);
  EXPECT_EQ(after.y, before.y);
  EXPECT_EQ(after.angle, before.angle);
}

TEST(PushTEnv, AgentFollowsThePdTarget) {
  PushTEnv env;
  env.reset_to_state({100, 100, 400, 400, 0.0});
  // Critically damped (k_v² = 4 k_p): after one control step from rest, (1 + ωt) e^{−ωt} of the
  // distance remains with ω = 10 /s, t = 0.1 s (up to the explicit Euler substeps).
  env.step(200, 100);
  const double remaining = (200 - env.state().agent_x) / 100.0;
  EXPECT_NEAR(remaining, 2.0 * std::exp(-1.0), 0.05);
  for (int i = 0; i < 30; ++i) env.step(200, 150);
  EXPECT_NEAR(env.state().agent_x, 200, 0.5);
  EXPECT_NEAR(env.state().agent_y, 150, 0.5);
  // No overshoot along a straight move from rest.
  env.reset_to_state({100, 100, 400, 400, 0.0});
  double max_x = 0;
  for (int i = 0; i < 30; ++i) {
    env.step(200, 100);
    max_x = std::max(max_x, env.state().agent_x);
  }
  EXPECT_LE(max_x, 200.0 + 1e-3);
}

TEST(PushTEnv, AgentPushesTheBlockAndWallsKeepTheBlockInside) {
  PushTEnv env;
  // Block's bar facing left at x ≈ 100; the agent comes from the right and drives it into the
  // left wall (inner face at x = 7).
  env.reset_to_state({400, 256, 200, 256, -M_PI / 2});
  for (int i = 0; i < 150; ++i) env.step(-100, 256);
  for (const Polygon2& part : tee_parts_world(env.block_pose()))
    for (const Point2& v : part) {
      EXPECT_GE(v.x, 7.0 - 1.0);
      EXPECT_GE(v.y, 7.0 - 1.0);
    }
  EXPECT_LT(env.block_pose().x, 150.0);  // it was pushed
  // The agent is kinematic as in the original: walls do not stop it (docs/pusht.md); a block
  // squeezed between it and a wall lets it through, as pymunk's infinitely heavy agent does.
  EXPECT_NEAR(env.state().agent_x, -100.0, 1.0);
}

TEST(PushTEnv, AgentDoesNotPassThroughTheBlock) {
  PushTEnv env;
  env.reset_to_state({256, 450, 256, 100, 0.0});  // stem pointing down toward the agent
  for (int i = 0; i < 60; ++i) env.step(256, 200);  // pushes the block up 35 px, short of the wall
  const Pose2 b = env.block_pose();
  EXPECT_NEAR(b.y, 100 - 35, 2.0);
  EXPECT_NEAR(b.x, 256, 0.5);
  EXPECT_NEAR(b.angle, 0, 0.01);
  // The stem's tip is the agent's contact: the agent centre stays below it by its radius.
  const Point2 tip = to_world(b, {0, 120});
  EXPECT_GE(env.state().agent_y - tip.y, kPushTAgentRadius - 1.5);
}

TEST(PushTEnv, CoverageIsOneAtTheGoalAndZeroFarAway) {
  EXPECT_NEAR(tee_coverage(kPushTGoal, kPushTGoal), 1.0, 1e-12);
  EXPECT_EQ(tee_coverage({60, 60, 0}, kPushTGoal), 0.0);
  const double rotated = tee_coverage({kPushTGoal.x, kPushTGoal.y, kPushTGoal.angle + 0.05}, kPushTGoal);
  EXPECT_LT(rotated, 1.0);
  EXPECT_GT(rotated, 0.8);
  // Symmetric in the sign of a small rotation about the body origin (the T is mirror-symmetric).
  EXPECT_NEAR(rotated, tee_coverage({kPushTGoal.x, kPushTGoal.y, kPushTGoal.angle - 0.05}, kPushTGoal), 1e-12);
  // Shift the T by 10 px along its own x: lost area = 10 · (bar height 30 + stem height 90).
  const Point2 shifted = to_world(kPushTGoal, {10, 0});
  EXPECT_NEAR(tee_coverage({shifted.x, shifted.y, kPushTGoal.angle}, kPushTGoal), 1.0 - 10.0 * 120.0 / 6300.0, 1e-12);
  // Shift along its own y by 10 px: the bar keeps 20·120 + the stem overlaps the bar's old place.
  const Point2 down = to_world(kPushTGoal, {0, 10});
  const double kept = 20 * 120 + 10 * 30 + 80 * 30;  // bar∩bar, shifted bar∩stem, stem∩stem
  EXPECT_NEAR(tee_coverage({down.x, down.y, kPushTGoal.angle}, kPushTGoal), kept / 6300.0, 1e-12);
}

// Independent of the clipper: count a 0.2 px grid of points inside both Ts (point-in-rectangle
// in each T's body frame).
double grid_coverage(const Pose2& block, const Pose2& goal) {
  auto inside_tee = [](const Pose2& pose, Point2 world) {
    const Point2 p = to_local(pose, world);
    const bool bar = p.x >= -60 && p.x <= 60 && p.y >= 0 && p.y <= 30;
    const bool stem = p.x >= -15 && p.x <= 15 && p.y >= 30 && p.y <= 120;
    return bar || stem;
  };
  const double h = 0.2;
  long both = 0, in_goal = 0;
  for (double x = goal.x - 125; x < goal.x + 125; x += h)
    for (double y = goal.y - 125; y < goal.y + 125; y += h) {
      if (!inside_tee(goal, {x, y})) continue;
      ++in_goal;
      both += inside_tee(block, {x, y}) ? 1 : 0;
    }
  return static_cast<double>(both) / in_goal;
}

TEST(PushTEnv, CoverageMatchesAGridCountAtArbitraryPoses) {
  const Pose2 poses[] = {{270, 250, 0.9}, {240, 280, 0.3}, {256, 230, -2.0}, {300, 300, 0.785}};
  for (const Pose2& pose : poses) {
    const double exact = tee_coverage(pose, kPushTGoal);
    EXPECT_GT(exact, 0.0);
    EXPECT_NEAR(exact, grid_coverage(pose, kPushTGoal), 2e-3) << pose.x << " " << pose.y << " " << pose.angle;
  }
}

TEST(PushTEnv, RewardDoneAndSuccessSemantics) {
  PushTEnv env;
  // At the goal with the agent away: success on the first step.
  env.reset_to_state({60, 60, kPushTGoal.x, kPushTGoal.y, kPushTGoal.angle});
  PushTStepResult r = env.step(60, 60);
  EXPECT_NEAR(r.coverage, 1.0, 1e-5);
  EXPECT_DOUBLE_EQ(r.reward, 1.0);
  EXPECT_TRUE(r.success);
  EXPECT_TRUE(r.done);
  EXPECT_FALSE(r.truncated);
  // Half covered: reward = coverage / 0.95, no success.
  const Point2 shifted = to_world(kPushTGoal, {26.25, 0});  // 26.25 · 120 = 3150 = half of 6300
  env.reset_to_state({60, 60, shifted.x, shifted.y, kPushTGoal.angle});
  r = env.step(60, 60);
  EXPECT_NEAR(r.coverage, 0.5, 1e-4);
  EXPECT_NEAR(r.reward, r.coverage / 0.95, 1e-12);
  EXPECT_FALSE(r.success);
  EXPECT_FALSE(r.done);
}

TEST(PushTEnv, EpisodeEndsAfterMaxSteps) {
  PushTEnv env;
  env.reset_to_state({60, 60, 300, 300, 0.0});
  PushTStepResult r;
  for (int i = 0; i < 299; ++i) {
    r = env.step(60, 60);
    ASSERT_FALSE(r.done) << "step " << i + 1;
  }
  r = env.step(60, 60);
  EXPECT_TRUE(r.truncated);
  EXPECT_TRUE(r.done);
  EXPECT_EQ(env.steps(), 300);
  EXPECT_THROW(env.step(60, 60), UsageError);
  env.reset(3);
  EXPECT_EQ(env.steps(), 0);
}

TEST(PushTEnv, BadInputsAreUsageErrors) {
  EXPECT_THROW(PushTEnv(PushTConfig{0}), UsageError);
  EXPECT_THROW(PushTEnv(PushTConfig{96, 0}), UsageError);
  EXPECT_THROW(PushTEnv(PushTConfig{96, 300, 1.5}), UsageError);
  PushTEnv env;
  EXPECT_THROW(env.step(NAN, 3), UsageError);
  EXPECT_THROW(env.reset_to_state({1, 2, 3, INFINITY, 0}), UsageError);
  std::vector<std::uint8_t> rgb;
  EXPECT_THROW(env.render(rgb, 0), UsageError);
}

}  // namespace
}  // namespace sparsevit::envs
