// DiffusionPolicy: the wiring of encoder, U-Net, normalisers and Crossway's decoder; training
// batches from episodes; the actor; and a tiny policy that learns one demonstration well enough
// to replay it in closed loop.
#include "policy/diffusion_policy.h"

#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/optim/adam.h>

#include "config/attention_spec.h"
#include "envs/pusht_demonstrations.h"
#include "envs/pusht_env.h"
#include "envs/pusht_rollout.h"
#include "models/vision_transformer.h"
#include "policy/episode_batches.h"
#include "policy/observation_images.h"
#include "policy/policy_actor.h"
#include "policy/tiny_policy.h"
#include "util/errors.h"

namespace sparsevit::policy {
namespace {

DiffusionPolicyConfig tiny_config(double crossway_weight = 0) {
  DiffusionPolicyConfig c = testing::tiny_policy_config();
  c.inference_steps = 8;
  c.crossway_weight = crossway_weight;
  return c;
}

at::Generator generator(uint64_t seed) { return at::make_generator<at::CPUGeneratorImpl>(seed); }

PolicyNormalizers normalizers_for(const at::Tensor& actions, const at::Tensor& agent_pos) {
  return {ActionNormalizer::fit(actions.reshape({-1, 2})), ActionNormalizer::fit(agent_pos.reshape({-1, 2}))};
}

TEST(DiffusionPolicy, ShapesNormalisersAndTheActionRange) {
  at::manual_seed(0);
  DiffusionPolicy policy(tiny_config());
  EXPECT_EQ(policy.image_size(), 16);
  const at::Tensor images = at::rand({3, 2, 3, 16, 16});
  const at::Tensor agent_pos = at::rand({3, 2, 2}) * 512;
  const at::Tensor actions = at::rand({3, 8, 2}) * 100 + 200;  // commanded positions in [200, 300]
  EXPECT_FALSE(policy.has_normalizers());
  policy.set_normalizers(normalizers_for(actions, agent_pos));
  EXPECT_TRUE(policy.has_normalizers());
  at::Generator gen = generator(1);
  const PolicyLoss loss = policy.compute_loss(images, agent_pos, actions, gen);
  EXPECT_TRUE(std::isfinite(loss.total.item<double>()));
  EXPECT_FALSE(loss.reconstruction.defined());
  policy.eval();
  const at::Tensor predicted = policy.predict_action(images, agent_pos, gen);
  ASSERT_EQ(predicted.sizes(), (at::IntArrayRef{3, 4, 2}));
  // Sampling clips x0 to [-1, 1]: unnormalised actions stay in the fitted range [min, max].
  EXPECT_GE(predicted.min().item<double>(), actions.min().item<double>() - 1e-3);
  EXPECT_LE(predicted.max().item<double>(), actions.max().item<double>() + 1e-3);
  // The normalisers are buffers: a state dict carries them.
  bool found = false;
  for (const auto& b : policy.named_buffers()) found |= b.key() == "action_scale";
  EXPECT_TRUE(found);
}

TEST(DiffusionPolicy, SamplingIsDeterministicUnderASeedAndUsesTheObservation) {
  at::manual_seed(0);
  DiffusionPolicy policy(tiny_config());
  policy.eval();
  const at::Tensor images = at::rand({1, 2, 3, 16, 16}), agent_pos = at::rand({1, 2, 2});
  at::Generator a = generator(7), b = generator(7);
  EXPECT_TRUE(at::equal(policy.predict_action(images, agent_pos, a), policy.predict_action(images, agent_pos, b)));
  at::Generator c = generator(7);
  EXPECT_FALSE(at::equal(policy.predict_action(images, agent_pos, a), policy.predict_action(images * 0, agent_pos, c)));
}

TEST(DiffusionPolicy, CrosswayAddsAWeightedReconstructionThatTrainsTheDecoder) {
  at::manual_seed(0);
  DiffusionPolicyConfig config = tiny_config(0.1);
  config.down_dims = {16, 32, 64};  // the mid features span 16 / 4 = 4 steps: the 2x2 grid Crossway decodes
  config.pred_horizon = 16;
  config.action_horizon = 8;
  DiffusionPolicy policy(config);
  const at::Tensor images = at::rand({2, 2, 3, 16, 16}), agent_pos = at::rand({2, 2, 2});
  const at::Tensor actions = at::rand({2, 16, 2});
  policy.set_normalizers(normalizers_for(actions, agent_pos));
  at::Generator gen = generator(3);
  const PolicyLoss loss = policy.compute_loss(images, agent_pos, actions, gen);
  ASSERT_TRUE(loss.reconstruction.defined());
  EXPECT_NEAR(loss.total.item<double>(), loss.diffusion.item<double>() + loss.reconstruction.item<double>(), 1e-6);
  loss.total.backward();
  int64_t decoder_grads = 0;
  for (const auto& p : policy.named_parameters())
    if (p.key().rfind("decoder.", 0) == 0 && p.value().grad().defined() && p.value().grad().abs().sum().item<double>() > 0)
      ++decoder_grads;
  EXPECT_GT(decoder_grads, 0);
  // Without Crossway there is no decoder at all (the plain diffusion policy's parameters).
  for (const auto& p : DiffusionPolicy(tiny_config()).named_parameters()) EXPECT_NE(p.key().rfind("decoder.", 0), 0u);
}

// The auxiliary block-pose loss, recomputed by hand: pose_weight * MSE of the head's linear map of
// each frame's readout feature against that frame's pose, x and y normalised by the agent
// position's fitted limits (DP's limits mode: 2 (v - min) / (max - min) - 1), cos and sin as given.
DiffusionPolicyConfig pose_config(double pose_weight) {
  DiffusionPolicyConfig config = tiny_config();
  config.readout.kind = ObservationReadout::kSpatialSoftmax;
  config.pose_weight = pose_weight;
  return config;
}

TEST(DiffusionPolicy, PoseLossIsTheWeightedHeadMseAndTrainsTheEncoder) {
  at::manual_seed(0);
  DiffusionPolicy policy(pose_config(0.5));
  const int64_t b = 3, to = 2;
  const at::Tensor images = at::rand({b, to, 3, 16, 16}), agent_pos = at::rand({b, to, 2}) * 400 + 50;
  const at::Tensor actions = at::rand({b, 8, 2}) * 400 + 50;
  const at::Tensor angle = at::rand({b, to + 1, 1}) * 6 - 3;
  const at::Tensor block_pose = at::cat({at::rand({b, to + 1, 2}) * 500, angle.cos(), angle.sin()}, 2);
  policy.set_normalizers(normalizers_for(actions, agent_pos));
  policy.eval();  // no random shift: observation_features sees what the loss sees
  at::Generator gen = generator(5);
  const PolicyLoss loss = policy.compute_loss(images, agent_pos, actions, gen, block_pose);
  ASSERT_TRUE(loss.pose.defined());
  at::Tensor w, bias;
  for (const auto& p : policy.named_parameters()) {
    if (p.key() == "pose_head.weight") w = p.value();
    if (p.key() == "pose_head.bias") bias = p.value();
  }
  ASSERT_TRUE(w.defined() && bias.defined());
  at::NoGradGuard no_grad;
  const at::Tensor features = policy.observation_features(images).reshape({b * to, -1}).to(at::kDouble);
  const at::Tensor predicted = features.mm(w.to(at::kDouble).t()) + bias.to(at::kDouble);
  const at::Tensor lo = std::get<0>(agent_pos.reshape({-1, 2}).min(0)).to(at::kDouble),
                   hi = std::get<0>(agent_pos.reshape({-1, 2}).max(0)).to(at::kDouble);
  const at::Tensor pose = block_pose.narrow(1, 0, to).reshape({b * to, 4}).to(at::kDouble);
  const at::Tensor target = at::cat({2 * (pose.narrow(1, 0, 2) - lo) / (hi - lo) - 1, pose.narrow(1, 2, 2)}, 1);
  EXPECT_NEAR(loss.pose.item<double>(), 0.5 * (predicted - target).pow(2).mean().item<double>(), 1e-5);
  EXPECT_NEAR(loss.total.item<double>(), loss.diffusion.item<double>() + loss.pose.item<double>(), 1e-6);
}

TEST(DiffusionPolicy, PoseLossGradientsReachTheEncoderAndItsInputIsChecked) {
  at::manual_seed(0);
  DiffusionPolicy policy(pose_config(1.0));
  const at::Tensor images = at::rand({2, 2, 3, 16, 16}), agent_pos = at::rand({2, 2, 2}) * 512;
  const at::Tensor actions = at::rand({2, 8, 2}) * 512, block_pose = at::rand({2, 2, 4});
  policy.set_normalizers(normalizers_for(actions, agent_pos));
  at::Generator gen = generator(2);
  policy.compute_loss(images, agent_pos, actions, gen, block_pose).pose.backward();
  for (const auto& p : policy.named_parameters()) {
    const bool moved = p.value().grad().defined() && p.value().grad().abs().sum().item<double>() > 0;
    if (p.key() == "obs_encoder.patch_embed.proj.weight" || p.key() == "pose_head.weight") { EXPECT_TRUE(moved) << p.key(); }
    if (p.key().rfind("model.", 0) == 0) { EXPECT_FALSE(moved) << p.key(); }  // the pose loss does not touch the U-Net
  }
  EXPECT_THROW(policy.compute_loss(images, agent_pos, actions, gen), UsageError);  // no block pose
  EXPECT_THROW(policy.compute_loss(images, agent_pos, actions, gen, at::rand({2, 2, 3})), UsageError);
  // Without pose_weight there is no head and no pose term.
  DiffusionPolicy plain(tiny_config());
  for (const auto& p : plain.named_parameters()) EXPECT_NE(p.key().rfind("pose_head.", 0), 0u);
  plain.set_normalizers(normalizers_for(actions, agent_pos));
  EXPECT_FALSE(plain.compute_loss(images, agent_pos, actions, gen, block_pose).pose.defined());
  DiffusionPolicyConfig lowdim = testing::as_lowdim(tiny_config());
  lowdim.pose_weight = 1.0;
  EXPECT_THROW(DiffusionPolicy{lowdim}, UsageError);
}

TEST(DiffusionPolicy, BadConfigurationsAreUsageErrors) {
  DiffusionPolicyConfig c = tiny_config();
  c.action_horizon = 8;  // obs_horizon - 1 + 8 > pred_horizon 8
  EXPECT_THROW(DiffusionPolicy{c}, UsageError);
  c = tiny_config();
  c.pred_horizon = 7;  // not a multiple of 2 for a 2-level U-Net
  EXPECT_THROW(DiffusionPolicy{c}, UsageError);
  c = tiny_config();
  c.inference_steps = 101;
  EXPECT_THROW(DiffusionPolicy{c}, UsageError);
  DiffusionPolicy policy(tiny_config());
  at::Generator gen = generator(0);
  EXPECT_THROW(policy.compute_loss(at::rand({1, 2, 3, 8, 8}), at::rand({1, 2, 2}), at::rand({1, 8, 2}), gen), UsageError);
  EXPECT_THROW(parse_dims("64,x", "down_dims"), UsageError);
  EXPECT_EQ(parse_dims("8,16", "down_dims"), (std::vector<int64_t>{8, 16}));
}

TEST(DiffusionPolicy, FibottentionCutsTheEncodersAttentionCost) {
  DiffusionPolicyConfig dense = tiny_config(), sparse = tiny_config();
  dense.encoder.img_size = sparse.encoder.img_size = 48;
  sparse.encoder.attention = config::parse_attention_spec(
      "attention: {backend: vit, mask: fibo, mask_kwargs: {w_min: 1, w_max: 12}}\n", "test");
  EXPECT_LT(DiffusionPolicy(sparse).encoder_attention_gflops(), 0.6 * DiffusionPolicy(dense).encoder_attention_gflops());
}

using testing::tiny_expert_demonstrations;

TEST(EpisodeBatchSource, WindowsCarryTheFirstObservationsAndTheWholeActionChunk) {
  auto set = std::make_shared<episodes::EpisodeSet>(tiny_expert_demonstrations(1, 0));
  EpisodeBatchOptions o;
  o.pred_horizon = 8;
  o.action_horizon = 4;
  o.image_size = 16;
  o.batch_size = 4;
  o.shuffle = false;
  EpisodeBatchSource source(set, o);
  // DP's windows: pad_before 1, pad_after 3 -> steps - 8 + 1 + 1 + 3 windows.
  EXPECT_EQ(source.num_windows(), set->steps() - 8 + 1 + 1 + 3);
  data::Batch batch;
  ASSERT_TRUE(source.next(batch));
  ASSERT_EQ(batch.images.sizes(), (at::IntArrayRef{4, 2, 3, 16, 16}));
  ASSERT_EQ(batch.extras.at("action").sizes(), (at::IntArrayRef{4, 8, 2}));
  // The first window starts one step before the episode: its first observation repeats step 0.
  EXPECT_TRUE(at::equal(batch.images[0][0], batch.images[0][1]));
  EXPECT_FLOAT_EQ(batch.extras.at("agent_pos")[0][0][0].item<float>(), set->state[0]);
  EXPECT_FLOAT_EQ(batch.extras.at("action")[0][1][0].item<float>(), set->action[0]);  // position 1 = step 0
  // The block pose of the same steps (the pose loss's target): x, y, cos, sin of state columns 2..4.
  const at::Tensor pose = batch.extras.at("block_pose");
  ASSERT_EQ(pose.sizes(), (at::IntArrayRef{4, 2, 4}));
  const float* second = set->state.data() + set->state_dim;  // step 1: the second window's last observation
  EXPECT_FLOAT_EQ(pose[1][1][0].item<float>(), second[2]);
  EXPECT_FLOAT_EQ(pose[1][1][1].item<float>(), second[3]);
  EXPECT_NEAR(pose[1][1][2].item<float>(), std::cos(second[4]), 1e-6);
  EXPECT_NEAR(pose[1][1][3].item<float>(), std::sin(second[4]), 1e-6);
  EXPECT_TRUE(at::equal(batch.images[0][1],
                        observation_images(set->images.data(), 1, 16, 16, 16)[0]));
}

// Diffusion Policy's sanity check: a policy trained on one demonstration replays it from the
// same initial state in closed loop (most of the way: 0.80 coverage when written, the expert's
// episode ends above 0.95).
TEST(DiffusionPolicy, OverfitsOneDemonstrationAndReplaysItInClosedLoop) {
  at::manual_seed(0);
  const uint64_t seed = 3;
  auto set = std::make_shared<episodes::EpisodeSet>(tiny_expert_demonstrations(1, seed));
  DiffusionPolicyConfig config = tiny_config();
  config.down_dims = {32, 64};
  config.step_embed_dim = 16;
  DiffusionPolicy policy(config);
  const int64_t n = set->steps();
  policy.set_normalizers({ActionNormalizer::fit(at::from_blob(set->action.data(), {n, 2}, at::kFloat).clone()),
                          ActionNormalizer::fit(at::from_blob(set->state.data(), {n, 5}, at::kFloat).narrow(1, 0, 2).clone())});
  EpisodeBatchOptions o;
  o.pred_horizon = config.pred_horizon;
  o.action_horizon = config.action_horizon;
  o.image_size = 16;
  o.batch_size = 16;
  EpisodeBatchSource source(set, o);
  ASSERT_GT(source.num_batches(), 0) << set->steps() << " steps";
  torch::optim::Adam adam(policy.parameters(), torch::optim::AdamOptions(3e-3));
  at::Generator gen = generator(5);
  double first = 0, last = 0;
  int64_t steps = 0;
  for (int64_t epoch = 0; steps < 400; ++epoch) {
    source.set_epoch(epoch);
    data::Batch batch;
    while (source.next(batch) && steps < 400) {
      adam.zero_grad();
      const at::Tensor loss =
          policy.compute_loss(batch.images, batch.extras.at("agent_pos"), batch.extras.at("action"), gen).total;
      loss.backward();
      adam.step();
      (steps == 0 ? first : last) = loss.item<double>();
      ++steps;
    }
  }
  EXPECT_LT(last, 0.25 * first);
  envs::PushTConfig ec;
  ec.render_size = 16;
  envs::PushTEnv env(ec);
  envs::RolloutOptions ro;
  ro.image_size = 16;
  DiffusionPolicyActor actor(policy, 11);
  policy.eval();
  const envs::RolloutResult r = envs::run_pusht_rollout(env, actor, seed, ro);
  // The block starts far from the goal; the replay pushes most of it there (the expert: > 0.95).
  envs::PushTEnv start;
  start.reset(seed);
  EXPECT_LT(start.coverage(), 0.3);
  EXPECT_GT(r.max_coverage, 0.7) << "steps " << r.steps << " start " << start.coverage();
}

// `policy eval --block_noise`: the low-dim policy reads the block pose with Gaussian error, the
// same error for the same episode seed, the exact pose without it; an image policy refuses it.
TEST(DiffusionPolicyActor, BlockNoisePerturbsOnlyTheBlockPoseALowdimPolicyReads) {
  at::manual_seed(0);
  const DiffusionPolicyConfig c = testing::as_lowdim(tiny_config());
  DiffusionPolicy policy(c);
  ASSERT_FALSE(policy.has_encoder());
  policy.eval();
  envs::PushTObservation o;
  o.agent_x = 100;
  o.agent_y = 200;
  o.block_x = 256;
  o.block_y = 300;
  o.block_angle = 0.5;
  const std::vector<envs::PushTObservation> history(static_cast<std::size_t>(c.obs_horizon), o);
  const envs::PushTState state{};
  auto act = [&](BlockPoseNoise noise, uint64_t seed) {
    DiffusionPolicyActor actor(policy, seed, noise);
    actor.reset();
    return actor.act(history, state);
  };
  auto same = [](const std::vector<envs::Point2>& a, const std::vector<envs::Point2>& b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
      if (a[i].x != b[i].x || a[i].y != b[i].y) return false;
    return true;
  };
  const auto exact = act({}, 7);
  EXPECT_TRUE(same(exact, act({}, 7)));
  EXPECT_TRUE(same(exact, act({0.0, 0.0}, 7)));  // zero noise is the exact pose
  const BlockPoseNoise noise{40.0, 20.0};
  const auto noisy = act(noise, 7);
  EXPECT_FALSE(same(exact, noisy));   // the policy reads a different pose
  EXPECT_TRUE(same(noisy, act(noise, 7)));  // the same error for the same seed
  EXPECT_FALSE(same(noisy, act(noise, 8)));
  EXPECT_THROW(act({-1.0, 0.0}, 7), UsageError);
  DiffusionPolicy image_policy(tiny_config());
  EXPECT_THROW(DiffusionPolicyActor(image_policy, 7, noise), UsageError);
  EXPECT_NO_THROW(DiffusionPolicyActor(image_policy, 7));
}

}  // namespace
}  // namespace sparsevit::policy
