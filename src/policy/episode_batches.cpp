#include "policy/episode_batches.h"

#include <ATen/ATen.h>

#include <numeric>
#include <random>

#include "policy/observation_images.h"
#include "util/errors.h"

namespace sparsevit::policy {
namespace {

const episodes::EpisodeSet& checked(const std::shared_ptr<const episodes::EpisodeSet>& set, PolicyObservation observation) {
  if (!set) throw UsageError("policy data: no demonstrations");
  const bool image = observation == PolicyObservation::kImage;
  if (image && set->image_bytes() <= 0) throw UsageError("policy data: the demonstrations have no images");
  if (image && set->state_dim < 2) throw UsageError("policy data: the state needs the agent position in columns 0 and 1");
  if (!image && set->state_dim != kPushTStateDim)
    throw UsageError("policy data: a low-dim policy needs PushT's state (agent x, y, block x, y, angle), got " +
                     std::to_string(set->state_dim) + " columns");
  return *set;
}

}  // namespace

EpisodeBatchSource::EpisodeBatchSource(std::shared_ptr<const episodes::EpisodeSet> set,
                                       const EpisodeBatchOptions& options, const std::vector<bool>& episode_mask)
    : set_(std::move(set)),
      options_(options),
      sampler_(checked(set_, options.observation), options.pred_horizon, options.obs_horizon - 1, options.action_horizon - 1, episode_mask) {
  if (sampler_.size() == 0) throw UsageError("policy data: no training window in the demonstrations");
  if (options_.batch_size < 1 || options_.world_size < 1 || options_.rank < 0 || options_.rank >= options_.world_size)
    throw UsageError("policy data: bad batch size or rank");
  set_epoch(0);
}

void EpisodeBatchSource::set_epoch(int64_t epoch) {
  std::vector<int64_t> all(static_cast<std::size_t>(sampler_.size()));
  std::iota(all.begin(), all.end(), 0);
  if (options_.shuffle) {  // Fisher-Yates with our own bounded draws: the same order everywhere
    std::mt19937_64 rng(options_.seed * 1000003ULL + static_cast<uint64_t>(epoch));
    for (std::size_t i = all.size(); i > 1; --i) std::swap(all[i - 1], all[rng() % i]);
  }
  // Every rank takes the same number of windows (the engine's steps must line up across ranks).
  const std::size_t per_rank = all.size() / static_cast<std::size_t>(options_.world_size);
  order_.clear();
  for (std::size_t i = 0; i < per_rank; ++i)
    order_.push_back(all[i * static_cast<std::size_t>(options_.world_size) + static_cast<std::size_t>(options_.rank)]);
  cursor_ = 0;
}

int64_t EpisodeBatchSource::num_batches() const {
  const int64_t n = static_cast<int64_t>(order_.size());
  return options_.drop_last ? n / options_.batch_size : (n + options_.batch_size - 1) / options_.batch_size;
}

bool EpisodeBatchSource::next(data::Batch& batch) {
  const int64_t remaining = static_cast<int64_t>(order_.size() - cursor_);
  const int64_t b = std::min(options_.batch_size, remaining);
  if (b <= 0 || (options_.drop_last && b < options_.batch_size)) return false;
  const episodes::EpisodeSet& set = *set_;
  const int64_t to = options_.obs_horizon, tp = options_.pred_horizon;
  const int64_t sd = set.state_dim, ad = set.action_dim, frame = set.image_bytes();
  std::vector<float> state(static_cast<std::size_t>(tp * sd)), action(static_cast<std::size_t>(tp * ad));
  const bool image = options_.observation == PolicyObservation::kImage;
  const int64_t ld = lowdim_dim(options_.observation);
  std::vector<uint8_t> images(image ? static_cast<std::size_t>(b * to * frame) : 0);
  at::Tensor agent_pos = at::empty({b, to, ld}, at::kFloat), actions = at::empty({b, tp, ad}, at::kFloat);
  // The block pose beside an image policy's observations (its auxiliary loss's target).
  const bool with_pose = image && sd >= kPushTStateDim;
  at::Tensor block_pose = with_pose ? at::empty({b, to, kBlockPoseDim}, at::kFloat) : at::Tensor();
  float* pos = agent_pos.data_ptr<float>();
  float* act = actions.data_ptr<float>();
  batch.indices.clear();
  for (int64_t i = 0; i < b; ++i) {
    const int64_t w = order_[cursor_++];
    batch.indices.push_back(w);
    // Only the first obs_horizon images of the window (DP's key_first_k): the rest are not seen.
    sampler_.sample(w, state.data(), action.data(), image ? images.data() + i * to * frame : nullptr, image ? to : 0);
    for (int64_t t = 0; t < to; ++t) {
      lowdim_features(options_.observation, state.data() + t * sd, pos + (i * to + t) * ld);
      if (with_pose) block_pose_features(state.data() + t * sd, block_pose.data_ptr<float>() + (i * to + t) * kBlockPoseDim);
    }
    std::copy(action.begin(), action.end(), act + i * tp * ad);
  }
  if (image) {
    const at::Tensor frames = observation_images(images.data(), b * to, set.image_height, set.image_width,
                                                 options_.image_size);
    batch.images = frames.view({b, to, 3, options_.image_size, options_.image_size});
  } else {
    batch.images = at::Tensor();
  }
  batch.labels = at::zeros({b}, at::kLong);
  batch.extras = {{"agent_pos", agent_pos}, {"action", actions}};
  if (with_pose) batch.extras["block_pose"] = block_pose;
  return true;
}

}  // namespace sparsevit::policy
