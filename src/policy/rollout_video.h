// Videos of PushT rollouts: a recorder that plugs into run_pusht_rollout as its step callback,
// keeps one frame per step plus the final one, and writes them as PNG frames
// (DIR/episode_<seed>/frame_0000.png, ...) or as an MP4 (DIR/episode_<seed>.mp4, mpeg4 at 10 fps,
// PushT's control rate). docs/policy.md, "Demonstrations and rollouts".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "envs/pusht_env.h"
#include "envs/pusht_rollout.h"

namespace sparsevit::policy {

enum class RolloutVideoFormat { kPngFrames, kMp4 };

// "png" / "mp4" (what a --video_format flag takes); UsageError naming both otherwise.
RolloutVideoFormat parse_rollout_video_format(const std::string& name);

inline constexpr double kRolloutVideoFps = 10.0;

class RolloutVideoRecorder {
 public:
  // Records the rollouts of `env`, which must outlive the recorder. frame_size 0: the frames are
  // the observation images the actor saw; otherwise frames are rendered at frame_size (1..4096).
  explicit RolloutVideoRecorder(const envs::PushTEnv& env, int frame_size = 0);

  // The step callback: the frame before the step, and after a step that ends the episode
  // (result.done, or call finish_episode) also the frame after it.
  void on_step(const envs::PushTObservation& obs, const envs::PushTState& state, envs::Point2 action,
               const envs::PushTStepResult& result);
  envs::RolloutStepCallback callback() {
    return [this](const envs::PushTObservation& o, const envs::PushTState& s, envs::Point2 a,
                  const envs::PushTStepResult& r) { on_step(o, s, a, r); };
  }

  // Frames so far, each frame_side()² × 3 RGB (HWC).
  const std::vector<std::vector<std::uint8_t>>& frames() const { return frames_; }
  int frame_side() const { return side_; }

  // Writes the recorded frames for the episode of `seed` under `dir` (created if missing) and
  // forgets them; returns the folder or file written. Adds the env's current frame first when
  // the last recorded step did not end the episode (a rollout stopped by max_steps). Every file
  // is written atomically. RuntimeError when nothing was recorded.
  std::string write(const std::string& dir, std::uint64_t seed, RolloutVideoFormat format);
  // Forgets the frames (a rollout that will not be written).
  void clear();

 private:
  std::vector<std::uint8_t> render_now() const;

  const envs::PushTEnv& env_;
  int frame_size_;
  int side_ = 0;
  bool ended_ = false;  // the final frame is recorded
  std::vector<std::vector<std::uint8_t>> frames_;
};

}  // namespace sparsevit::policy
