// The low-dimensional observation and the block pose, read from PushT's state rows.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "policy/lowdim_observation.h"
#include "util/errors.h"

namespace sparsevit::policy {
namespace {

TEST(LowdimObservation, ReadsTheAgentAndTheBlockPoseFromAStateRow) {
  // agent (100, 200), block (300, 150) at 2.5 rad: the angle becomes cos/sin, which do not jump at +-pi.
  const float state[kPushTStateDim] = {100.0f, 200.0f, 300.0f, 150.0f, 2.5f};
  std::vector<float> image(static_cast<std::size_t>(lowdim_dim(PolicyObservation::kImage)), -1.0f);
  lowdim_features(PolicyObservation::kImage, state, image.data());
  EXPECT_EQ(image, (std::vector<float>{100.0f, 200.0f}));
  std::vector<float> lowdim(static_cast<std::size_t>(lowdim_dim(PolicyObservation::kLowdim)), -1.0f);
  lowdim_features(PolicyObservation::kLowdim, state, lowdim.data());
  ASSERT_EQ(lowdim.size(), 6u);
  EXPECT_EQ(lowdim[0], 100.0f);
  EXPECT_EQ(lowdim[1], 200.0f);
  EXPECT_EQ(lowdim[2], 300.0f);
  EXPECT_EQ(lowdim[3], 150.0f);
  EXPECT_NEAR(lowdim[4], std::cos(2.5), 1e-6);
  EXPECT_NEAR(lowdim[5], std::sin(2.5), 1e-6);
  // The block pose alone is the low-dim observation's last kBlockPoseDim entries.
  std::vector<float> pose(static_cast<std::size_t>(kBlockPoseDim), -1.0f);
  block_pose_features(state, pose.data());
  EXPECT_EQ(pose, std::vector<float>(lowdim.begin() + 2, lowdim.end()));
}

TEST(LowdimObservation, NamesRoundTripAndUnknownNamesAreRefused) {
  EXPECT_EQ(parse_policy_observation(policy_observation_name(PolicyObservation::kImage)), PolicyObservation::kImage);
  EXPECT_EQ(parse_policy_observation(policy_observation_name(PolicyObservation::kLowdim)), PolicyObservation::kLowdim);
  try {
    parse_policy_observation("state");
    FAIL() << "accepted 'state'";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("image, lowdim"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace sparsevit::policy
