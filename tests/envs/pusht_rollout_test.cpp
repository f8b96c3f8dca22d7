// The closed-loop rollout: the expert succeeds through it, it is deterministic, pads the history
// as MultiStepWrapper does, reports every step and stops at max_steps.
#include "envs/pusht_rollout.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "util/errors.h"

namespace sparsevit::envs {
namespace {

// Stays where it is: the block never moves onto the goal.
class StillActor : public PushTActor {
 public:
  void reset() override { ++resets; }
  std::vector<Point2> act(const std::vector<PushTObservation>& history, const PushTState&) override {
    histories.push_back(history);
    return {{history.back().agent_x, history.back().agent_y}};
  }
  int resets = 0;
  std::vector<std::vector<PushTObservation>> histories;
};

// Commands three fixed positions per call (an action horizon of 3).
class ChunkActor : public PushTActor {
 public:
  void reset() override {}
  std::vector<Point2> act(const std::vector<PushTObservation>&, const PushTState&) override {
    ++calls;
    return {{100, 100}, {120, 100}, {140, 100}};
  }
  int calls = 0;
};

class EmptyActor : public PushTActor {
 public:
  void reset() override {}
  std::vector<Point2> act(const std::vector<PushTObservation>&, const PushTState&) override { return {}; }
};

TEST(PushTRollout, TheExpertSucceedsOnFixedSeeds) {
  PushTEnv env;
  PushTExpertActor expert;
  for (std::uint64_t seed : {0u, 1u, 2u}) {
    const RolloutResult r = run_pusht_rollout(env, expert, seed, {});
    EXPECT_TRUE(r.success) << "seed " << seed;
    EXPECT_GT(r.final_coverage, 0.95) << "seed " << seed;
    EXPECT_GE(r.max_coverage, r.final_coverage);
    EXPECT_GT(r.steps, 1);
    EXPECT_LT(r.steps, 300);
    EXPECT_EQ(env.steps(), r.steps);
  }
}

TEST(PushTRollout, IsDeterministic) {
  std::vector<Point2> first, second;
  for (std::vector<Point2>* actions : {&first, &second}) {
    PushTEnv env;
    PushTExpertActor expert;
    run_pusht_rollout(env, expert, 7, {}, [actions](const PushTObservation&, const PushTState&, Point2 a,
                                                   const PushTStepResult&) { actions->push_back(a); });
  }
  ASSERT_EQ(first.size(), second.size());
  ASSERT_FALSE(first.empty());
  for (std::size_t i = 0; i < first.size(); ++i) {
    EXPECT_EQ(first[i].x, second[i].x) << i;
    EXPECT_EQ(first[i].y, second[i].y) << i;
  }
}

TEST(PushTRollout, PadsTheHistoryWithTheFirstObservation) {
  PushTEnv env;
  StillActor actor;
  RolloutOptions o;
  o.obs_horizon = 3;
  o.max_steps = 5;
  o.image_size = 16;
  run_pusht_rollout(env, actor, 3, o);
  EXPECT_EQ(actor.resets, 1);
  ASSERT_EQ(actor.histories.size(), 5u);
  for (const auto& h : actor.histories) {
    ASSERT_EQ(h.size(), 3u);
    for (const PushTObservation& obs : h) {
      EXPECT_EQ(obs.image_size, 16);
      EXPECT_EQ(obs.image.size(), 16u * 16u * 3u);
    }
  }
  PushTEnv fresh;
  fresh.reset(3);
  std::vector<std::uint8_t> first16;
  fresh.render(first16, 16);
  // Step 0: three copies of the reset observation; step 1: two, then the new one.
  for (const PushTObservation& obs : actor.histories[0]) {
    EXPECT_EQ(obs.image, first16);
    EXPECT_EQ(obs.agent_x, fresh.state().agent_x);
  }
  EXPECT_EQ(actor.histories[1][0].image, first16);
  EXPECT_EQ(actor.histories[1][1].image, first16);
  fresh.step(fresh.state().agent_x, fresh.state().agent_y);
  EXPECT_EQ(actor.histories[1][2].agent_x, fresh.state().agent_x);
  // Later histories slide by one step.
  EXPECT_EQ(actor.histories[4][0].agent_x, actor.histories[3][1].agent_x);
  EXPECT_EQ(actor.histories[4][1].image, actor.histories[3][2].image);
}

TEST(PushTRollout, TheCallbackSeesEveryStepWithThePreStepObservationAndState) {
  PushTEnv env;
  PushTExpertActor expert;
  std::vector<PushTState> states;
  std::vector<PushTStepResult> results;
  std::vector<Point2> actions;
  const RolloutResult r = run_pusht_rollout(
      env, expert, 5, {}, [&](const PushTObservation& obs, const PushTState& s, Point2 a, const PushTStepResult& res) {
        EXPECT_EQ(obs.agent_x, s.agent_x);
        EXPECT_EQ(obs.agent_y, s.agent_y);
        states.push_back(s);
        actions.push_back(a);
        results.push_back(res);
      });
  ASSERT_EQ(static_cast<int>(states.size()), r.steps);
  EXPECT_TRUE(results.back().done);
  for (std::size_t i = 0; i + 1 < results.size(); ++i) EXPECT_FALSE(results[i].done) << i;
  // Replaying the recorded actions from the recorded first state gives the same states.
  PushTEnv replay;
  replay.reset(5);
  for (std::size_t i = 0; i < actions.size(); ++i) {
    EXPECT_EQ(replay.state().block_x, states[i].block_x) << i;
    EXPECT_EQ(replay.state().agent_y, states[i].agent_y) << i;
    replay.step(actions[i].x, actions[i].y);
  }
  EXPECT_EQ(replay.coverage(), r.final_coverage);
}

TEST(PushTRollout, StopsAtMaxSteps) {
  PushTEnv env;
  StillActor actor;
  RolloutOptions o;
  o.max_steps = 12;
  o.image_size = 8;
  int calls = 0;
  const RolloutResult r =
      run_pusht_rollout(env, actor, 1, o, [&](const PushTObservation&, const PushTState&, Point2, const PushTStepResult&) {
        ++calls;
      });
  EXPECT_EQ(r.steps, 12);
  EXPECT_EQ(calls, 12);
  EXPECT_FALSE(r.success);
  // The env's own limit ends it too.
  PushTConfig short_env;
  short_env.max_steps = 4;
  PushTEnv env4(short_env);
  o.max_steps = 300;
  EXPECT_EQ(run_pusht_rollout(env4, actor, 1, o).steps, 4);
}

TEST(PushTRollout, ExecutesEveryActionOfAChunkBeforeAskingAgain) {
  PushTEnv env;
  ChunkActor actor;
  RolloutOptions o;
  o.max_steps = 7;
  o.image_size = 8;
  EXPECT_EQ(run_pusht_rollout(env, actor, 2, o).steps, 7);
  EXPECT_EQ(actor.calls, 3);  // 3 + 3 + 1 (the rest of the last chunk dropped)
}

// The floor: the agent stays where it starts, so the block does not move (seed 0 starts the agent
// clear of the T); the score is the start's min(coverage / 0.95, 1). The observation carries the
// block pose a low-dim policy reads.
TEST(PushTRollout, TheDoNothingActorLeavesTheBlockWhereItLies) {
  PushTEnv env;
  env.reset(0);
  const PushTState start = env.state();
  const double start_coverage = env.coverage();
  PushTDoNothingActor actor;
  RolloutOptions o;
  o.image_size = 8;
  o.max_steps = 30;
  std::vector<PushTObservation> seen;
  const RolloutResult r = run_pusht_rollout(env, actor, 0, o, [&](const PushTObservation& obs, const PushTState&, Point2,
                                                                  const PushTStepResult&) { seen.push_back(obs); });
  EXPECT_EQ(r.steps, 30);
  EXPECT_NEAR(env.state().block_x, start.block_x, 1e-6);
  EXPECT_NEAR(env.state().block_y, start.block_y, 1e-6);
  EXPECT_NEAR(env.state().agent_x, start.agent_x, 1e-3);
  EXPECT_NEAR(r.max_coverage, start_coverage, 1e-9);
  EXPECT_NEAR(r.max_reward, std::min(start_coverage / 0.95, 1.0), 1e-9);
  ASSERT_FALSE(seen.empty());
  EXPECT_DOUBLE_EQ(seen[0].block_x, start.block_x);
  EXPECT_DOUBLE_EQ(seen[0].block_angle, start.block_angle);
}

TEST(PushTRollout, BadOptionsAndActorsAreErrors) {
  PushTEnv env;
  StillActor still;
  RolloutOptions o;
  o.obs_horizon = 0;
  EXPECT_THROW(run_pusht_rollout(env, still, 0, o), UsageError);
  o = {};
  o.max_steps = 0;
  EXPECT_THROW(run_pusht_rollout(env, still, 0, o), UsageError);
  o = {};
  o.image_size = 0;
  EXPECT_THROW(run_pusht_rollout(env, still, 0, o), UsageError);
  EmptyActor empty;
  EXPECT_THROW(run_pusht_rollout(env, empty, 0, {}), RuntimeError);
}

}  // namespace
}  // namespace sparsevit::envs
