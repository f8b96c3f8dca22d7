// Diffusion Policy's SequenceSampler (diffusion_policy/common/sampler.py): every window of
// `horizon` consecutive steps inside one episode, allowed to hang `pad_before` steps over the
// episode's start and `pad_after` over its end; the overhang repeats the episode's first / last
// step. Plus DP's train/validation split by episode (get_val_mask), with our own RNG.
#pragma once

#include <cstdint>
#include <vector>

#include "episodes/episode_set.h"

namespace sparsevit::episodes {

// One window: steps [buffer_start, buffer_end) of the set fill positions
// [sample_start, sample_end) of the horizon; positions before / after repeat the first / last.
struct SequenceWindow {
  int64_t buffer_start = 0, buffer_end = 0;
  int64_t sample_start = 0, sample_end = 0;
  bool operator==(const SequenceWindow& o) const {
    return buffer_start == o.buffer_start && buffer_end == o.buffer_end && sample_start == o.sample_start &&
           sample_end == o.sample_end;
  }
};

// DP's create_indices: the windows of every episode whose mask entry is true (an empty mask
// means every episode), episodes in order, window starts ascending. As in DP, the pads are
// clamped to [0, horizon - 1]. UsageError for horizon < 1, a mask of the wrong length or
// episode ends that do not strictly increase from > 0.
std::vector<SequenceWindow> create_sequence_windows(const std::vector<int64_t>& episode_ends, int64_t horizon,
                                                    int64_t pad_before, int64_t pad_after,
                                                    const std::vector<bool>& episode_mask = {});

// DP's get_val_mask: true for the validation episodes. None when val_ratio <= 0 or there is a
// single episode; otherwise round-half-even(n * val_ratio) episodes, at least 1 and at most
// n - 1 (so both splits are non-empty). The episodes are the first picks of a Fisher–Yates
// shuffle driven by splitmix64 seeded with `seed` (unbiased bounded draws by rejection), so the
// split is the same on every platform; it differs from numpy's default_rng choice.
std::vector<bool> validation_episode_mask(int64_t episodes, double val_ratio, uint64_t seed);

// The negation of a mask (DP: train_mask = ~val_mask).
std::vector<bool> complement(const std::vector<bool>& mask);

// Copies one window's rows into caller buffers of horizon x row size (state: state_dim floats,
// action: action_dim floats, images: H*W*3 bytes per step), padding as described above. A null
// pointer skips that array. `image_steps` >= 0 copies only the first min(image_steps, horizon)
// images, into a buffer of that many rows: the policy sees n_obs_steps frames of a 16-step
// window (DP's key_first_k). UsageError for a window outside the set or not of length `horizon`.
void copy_window(const EpisodeSet& set, const SequenceWindow& window, int64_t horizon, float* state, float* action,
                 uint8_t* images, int64_t image_steps = -1);

// The windows of one set (which must outlive the sampler) and their copies.
class SequenceSampler {
 public:
  SequenceSampler(const EpisodeSet& set, int64_t horizon, int64_t pad_before = 0, int64_t pad_after = 0,
                  const std::vector<bool>& episode_mask = {});

  int64_t size() const { return static_cast<int64_t>(windows_.size()); }
  int64_t horizon() const { return horizon_; }
  const std::vector<SequenceWindow>& windows() const { return windows_; }
  // Window `index` (UsageError when out of range) into buffers as for copy_window.
  void sample(int64_t index, float* state, float* action, uint8_t* images, int64_t image_steps = -1) const;

 private:
  const EpisodeSet* set_;
  int64_t horizon_;
  std::vector<SequenceWindow> windows_;
};

}  // namespace sparsevit::episodes
