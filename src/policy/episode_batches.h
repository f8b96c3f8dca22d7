// Training batches of the diffusion policy from demonstrations (Diffusion Policy's
// PushTImageDataset): every window of pred_horizon steps inside an episode, padded by repeating
// the first step (obs_horizon - 1 before) and the last (action_horizon - 1 after). A batch holds
// the window's first obs_horizon images and agent positions and its whole action chunk.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "data/data_loader.h"
#include "episodes/episode_set.h"
#include "episodes/sequence_sampler.h"
#include "policy/lowdim_observation.h"

namespace sparsevit::policy {

struct EpisodeBatchOptions {
  int64_t obs_horizon = 2, pred_horizon = 16, action_horizon = 8;
  int64_t image_size = 96;     // the encoder's input side
  int64_t batch_size = 64;     // per process
  bool shuffle = true;         // a new order every epoch (seed + epoch)
  bool drop_last = true;
  uint64_t seed = 0;
  int64_t rank = 0, world_size = 1;  // data parallel: this process takes every world_size-th window
  // kLowdim: no images (Batch::images undefined), "agent_pos" is the low-dim vector (6 wide).
  PolicyObservation observation = PolicyObservation::kImage;
};

// Batch::images [B, To, 3, S, S] float in [0, 1]; extras "agent_pos" [B, To, 2] (state columns 0
// and 1; for a low-dim policy [B, To, 6], lowdim_observation.h) and "action" [B, pred_horizon, action_dim]; labels zeros [B]; indices the window indices.
// Image policies on PushT states also get "block_pose" [B, To, 4] (x, y, cos θ, sin θ).
class EpisodeBatchSource : public data::BatchSource {
 public:
  // `episode_mask` selects episodes (empty: all). UsageError when the set has no image (image
  // policies), too few state columns or no window.
  EpisodeBatchSource(std::shared_ptr<const episodes::EpisodeSet> set, const EpisodeBatchOptions& options,
                     const std::vector<bool>& episode_mask = {});

  void set_epoch(int64_t epoch) override;
  bool next(data::Batch& batch) override;
  int64_t num_batches() const override;
  int64_t batch_size() const override { return options_.batch_size; }
  int64_t num_windows() const { return sampler_.size(); }

 private:
  std::shared_ptr<const episodes::EpisodeSet> set_;
  EpisodeBatchOptions options_;
  episodes::SequenceSampler sampler_;
  std::vector<int64_t> order_;  // this process's windows for the epoch
  std::size_t cursor_ = 0;
};

}  // namespace sparsevit::policy
