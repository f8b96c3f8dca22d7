// Rollout videos: one PNG per step plus the final frame, or an mp4 that decodes back to as many
// frames at 10 fps; frames at another size than the observation.
#include "policy/rollout_video.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "data/image_codec.h"
#include "data/video_decoder.h"
#include "data/video_encoder.h"
#include "envs/pusht_rollout.h"
#include "util/errors.h"

namespace sparsevit::policy {
namespace {

namespace fs = std::filesystem;

class TempFolder {
 public:
  TempFolder() : path_(fs::temp_directory_path() / ("sparsevit_rollout_video_" + std::to_string(::getpid()))) {
    fs::remove_all(path_);
  }
  ~TempFolder() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string str() const { return path_.string(); }

 private:
  fs::path path_;
};

envs::RolloutOptions short_rollout(int steps) {
  envs::RolloutOptions o;
  o.image_size = 32;
  o.max_steps = steps;
  return o;
}

TEST(RolloutVideo, WritesOnePngPerStepAndTheFinalFrame) {
  TempFolder dir;
  envs::PushTEnv env;
  envs::PushTExpertActor expert;
  RolloutVideoRecorder recorder(env);
  const envs::RolloutResult r = envs::run_pusht_rollout(env, expert, 3, short_rollout(6), recorder.callback());
  ASSERT_EQ(r.steps, 6);
  ASSERT_EQ(recorder.frames().size(), 6u);  // the final frame is added when writing
  const std::string written = recorder.write(dir.str(), 3, RolloutVideoFormat::kPngFrames);
  EXPECT_EQ(written, (fs::path(dir.str()) / "episode_3").string());
  int pngs = 0;
  for (const auto& entry : fs::directory_iterator(written)) pngs += entry.path().extension() == ".png";
  EXPECT_EQ(pngs, 7);
  const data::Image first = data::read_image(written + "/frame_0000.png", 3);
  EXPECT_EQ(first.width, 32);
  env.reset(3);
  std::vector<std::uint8_t> rgb;
  env.render(rgb, 32);
  EXPECT_EQ(first.pixels, rgb);  // frame 0: the reset state
  EXPECT_TRUE(fs::exists(written + "/frame_0006.png"));
  EXPECT_TRUE(recorder.frames().empty());
}

TEST(RolloutVideo, AnEpisodeThatEndsRecordsItsFinalFrameAtOnce) {
  envs::PushTConfig config;
  config.max_steps = 4;
  envs::PushTEnv env(config);
  envs::PushTExpertActor expert;
  RolloutVideoRecorder recorder(env, 48);
  envs::run_pusht_rollout(env, expert, 1, short_rollout(300), recorder.callback());
  ASSERT_EQ(recorder.frames().size(), 5u);  // truncated after 4 steps: 4 + the final one
  EXPECT_EQ(recorder.frame_side(), 48);
  EXPECT_EQ(recorder.frames()[0].size(), 48u * 48u * 3u);
  std::vector<std::uint8_t> rgb;
  env.render(rgb, 48);
  EXPECT_EQ(recorder.frames().back(), rgb);
  envs::PushTEnv fresh;
  fresh.reset(1);
  fresh.render(rgb, 48);
  EXPECT_EQ(recorder.frames().front(), rgb);
}

TEST(RolloutVideo, WritesADecodableMp4) {
  if (!data::has_video_encoder("mpeg4")) GTEST_SKIP() << "FFmpeg without the mpeg4 encoder";
  TempFolder dir;
  envs::PushTEnv env;
  envs::PushTExpertActor expert;
  RolloutVideoRecorder recorder(env, 64);
  envs::run_pusht_rollout(env, expert, 0, short_rollout(9), recorder.callback());
  const std::string written = recorder.write(dir.str(), 0, RolloutVideoFormat::kMp4);
  EXPECT_EQ(written, (fs::path(dir.str()) / "episode_0.mp4").string());
  const data::VideoClip clip = data::decode_video_file(written, 3);
  EXPECT_EQ(clip.frames.sizes(), (at::IntArrayRef{3, 10, 64, 64}));
  EXPECT_NEAR(clip.fps, 10.0, 1e-6);
  // The last frame shows the agent where the env left it: the mean colour is close (lossy codec).
  std::vector<std::uint8_t> rgb;
  env.render(rgb, 64);
  const at::Tensor last = clip.frames.select(1, 9).to(at::kFloat);
  double expected = 0.0;
  for (std::uint8_t v : rgb) expected += v;
  EXPECT_NEAR(last.mean().item<double>(), expected / rgb.size(), 2.0);
}

TEST(RolloutVideo, FormatNamesAndErrors) {
  EXPECT_EQ(parse_rollout_video_format("png"), RolloutVideoFormat::kPngFrames);
  EXPECT_EQ(parse_rollout_video_format("mp4"), RolloutVideoFormat::kMp4);
  EXPECT_THROW(parse_rollout_video_format("gif"), UsageError);
  envs::PushTEnv env;
  EXPECT_THROW(RolloutVideoRecorder(env, -1), UsageError);
  RolloutVideoRecorder recorder(env);
  EXPECT_THROW(recorder.write("/tmp", 0, RolloutVideoFormat::kPngFrames), RuntimeError);
}

}  // namespace
}  // namespace sparsevit::policy
