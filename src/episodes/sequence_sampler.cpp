#include "episodes/sequence_sampler.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>

#include "util/errors.h"

namespace sparsevit::episodes {
namespace {

// splitmix64 (Steele, Lea, Flood 2014): tiny, fully specified, the same on every platform.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, bound): draws below 2^64 mod bound are rejected, so no value is favoured.
  uint64_t below(uint64_t bound) {
    const uint64_t threshold = (0 - bound) % bound;
    uint64_t r = next();
    while (r < threshold) r = next();
    return r % bound;
  }

 private:
  uint64_t state_;
};

}  // namespace

std::vector<SequenceWindow> create_sequence_windows(const std::vector<int64_t>& episode_ends, int64_t horizon,
                                                    int64_t pad_before, int64_t pad_after,
                                                    const std::vector<bool>& episode_mask) {
  if (horizon < 1) throw UsageError("sequence sampler: horizon " + std::to_string(horizon) + " must be at least 1");
  if (!episode_mask.empty() && episode_mask.size() != episode_ends.size())
    throw UsageError("sequence sampler: episode mask has " + std::to_string(episode_mask.size()) + " entries for " +
                     std::to_string(episode_ends.size()) + " episodes");
  pad_before = std::clamp<int64_t>(pad_before, 0, horizon - 1);
  pad_after = std::clamp<int64_t>(pad_after, 0, horizon - 1);
  std::vector<SequenceWindow> windows;
  int64_t start = 0;
  for (size_t e = 0; e < episode_ends.size(); ++e) {
    const int64_t end = episode_ends[e];
    if (end <= start)
      throw UsageError("sequence sampler: episode_ends[" + std::to_string(e) + "] = " + std::to_string(end) +
                       " does not exceed " + std::to_string(start));
    const int64_t length = end - start;
    if (episode_mask.empty() || episode_mask[e]) {
      // idx is the window's first step relative to the episode start, possibly before it.
      for (int64_t idx = -pad_before; idx <= length - horizon + pad_after; ++idx) {
        SequenceWindow w;
        w.buffer_start = std::max<int64_t>(idx, 0) + start;
        w.buffer_end = std::min(idx + horizon, length) + start;
        w.sample_start = w.buffer_start - (idx + start);
        w.sample_end = horizon - ((idx + horizon + start) - w.buffer_end);
        windows.push_back(w);
      }
    }
    start = end;
  }
  return windows;
}

std::vector<bool> validation_episode_mask(int64_t episodes, double val_ratio, uint64_t seed) {
  if (episodes < 0) throw UsageError("validation split: negative episode count");
  std::vector<bool> mask(static_cast<size_t>(episodes), false);
  if (!(val_ratio > 0) || episodes < 2) return mask;
  // Python's round() (DP: round(n_episodes * val_ratio)) rounds halves to even, as nearbyint does.
  const double wanted = std::nearbyint(static_cast<double>(episodes) * std::min(val_ratio, 1.0));
  const int64_t n_val = std::min<int64_t>(std::max<int64_t>(1, static_cast<int64_t>(wanted)), episodes - 1);
  std::vector<int64_t> order(static_cast<size_t>(episodes));
  std::iota(order.begin(), order.end(), 0);
  SplitMix64 rng(seed);
  for (int64_t i = 0; i < n_val; ++i) {
    const int64_t j = i + static_cast<int64_t>(rng.below(static_cast<uint64_t>(episodes - i)));
    std::swap(order[static_cast<size_t>(i)], order[static_cast<size_t>(j)]);
    mask[static_cast<size_t>(order[static_cast<size_t>(i)])] = true;
  }
  return mask;
}

std::vector<bool> complement(const std::vector<bool>& mask) {
  std::vector<bool> out(mask.size());
  for (size_t i = 0; i < mask.size(); ++i) out[i] = !mask[i];
  return out;
}

void copy_window(const EpisodeSet& set, const SequenceWindow& w, int64_t horizon, float* state, float* action,
                 uint8_t* images, int64_t image_steps) {
  if (w.buffer_start < 0 || w.buffer_end <= w.buffer_start || w.buffer_end > set.steps() || w.sample_start < 0 ||
      w.sample_end > horizon || w.sample_end - w.sample_start != w.buffer_end - w.buffer_start)
    throw UsageError("sequence sampler: window [" + std::to_string(w.buffer_start) + ", " + std::to_string(w.buffer_end) +
                     ") -> [" + std::to_string(w.sample_start) + ", " + std::to_string(w.sample_end) +
                     ") does not fit a set of " + std::to_string(set.steps()) + " steps and horizon " +
                     std::to_string(horizon));
  const auto copy_rows = [&](const auto* source, auto* target, int64_t row, int64_t rows) {
    if (target == nullptr || row == 0) return;
    for (int64_t t = 0; t < rows; ++t) {
      // Before the window's data: its first step; after it: its last (DP's edge padding).
      const int64_t step = w.buffer_start + std::clamp<int64_t>(t - w.sample_start, 0, w.buffer_end - w.buffer_start - 1);
      std::memcpy(target + t * row, source + step * row, static_cast<size_t>(row) * sizeof(*source));
    }
  };
  copy_rows(set.state.data(), state, set.state_dim, horizon);
  copy_rows(set.action.data(), action, set.action_dim, horizon);
  copy_rows(set.images.data(), images, set.image_bytes(), image_steps < 0 ? horizon : std::min(image_steps, horizon));
}

SequenceSampler::SequenceSampler(const EpisodeSet& set, int64_t horizon, int64_t pad_before, int64_t pad_after,
                                 const std::vector<bool>& episode_mask)
    : set_(&set), horizon_(horizon), windows_(create_sequence_windows(set.episode_ends, horizon, pad_before, pad_after,
                                                                      episode_mask)) {}

void SequenceSampler::sample(int64_t index, float* state, float* action, uint8_t* images, int64_t image_steps) const {
  if (index < 0 || index >= size())
    throw UsageError("sequence sampler: window " + std::to_string(index) + " out of range [0, " +
                     std::to_string(size()) + ")");
  copy_window(*set_, windows_[static_cast<size_t>(index)], horizon_, state, action, images, image_steps);
}

}  // namespace sparsevit::episodes
