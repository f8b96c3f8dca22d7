// The camera frames of a demonstration file (ours or Diffusion Policy's zarr store) as an
// unlabelled image dataset, so that `sparsevit pretrain` can run MAE on the task's own frames
// (MVP / VC-1's recipe for policy encoders). Each frame is what the policy's encoder is given:
// RGB float in [0, 1] at the encoder's size, area-averaged from the stored size by the policy's
// own code (policy/observation_images.h); the pretraining transform then maps it to [-1, 1] with
// mean = std = 0.5, as the policy does.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "data/dataset.h"
#include "episodes/episode_set.h"

namespace sparsevit::pipelines {

class DemonstrationFrames : public data::Dataset {
 public:
  // The frames of episodes [first_episode, end_episode) of `demos` at `image_size` px.
  // UsageError for an empty range or an image size below 1.
  DemonstrationFrames(std::shared_ptr<const episodes::EpisodeSet> demos, int64_t first_episode, int64_t end_episode,
                      int64_t image_size, std::string source);

  int64_t size() const override { return end_step_ - begin_step_; }
  // float32 [3, image_size, image_size] in [0, 1]; label 0 (frames carry no class).
  data::Sample get(int64_t index) const override;
  int64_t label(int64_t) const override { return 0; }
  int64_t num_classes() const override { return 1; }
  int64_t channels() const override { return 3; }
  // "demonstrations DIR: 40000 frames of episodes 0..449 (96x96 -> 48x48)"
  std::string describe() const override;
  // The step of the demonstrations that sample `index` is.
  int64_t step(int64_t index) const;

 private:
  std::shared_ptr<const episodes::EpisodeSet> demos_;
  int64_t first_episode_, end_episode_, begin_step_, end_step_, image_size_;
  std::string source_;
};

// Is `path` a demonstration file (a .episodes file, or a folder holding a zarr replay buffer)?
// `--dataset auto` in pretrain picks "demonstrations" then.
bool is_demonstration_path(const std::string& path);

// The training frames (the first `max_train_episodes` episodes; all when 0 or more than there
// are) and the held-out ones (the rest; all of them when none is left out) of the demonstrations
// at `path`, at `image_size` px.
struct DemonstrationFrameSplits {
  std::shared_ptr<const DemonstrationFrames> train, held_out;
};
DemonstrationFrameSplits demonstration_frames(const std::string& path, int64_t max_train_episodes, int64_t image_size);

}  // namespace sparsevit::pipelines
