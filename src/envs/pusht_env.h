// PushT (Florence et al. 2022, as in Diffusion Policy's pusht_env.py) on Box2D: a circular
// agent, driven toward the commanded position by a PD law, pushes a T-shaped block onto a
// fixed goal pose. Constants, conventions and the deviations from the pymunk original are in
// docs/pusht.md. Torch-free; Box2D stays inside pusht_env.cpp.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "envs/pusht_shape.h"

namespace sparsevit::envs {

inline constexpr double kPushTWorkspace = 512.0;   // window_size: the workspace is 512×512 px
inline constexpr double kPushTAgentRadius = 15.0;
inline constexpr double kPushTKp = 100.0, kPushTKv = 20.0;  // PD gains (k_p, k_v)
inline constexpr int kPushTSimHz = 100, kPushTControlHz = 10;
inline constexpr int kPushTSubsteps = kPushTSimHz / kPushTControlHz;
inline constexpr Pose2 kPushTGoal{256.0, 256.0, 0.78539816339744830962};  // (256, 256, π/4)

// Positions in workspace pixels (x right, y down); block_x/y is the T's body origin (the middle
// of the bar's top edge), block_angle in radians. The agent's velocity (px/s) is part of the
// dynamic state; a state of the five pose values alone starts the agent at rest.
struct PushTState {
  double agent_x = 0.0, agent_y = 0.0, block_x = 0.0, block_y = 0.0, block_angle = 0.0;
  double agent_vx = 0.0, agent_vy = 0.0;
};

struct PushTConfig {
  int render_size = 96;            // observation image side (pixels)
  int max_steps = 300;             // episode limit (control steps)
  double success_coverage = 0.95;  // success_threshold
  int render_supersample = 4;      // anti-aliasing: ss×ss samples per pixel
};

struct PushTStepResult {
  double reward = 0.0;    // clip(coverage / success_coverage, 0, 1)
  double coverage = 0.0;  // area(block ∩ goal) / area(goal)
  bool success = false;   // coverage > success_coverage
  bool truncated = false; // the max_steps-th step
  bool done = false;      // success || truncated
};

class PushTEnv {
 public:
  // UsageError on a non-positive render_size / max_steps, a success_coverage outside (0, 1] or a
  // render_supersample outside 1..16. Starts reset(0).
  explicit PushTEnv(PushTConfig config = {});
  ~PushTEnv();
  PushTEnv(PushTEnv&&) noexcept;
  PushTEnv& operator=(PushTEnv&&) noexcept;
  PushTEnv(const PushTEnv&) = delete;
  PushTEnv& operator=(const PushTEnv&) = delete;

  // A random initial state as the original's reset: agent in [50, 450)², block in [100, 400)²
  // (integers, like numpy's randint), angle uniform in [-π, π). Same seed → same state.
  void reset(std::uint64_t seed);
  // A fresh world at `state` (the agent at rest unless agent_vx/vy say otherwise), followed by
  // one physics substep as the original's _set_state. UsageError on a non-finite value.
  void reset_to_state(const PushTState& state);
  // One control step: 10 physics substeps of the PD law toward (target_x, target_y).
  // UsageError on a non-finite target or a step after the episode's last (max_steps) step.
  PushTStepResult step(double target_x, double target_y);

  PushTState state() const;
  Pose2 block_pose() const;
  double coverage() const;
  int steps() const { return steps_; }
  const PushTConfig& config() const { return config_; }

  // Observation image: size × size × 3 RGB (HWC, row-major); row r, column c shows the workspace
  // point ((c + ½)·512/size, (r + ½)·512/size). UsageError unless 1 <= size <= 4096.
  void render(std::vector<std::uint8_t>& rgb, int size) const;
  std::vector<std::uint8_t> render() const;

 private:
  struct World;
  PushTConfig config_;
  std::unique_ptr<World> world_;
  int steps_ = 0;
};

}  // namespace sparsevit::envs
