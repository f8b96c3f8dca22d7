// Closed-loop PushT episodes: an actor (the scripted expert, a trained policy) sees the recent
// observations and commands agent positions until the block is placed or time runs out. The one
// loop that collection, evaluation and videos share (docs/policy.md, "Demonstrations and
// rollouts"). Torch-free.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "envs/pusht_env.h"
#include "envs/pusht_expert.h"

namespace sparsevit::envs {

// What a learned policy may see at one step: the rendered image (image_size² × 3, HWC RGB) and
// the agent position (Diffusion Policy's pusht image observation: `image` and `agent_pos`), and
// the block pose, which only low-dimensional policies read (DP's pusht low-dim observation).
struct PushTObservation {
  std::vector<std::uint8_t> image;
  int image_size = 0;
  double agent_x = 0.0, agent_y = 0.0;
  double block_x = 0.0, block_y = 0.0, block_angle = 0.0;
};

// Anything that acts in PushT: the scripted expert, a trained policy (implemented elsewhere).
class PushTActor {
 public:
  virtual ~PushTActor() = default;
  // Called at the start of every episode.
  virtual void reset() = 0;
  // The last `history.size()` observations (oldest first; at the start of an episode the first
  // observation repeated, as Diffusion Policy's MultiStepWrapper pads) -> the commanded agent
  // positions to execute next, in order (1 or more; Diffusion Policy executes action_horizon of
  // them). `state` is the full simulator state, for the scripted expert: a learned policy must
  // use only the observations.
  virtual std::vector<Point2> act(const std::vector<PushTObservation>& history, const PushTState& state) = 0;
};

struct RolloutOptions {
  int image_size = 96;   // observation image side (pixels)
  int obs_horizon = 2;   // observations handed to the actor
  int max_steps = 300;   // control steps at most (the env's own max_steps also ends an episode)
};

struct RolloutResult {
  bool success = false;        // coverage > the env's success threshold at some step
  double max_coverage = 0.0;   // best coverage over the episode's steps
  double final_coverage = 0.0; // coverage after the last step
  double max_reward = 0.0;     // best reward = min(max coverage / success threshold, 1): DP's score of the episode
  int steps = 0;               // control steps executed
};

// Called after every control step with the observation the step was chosen from (rendered
// before the step), the state before the step, the commanded position and the step's result:
// what demonstrations record and videos show.
using RolloutStepCallback =
    std::function<void(const PushTObservation&, const PushTState&, Point2 action, const PushTStepResult&)>;

// Runs one episode from env.reset(seed): the actor is reset, then asked for actions whenever the
// previous ones are executed. It ends at success, after options.max_steps steps, or when the env
// truncates; actions left over then are dropped. Deterministic for a deterministic actor.
// UsageError for options out of range (image_size 1..4096, obs_horizon >= 1, max_steps >= 1);
// RuntimeError when the actor returns no action.
RolloutResult run_pusht_rollout(PushTEnv& env, PushTActor& actor, std::uint64_t seed, const RolloutOptions& options,
                                const RolloutStepCallback& on_step = {});

// The scripted expert as an actor: ignores the images, one action per call.
class PushTExpertActor : public PushTActor {
 public:
  explicit PushTExpertActor(PushTExpertConfig config = {}) : expert_(config) {}
  void reset() override { expert_.reset(); }
  std::vector<Point2> act(const std::vector<PushTObservation>& history, const PushTState& state) override;

 private:
  PushTExpert expert_;
};

// The floor every score is read against: commands the agent's observed position, so the agent
// stays where it starts and the block where it lies (what a policy that learned nothing scores).
class PushTDoNothingActor : public PushTActor {
 public:
  void reset() override {}
  std::vector<Point2> act(const std::vector<PushTObservation>& history, const PushTState& state) override;
};

}  // namespace sparsevit::envs
