// Demonstrations in memory: every episode's steps concatenated, as Diffusion Policy's
// ReplayBuffer keeps them (one array per key, `episode_ends` marking where episodes stop).
// Standard library only; the readers and writers (episode_file.h, zarr_replay_buffer.h) and
// the sequence sampler work on this one type.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sparsevit::episodes {

struct EpisodeSet {
  int64_t image_height = 0, image_width = 0;  // images are RGB uint8, HWC
  int64_t state_dim = 0, action_dim = 0;
  std::vector<uint8_t> images;        // [steps, H, W, 3]
  std::vector<float> state;           // [steps, state_dim]   (PushT: agent x, y, block x, y, angle)
  std::vector<float> action;          // [steps, action_dim]  (PushT: commanded agent x, y)
  std::vector<int64_t> episode_ends;  // exclusive end step of each episode, strictly increasing
  std::string task;                   // e.g. "pusht"

  static constexpr int64_t kImageChannels = 3;

  // Steps of all episodes together (the last episode end; 0 when empty).
  int64_t steps() const;
  int64_t episodes() const { return static_cast<int64_t>(episode_ends.size()); }
  // Bytes of one step's image (H * W * 3).
  int64_t image_bytes() const { return image_height * image_width * kImageChannels; }
  // First step and exclusive end step of episode `e` (UsageError when out of range).
  int64_t episode_begin(int64_t e) const;
  int64_t episode_end(int64_t e) const;

  // Appends one episode of `steps` steps; the dims must match the set's (a set without
  // episodes takes them from `state_dim` / `action_dim` / the image size set beforehand).
  // UsageError naming the array whose size does not match, or for an empty episode.
  void append_episode(const std::vector<uint8_t>& episode_images, const std::vector<float>& episode_state,
                      const std::vector<float>& episode_action);

  // Throws UsageError naming what is inconsistent: negative or absurd dims, episode ends that do
  // not strictly increase from > 0, an array whose size is not steps x its row size.
  void validate() const;
};

}  // namespace sparsevit::episodes
