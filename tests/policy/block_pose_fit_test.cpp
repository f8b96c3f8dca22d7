// The block-pose fit (issue #32's ceiling on how precisely an encoder can locate the block): a
// tiny encoder trained for a few hundred steps locates the block on held-out episodes better
// than the blind mean pose, only the encoder and readout move, and bad input is refused.
#include "policy/block_pose_fit.h"

#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <iostream>
#include <nlohmann/json.hpp>

#include "envs/pusht_demonstrations.h"
#include "policy/tiny_policy.h"
#include "util/errors.h"

namespace sparsevit::policy {
namespace {

TEST(BlockPoseFit, TrainedEncoderBeatsTheBlindMeanOnHeldOutEpisodesAndLeavesTheUnetAlone) {
  at::manual_seed(0);
  const episodes::EpisodeSet demos = testing::tiny_expert_demonstrations(40);
  DiffusionPolicy policy(testing::tiny_spatial_softmax_config());
  at::Tensor unet_before, encoder_before;
  for (const auto& p : policy.named_parameters()) {
    if (p.key() == "model.final_conv.1.weight") unet_before = p.value().clone();
    if (p.key() == "obs_encoder.patch_embed.proj.weight") encoder_before = p.value().clone();
  }
  ASSERT_TRUE(unet_before.defined() && encoder_before.defined());
  BlockPoseFitOptions o;
  o.first_episode = 34;
  o.steps = 300;
  o.batch_size = 32;
  o.lr = 3e-3;
  o.warmup_steps = 20;
  int64_t calls = 0;
  const BlockPoseFitResult r = fit_block_pose(policy, demos, o, [&](int64_t, double) { ++calls; }, 100);
  std::cout << r.to_table() << std::endl;
  EXPECT_EQ(calls, 3);
  EXPECT_EQ(r.test_frames, demos.steps() - demos.episode_begin(34));
  EXPECT_EQ(r.train_frames, std::min<int64_t>(o.max_test_frames, demos.episode_begin(34)));
  EXPECT_GT(r.baseline_position_rmse, 20.0);
  // Fitted to the block, the held-out error falls well below the blind mean's; fitted to the
  // wrong frames or the agent's position, it would not.
  EXPECT_LT(r.position_rmse, 0.75 * r.baseline_position_rmse) << r.to_json().dump();
  EXPECT_LT(r.train_position_rmse, 0.75 * r.baseline_position_rmse) << r.to_json().dump();
  for (const auto& p : policy.named_parameters()) {
    if (p.key() == "model.final_conv.1.weight") { EXPECT_TRUE(p.value().equal(unet_before)); }
    if (p.key() == "obs_encoder.patch_embed.proj.weight") { EXPECT_FALSE(p.value().equal(encoder_before)); }
  }
  for (const char* key : {"position_rmse", "train_position_rmse", "baseline_position_rmse", "final_loss", "steps"})
    EXPECT_TRUE(r.to_json().contains(key)) << key;

  o.steps = 1;
  o.first_episode = 0;
  EXPECT_THROW(fit_block_pose(policy, demos, o), UsageError);  // nothing to train on
  o.first_episode = 40;
  EXPECT_THROW(fit_block_pose(policy, demos, o), UsageError);  // nothing held out
  o.first_episode = 34;
  o.steps = 0;
  EXPECT_THROW(fit_block_pose(policy, demos, o), UsageError);
  DiffusionPolicy lowdim_policy(testing::as_lowdim(testing::tiny_policy_config()));
  o.steps = 1;
  EXPECT_THROW(fit_block_pose(lowdim_policy, demos, o), UsageError);
}

}  // namespace
}  // namespace sparsevit::policy
