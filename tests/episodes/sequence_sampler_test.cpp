#include "episodes/sequence_sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "episode_test_util.h"
#include "util/errors.h"

namespace sparsevit::episodes {
namespace {

using testing::make_set;
using Rows = std::vector<std::vector<int64_t>>;

Rows rows(const std::vector<SequenceWindow>& windows) {
  Rows out;
  for (const auto& w : windows) out.push_back({w.buffer_start, w.buffer_end, w.sample_start, w.sample_end});
  return out;
}

// Pinned from tests/episodes/dp_create_indices.py, a transcription of Diffusion Policy's
// create_indices (diffusion_policy/common/sampler.py).
TEST(SequenceWindows, MatchDiffusionPolicysCreateIndices) {
  const std::vector<int64_t> ends = {5, 8, 14};
  EXPECT_EQ(rows(create_sequence_windows(ends, 4, 1, 3)),
            (Rows{{0, 3, 1, 4},  {0, 4, 0, 4},  {1, 5, 0, 4},  {2, 5, 0, 3},  {3, 5, 0, 2},  {4, 5, 0, 1},
                  {5, 8, 1, 4},  {5, 8, 0, 3},  {6, 8, 0, 2},  {7, 8, 0, 1},  {8, 11, 1, 4}, {8, 12, 0, 4},
                  {9, 13, 0, 4}, {10, 14, 0, 4}, {11, 14, 0, 3}, {12, 14, 0, 2}, {13, 14, 0, 1}}));
  EXPECT_EQ(rows(create_sequence_windows(ends, 4, 1, 3, {true, false, true})),
            (Rows{{0, 3, 1, 4}, {0, 4, 0, 4}, {1, 5, 0, 4}, {2, 5, 0, 3}, {3, 5, 0, 2}, {4, 5, 0, 1}, {8, 11, 1, 4},
                  {8, 12, 0, 4}, {9, 13, 0, 4}, {10, 14, 0, 4}, {11, 14, 0, 3}, {12, 14, 0, 2}, {13, 14, 0, 1}}));
  EXPECT_EQ(rows(create_sequence_windows(ends, 4, 0, 0)),
            (Rows{{0, 4, 0, 4}, {1, 5, 0, 4}, {8, 12, 0, 4}, {9, 13, 0, 4}, {10, 14, 0, 4}}));
  EXPECT_EQ(rows(create_sequence_windows({2, 9}, 6, 0, 0)), (Rows{{2, 8, 0, 6}, {3, 9, 0, 6}}));
  EXPECT_EQ(rows(create_sequence_windows({3}, 3, 7, -2)), (Rows{{0, 1, 2, 3}, {0, 2, 1, 3}, {0, 3, 0, 3}}));
  EXPECT_TRUE(create_sequence_windows({}, 4, 1, 3).empty());
}

TEST(SequenceWindows, RefuseBadArguments) {
  EXPECT_THROW(create_sequence_windows({5}, 0, 0, 0), UsageError);
  EXPECT_THROW(create_sequence_windows({5, 8}, 2, 0, 0, {true}), UsageError);
  EXPECT_THROW(create_sequence_windows({5, 5}, 2, 0, 0), UsageError);
  EXPECT_THROW(create_sequence_windows({0}, 2, 0, 0), UsageError);
}

TEST(SequenceSampler, CopiesWindowsWithEdgePadding) {
  // State rows are [10 t, 10 t + 1, ...] (make_set), so column 0 / 10 is the step.
  const EpisodeSet set = make_set({5, 3, 6}, 2, 2, 2, 1);
  const SequenceSampler sampler(set, 4, 1, 3);
  ASSERT_EQ(sampler.size(), 17);
  const auto steps_of = [&](int64_t index) {
    std::vector<float> state(4 * 2, -1.0f), action(4 * 1, 1.0f);
    std::vector<uint8_t> images(4 * set.image_bytes(), 0);
    sampler.sample(index, state.data(), action.data(), images.data());
    std::vector<int64_t> steps;
    for (int64_t t = 0; t < 4; ++t) {
      const int64_t step = static_cast<int64_t>(state[t * 2]) / 10;
      steps.push_back(step);
      // Every array of a row comes from the same step.
      EXPECT_EQ(state[t * 2 + 1], static_cast<float>(step * 10 + 1));
      EXPECT_EQ(action[t], -static_cast<float>(step * 10));
      for (int64_t b = 0; b < set.image_bytes(); ++b)
        EXPECT_EQ(images[t * set.image_bytes() + b], set.images[step * set.image_bytes() + b]);
    }
    return steps;
  };
  // dp_create_indices.py's "sample" lines.
  EXPECT_EQ(steps_of(0), (std::vector<int64_t>{0, 0, 1, 2}));
  EXPECT_EQ(steps_of(4), (std::vector<int64_t>{3, 4, 4, 4}));
  EXPECT_EQ(steps_of(5), (std::vector<int64_t>{4, 4, 4, 4}));
  EXPECT_EQ(steps_of(16), (std::vector<int64_t>{13, 13, 13, 13}));
  EXPECT_EQ(steps_of(6), (std::vector<int64_t>{5, 5, 6, 7}));  // padding stays inside episode 1
  EXPECT_THROW(steps_of(17), UsageError);

  // Only the first image_steps images (DP's key_first_k): the buffer holds just those rows.
  std::vector<uint8_t> first_two(2 * set.image_bytes() + 1, 0xEE);
  sampler.sample(0, nullptr, nullptr, first_two.data(), 2);
  EXPECT_EQ(first_two.back(), 0xEE);  // nothing written past two rows
  for (int64_t b = 0; b < set.image_bytes(); ++b) {
    EXPECT_EQ(first_two[b], set.images[b]);                     // padded: step 0
    EXPECT_EQ(first_two[set.image_bytes() + b], set.images[b]);  // step 0
  }
  std::vector<uint8_t> all(4 * set.image_bytes()), capped(4 * set.image_bytes());
  sampler.sample(3, nullptr, nullptr, all.data());
  sampler.sample(3, nullptr, nullptr, capped.data(), 99);  // more than the horizon: all of it
  EXPECT_EQ(capped, all);

  // Null buffers are skipped.
  std::vector<float> action(4);
  sampler.sample(11, nullptr, action.data(), nullptr);
  EXPECT_EQ(action, (std::vector<float>{-80, -90, -100, -110}));
}

TEST(SequenceSampler, RefusesWindowsThatDoNotFitTheSet) {
  const EpisodeSet set = make_set({3}, 1, 1, 1, 1);
  std::vector<float> state(4);
  EXPECT_THROW(copy_window(set, {0, 4, 0, 4}, 4, state.data(), nullptr, nullptr), UsageError);
  EXPECT_THROW(copy_window(set, {0, 3, 0, 4}, 4, state.data(), nullptr, nullptr), UsageError);
  EXPECT_THROW(copy_window(set, {1, 1, 0, 0}, 4, state.data(), nullptr, nullptr), UsageError);
  EXPECT_NO_THROW(copy_window(set, {0, 3, 1, 4}, 4, state.data(), nullptr, nullptr));
  EXPECT_EQ(state, (std::vector<float>{0, 0, 10, 20}));
}

TEST(ValidationMask, FollowsDiffusionPolicysCounts) {
  const auto count = [](const std::vector<bool>& mask) { return std::count(mask.begin(), mask.end(), true); };
  EXPECT_EQ(count(validation_episode_mask(10, 0.0, 42)), 0);
  EXPECT_EQ(count(validation_episode_mask(1, 0.5, 42)), 0);      // a lone episode trains
  EXPECT_EQ(count(validation_episode_mask(10, 0.02, 42)), 1);    // at least one
  EXPECT_EQ(count(validation_episode_mask(10, 1.0, 42)), 9);     // at most n - 1
  EXPECT_EQ(count(validation_episode_mask(206, 0.02, 42)), 4);   // PushT: round(4.12)
  EXPECT_EQ(count(validation_episode_mask(10, 0.25, 42)), 2);    // round(2.5) = 2, half to even as Python
  EXPECT_EQ(count(validation_episode_mask(10, 0.35, 42)), 4);    // round(3.5) = 4
  EXPECT_EQ(validation_episode_mask(7, 0.0, 1).size(), 7u);
}

TEST(ValidationMask, IsDeterministicPerSeedAndPinned) {
  const auto mask = validation_episode_mask(20, 0.25, 42);
  EXPECT_EQ(mask, validation_episode_mask(20, 0.25, 42));
  EXPECT_NE(mask, validation_episode_mask(20, 0.25, 43));
  std::vector<int64_t> picked;
  for (size_t e = 0; e < mask.size(); ++e)
    if (mask[e]) picked.push_back(static_cast<int64_t>(e));
  // splitmix64-driven Fisher–Yates (sequence_sampler.h): the same split on every platform
  // (checked against a Python transcription of the same steps).
  EXPECT_EQ(picked, (std::vector<int64_t>{2, 6, 8, 13, 16}));
  const auto train = complement(mask);
  for (size_t e = 0; e < mask.size(); ++e) EXPECT_NE(train[e], mask[e]);
  // The split feeds the sampler: validation windows only come from validation episodes.
  const EpisodeSet set = make_set(std::vector<int64_t>(20, 3), 1, 1, 1, 1);
  const SequenceSampler validation(set, 2, 1, 1, mask);
  EXPECT_EQ(validation.size(), 5 * 4);  // 3 steps, horizon 2, pads 1 + 1: 4 windows per episode
  for (const auto& w : validation.windows())
    EXPECT_TRUE(mask[static_cast<size_t>(w.buffer_start / 3)]) << w.buffer_start;
}

}  // namespace
}  // namespace sparsevit::episodes
