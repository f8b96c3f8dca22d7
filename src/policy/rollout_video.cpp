#include "policy/rollout_video.h"

#include <torch/torch.h>

#include <cstdio>
#include <cstring>
#include <filesystem>

#include "data/image_codec.h"
#include "data/video_clip.h"
#include "data/video_encoder.h"
#include "util/errors.h"

namespace sparsevit::policy {

RolloutVideoFormat parse_rollout_video_format(const std::string& name) {
  if (name == "png") return RolloutVideoFormat::kPngFrames;
  if (name == "mp4") return RolloutVideoFormat::kMp4;
  throw UsageError("video format '" + name + "' must be png (a folder of frames) or mp4");
}

RolloutVideoRecorder::RolloutVideoRecorder(const envs::PushTEnv& env, int frame_size)
    : env_(env), frame_size_(frame_size) {
  if (frame_size < 0 || frame_size > 4096)
    throw UsageError("video frame size " + std::to_string(frame_size) + " must be 0 (the observation) or 1..4096");
}

std::vector<std::uint8_t> RolloutVideoRecorder::render_now() const {
  std::vector<std::uint8_t> rgb;
  env_.render(rgb, side_);
  return rgb;
}

void RolloutVideoRecorder::on_step(const envs::PushTObservation& obs, const envs::PushTState& state,
                                   envs::Point2 /*action*/, const envs::PushTStepResult& result) {
  if (frames_.empty()) side_ = frame_size_ > 0 ? frame_size_ : obs.image_size;
  if (side_ == obs.image_size) {
    // The actor's own view before the step; the env is already past it.
    frames_.push_back(obs.image);
    ended_ = false;
    if (result.done) {
      frames_.push_back(render_now());
      ended_ = true;
    }
    return;
  }
  // Another size: the env renders each step's result; the first frame comes from a copy of
  // the state before the first step (its one settling substep moves nothing at rest).
  if (frames_.empty()) {
    envs::PushTEnv before(env_.config());
    before.reset_to_state(state);
    std::vector<std::uint8_t> rgb;
    before.render(rgb, side_);
    frames_.push_back(std::move(rgb));
  }
  frames_.push_back(render_now());
  ended_ = true;
}

void RolloutVideoRecorder::clear() {
  frames_.clear();
  ended_ = false;
}

std::string RolloutVideoRecorder::write(const std::string& dir, std::uint64_t seed, RolloutVideoFormat format) {
  if (frames_.empty()) throw RuntimeError("no rollout frames recorded for episode " + std::to_string(seed));
  if (!ended_) frames_.push_back(render_now());
  namespace fs = std::filesystem;
  const fs::path base = fs::path(dir) / ("episode_" + std::to_string(seed));
  std::error_code ec;
  const fs::path folder = format == RolloutVideoFormat::kPngFrames ? base : fs::path(dir);
  fs::create_directories(folder, ec);
  if (ec) throw RuntimeError("cannot create " + folder.string() + ": " + ec.message());
  std::string written;
  if (format == RolloutVideoFormat::kPngFrames) {
    char name[32];
    for (std::size_t t = 0; t < frames_.size(); ++t) {
      std::snprintf(name, sizeof name, "frame_%04zu.png", t);
      data::write_png((base / name).string(), data::Image{side_, side_, 3, frames_[t]});
    }
    written = base.string();
  } else {
    const int64_t count = static_cast<int64_t>(frames_.size());
    at::Tensor thwc = torch::empty({count, side_, side_, 3}, torch::kUInt8);
    for (int64_t t = 0; t < count; ++t)
      std::memcpy(thwc[t].data_ptr<std::uint8_t>(), frames_[t].data(), frames_[t].size());
    data::VideoClip clip{thwc.permute({3, 0, 1, 2}).contiguous(), kRolloutVideoFps};
    written = base.string() + ".mp4";
    data::write_video_file(written, clip, "mpeg4");
  }
  clear();
  return written;
}

}  // namespace sparsevit::policy
