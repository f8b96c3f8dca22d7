#include "episodes/episode_set.h"

#include <gtest/gtest.h>

#include "episode_test_util.h"
#include "util/errors.h"

namespace sparsevit::episodes {
namespace {

using testing::make_set;

TEST(EpisodeSet, AppendEpisodesConcatenatesAndMarksEnds) {
  const EpisodeSet set = make_set({3, 1, 4});
  EXPECT_EQ(set.episodes(), 3);
  EXPECT_EQ(set.steps(), 8);
  EXPECT_EQ(set.episode_ends, (std::vector<int64_t>{3, 4, 8}));
  EXPECT_EQ(set.episode_begin(2), 4);
  EXPECT_EQ(set.episode_end(1), 4);
  EXPECT_EQ(set.state.size(), 8u * 5);
  EXPECT_EQ(set.images.size(), 8u * 2 * 3 * 3);
  EXPECT_FLOAT_EQ(set.state[5 * 4 + 1], 41.0f);  // step 4, column 1
  EXPECT_NO_THROW(set.validate());
  EXPECT_THROW(set.episode_begin(3), UsageError);
}

TEST(EpisodeSet, AppendRefusesMismatchedArrays) {
  EpisodeSet set = make_set({2});
  std::vector<uint8_t> images(2 * set.image_bytes());
  std::vector<float> state(2 * 5), action(2 * 2);
  EXPECT_NO_THROW(set.append_episode(images, state, action));
  action.pop_back();
  EXPECT_THROW(set.append_episode(images, state, action), UsageError);
  action.push_back(0);
  images.pop_back();
  EXPECT_THROW(set.append_episode(images, state, action), UsageError);
  EXPECT_THROW(set.append_episode({}, {}, {}), UsageError);
  EXPECT_EQ(set.steps(), 4);  // the refused appends changed nothing
  EXPECT_EQ(set.state.size(), 4u * 5);
}

TEST(EpisodeSet, ValidateNamesTheInconsistency) {
  const auto message = [](const EpisodeSet& set) {
    try {
      set.validate();
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EpisodeSet set = make_set({2, 3});
  set.episode_ends = {3, 3};
  EXPECT_NE(message(set).find("episode_ends[1]"), std::string::npos) << message(set);
  set.episode_ends = {0, 5};
  EXPECT_NE(message(set).find("not positive"), std::string::npos) << message(set);
  set.episode_ends = {2, 6};
  EXPECT_NE(message(set).find("state"), std::string::npos) << message(set);
  set.episode_ends = {2, 5};
  set.action.pop_back();
  EXPECT_NE(message(set).find("action"), std::string::npos) << message(set);
  set = make_set({2, 3});
  set.images.push_back(0);
  EXPECT_NE(message(set).find("images"), std::string::npos) << message(set);
  set = make_set({2, 3});
  set.state_dim = -1;
  EXPECT_NE(message(set).find("state_dim"), std::string::npos) << message(set);
  set = make_set({2, 3});
  set.episode_ends.back() = int64_t{1} << 62;  // absurd: checked without overflow
  EXPECT_NE(message(set).find("state"), std::string::npos) << message(set);
}

}  // namespace
}  // namespace sparsevit::episodes
