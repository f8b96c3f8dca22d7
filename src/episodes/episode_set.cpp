#include "episodes/episode_set.h"

#include <string>

#include "util/errors.h"

namespace sparsevit::episodes {
namespace {

// Far above any demonstration (PushT: 96 x 96, 5 and 2 dims) and low enough that products of
// them never overflow int64 for any step count the size checks let through.
constexpr int64_t kMaxImageSide = 1 << 14;
constexpr int64_t kMaxDim = 1 << 16;

void check_dim(const char* name, int64_t value, int64_t max) {
  if (value < 0 || value > max)
    throw UsageError("episode set: " + std::string(name) + " = " + std::to_string(value) + " is outside [0, " +
                     std::to_string(max) + "]");
}

// Division instead of steps * row: an absurd last episode end cannot overflow the check.
void check_size(const char* name, size_t actual, int64_t steps, int64_t row) {
  const auto row_size = static_cast<uint64_t>(row);
  const bool ok = row == 0 ? actual == 0 : actual % row_size == 0 && actual / row_size == static_cast<uint64_t>(steps);
  if (!ok)
    throw UsageError("episode set: " + std::string(name) + " holds " + std::to_string(actual) + " values, expected " +
                     std::to_string(steps) + " steps x " + std::to_string(row));
}

}  // namespace

int64_t EpisodeSet::steps() const { return episode_ends.empty() ? 0 : episode_ends.back(); }

int64_t EpisodeSet::episode_begin(int64_t e) const {
  if (e < 0 || e >= episodes())
    throw UsageError("episode set: episode " + std::to_string(e) + " out of range [0, " + std::to_string(episodes()) + ")");
  return e == 0 ? 0 : episode_ends[static_cast<size_t>(e - 1)];
}

int64_t EpisodeSet::episode_end(int64_t e) const {
  episode_begin(e);  // range check
  return episode_ends[static_cast<size_t>(e)];
}

void EpisodeSet::append_episode(const std::vector<uint8_t>& episode_images, const std::vector<float>& episode_state,
                                const std::vector<float>& episode_action) {
  check_dim("state_dim", state_dim, kMaxDim);
  check_dim("action_dim", action_dim, kMaxDim);
  check_dim("image_height", image_height, kMaxImageSide);
  check_dim("image_width", image_width, kMaxImageSide);
  // The step count comes from the one array that always has a row: the state (or the action).
  const int64_t row = state_dim > 0 ? state_dim : action_dim;
  const size_t row_size = static_cast<size_t>(row);
  if (row == 0) throw UsageError("episode set: append_episode needs state_dim or action_dim > 0");
  const int64_t n = static_cast<int64_t>((state_dim > 0 ? episode_state.size() : episode_action.size()) / row_size);
  if (n == 0) throw UsageError("episode set: appended episode has no steps");
  check_size("appended state", episode_state.size(), n, state_dim);
  check_size("appended action", episode_action.size(), n, action_dim);
  check_size("appended images", episode_images.size(), n, image_bytes());
  images.insert(images.end(), episode_images.begin(), episode_images.end());
  state.insert(state.end(), episode_state.begin(), episode_state.end());
  action.insert(action.end(), episode_action.begin(), episode_action.end());
  episode_ends.push_back(steps() + n);
}

void EpisodeSet::validate() const {
  check_dim("image_height", image_height, kMaxImageSide);
  check_dim("image_width", image_width, kMaxImageSide);
  check_dim("state_dim", state_dim, kMaxDim);
  check_dim("action_dim", action_dim, kMaxDim);
  int64_t previous = 0;
  for (size_t e = 0; e < episode_ends.size(); ++e) {
    if (episode_ends[e] <= previous)
      throw UsageError("episode set: episode_ends[" + std::to_string(e) + "] = " + std::to_string(episode_ends[e]) +
                       (e == 0 ? " is not positive" : " does not exceed the previous end " + std::to_string(previous)));
    previous = episode_ends[e];
  }
  const int64_t n = steps();
  check_size("state", state.size(), n, state_dim);
  check_size("action", action.size(), n, action_dim);
  check_size("images", images.size(), n, image_bytes());
}

}  // namespace sparsevit::episodes
