#include "pipelines/demonstration_frames.h"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "episodes/demonstrations.h"
#include "episodes/episode_file.h"
#include "policy/observation_images.h"
#include "util/errors.h"

namespace sparsevit::pipelines {

DemonstrationFrames::DemonstrationFrames(std::shared_ptr<const episodes::EpisodeSet> demos, int64_t first_episode,
                                         int64_t end_episode, int64_t image_size, std::string source)
    : demos_(std::move(demos)), first_episode_(first_episode), end_episode_(end_episode), image_size_(image_size),
      source_(std::move(source)) {
  if (demos_->images.empty() || demos_->image_height < 1)
    throw UsageError("demonstrations " + source_ + " hold no camera frames (a low-dimensional store)");
  if (image_size_ < 1) throw UsageError("demonstration frames: image size must be >= 1");
  if (first_episode_ < 0 || end_episode_ > demos_->episodes() || first_episode_ >= end_episode_)
    throw UsageError(fmt::format("demonstrations {}: no episode in [{}, {}) of {}", source_, first_episode_,
                                 end_episode_, demos_->episodes()));
  begin_step_ = demos_->episode_begin(first_episode_);
  end_step_ = demos_->episode_end(end_episode_ - 1);
}

int64_t DemonstrationFrames::step(int64_t index) const {
  data::check_index(*this, index);
  return begin_step_ + index;
}

data::Sample DemonstrationFrames::get(int64_t index) const {
  const uint8_t* frame = demos_->images.data() + step(index) * demos_->image_bytes();
  // The policy's own resize (area averaging), kept in float: the pixels the encoder sees in the policy.
  at::Tensor image = policy::observation_images(frame, 1, demos_->image_height, demos_->image_width, image_size_);
  return {image.squeeze(0), 0};
}

std::string DemonstrationFrames::describe() const {
  return fmt::format("demonstrations {}: {} frames of episodes {}..{} ({}x{} -> {}x{})", source_, size(),
                     first_episode_, end_episode_ - 1, demos_->image_height, demos_->image_width, image_size_,
                     image_size_);
}

bool is_demonstration_path(const std::string& path) {
  std::error_code ec;
  const std::filesystem::path p(path);
  if (std::filesystem::is_directory(p, ec))
    return std::filesystem::exists(p / "meta" / "episode_ends", ec) || p.extension() == ".zarr";
  if (!std::filesystem::is_regular_file(p, ec)) return false;
  char magic[sizeof(episodes::kEpisodeFileMagic)] = {};
  std::ifstream in(path, std::ios::binary);
  return in.read(magic, sizeof(magic)) && std::memcmp(magic, episodes::kEpisodeFileMagic, sizeof(magic)) == 0;
}

DemonstrationFrameSplits demonstration_frames(const std::string& path, int64_t max_train_episodes, int64_t image_size) {
  auto demos = std::make_shared<const episodes::EpisodeSet>(episodes::read_demonstrations(path));
  const int64_t episodes = demos->episodes();
  if (episodes < 1) throw UsageError("demonstrations " + path + " hold no episode");
  const int64_t train_end = max_train_episodes > 0 && max_train_episodes < episodes ? max_train_episodes : episodes;
  DemonstrationFrameSplits s;
  s.train = std::make_shared<DemonstrationFrames>(demos, 0, train_end, image_size, path);
  s.held_out = train_end < episodes ? std::make_shared<DemonstrationFrames>(demos, train_end, episodes, image_size, path)
                                    : s.train;
  return s;
}

}  // namespace sparsevit::pipelines
