// The policy's observation readouts (spatial softmax keypoints, attention pooling, flatten), the
// training-time random shift, and what they change in DiffusionPolicy (names, shapes, modes).
#include "policy/observation_readout.h"

#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "models/model_description.h"
#include "policy/diffusion_policy.h"
#include "policy/tiny_policy.h"
#include "util/errors.h"

namespace sparsevit::policy {
namespace {

TEST(ObservationReadout, NamesRoundTripAndUnknownNamesAreUsageErrors) {
  for (const std::string& name : observation_readout_names())
    EXPECT_EQ(observation_readout_name(parse_observation_readout(name)), name);
  EXPECT_THROW(parse_observation_readout("keypoints"), UsageError);
}

TEST(ObservationReadout, SpatialSoftmaxFindsThePeakOfEachKeypointChannel) {
  // robomimic's layout: x along the width, y along the height, both in [-1, 1].
  SpatialSoftmax pool(/*channels=*/2, /*height=*/3, /*width=*/4, /*num_kp=*/2);
  auto params = pool.named_parameters();
  {
    at::NoGradGuard no_grad;
    params["nets.weight"].zero_();
    params["nets.weight"].index_put_({0, 0, 0, 0}, 1.0);  // keypoint 0 <- channel 0
    params["nets.weight"].index_put_({1, 1, 0, 0}, 1.0);  // keypoint 1 <- channel 1
    params["nets.bias"].zero_();
  }
  at::Tensor map = at::zeros({1, 2, 3, 4});
  map.index_put_({0, 0, 2, 3}, 100.0);  // channel 0 peaks at row 2, column 3 (bottom right)
  map.index_put_({0, 1, 0, 0}, 100.0);  // channel 1 at the top left
  const at::Tensor kp = pool.forward(map);
  ASSERT_EQ(kp.sizes(), (at::IntArrayRef{1, 2, 2}));
  EXPECT_NEAR(kp[0][0][0].item<double>(), 1.0, 1e-4);
  EXPECT_NEAR(kp[0][0][1].item<double>(), 1.0, 1e-4);
  EXPECT_NEAR(kp[0][1][0].item<double>(), -1.0, 1e-4);
  EXPECT_NEAR(kp[0][1][1].item<double>(), -1.0, 1e-4);
  // A flat map: the grid's centre.
  const at::Tensor flat = pool.forward(at::zeros({1, 2, 3, 4}));
  EXPECT_NEAR(flat.abs().max().item<double>(), 0.0, 1e-6);
  std::set<std::string> buffers;
  for (const auto& b : pool.named_buffers()) buffers.insert(b.key());
  EXPECT_EQ(buffers, (std::set<std::string>{"temperature", "pos_x", "pos_y"}));
}

TEST(ObservationReadout, PatchReadoutShapesAndParameterNames) {
  const int64_t c = 16, h = 3, w = 3;
  const at::Tensor tokens = at::randn({5, h * w, c});
  ObservationReadoutOptions o;
  o.kind = ObservationReadout::kSpatialSoftmax;
  o.num_kp = 8;
  PatchReadout keypoints(o, c, h, w, /*num_heads=*/2);
  EXPECT_EQ(keypoints.forward(tokens).sizes(), (at::IntArrayRef{5, 64}));
  std::set<std::string> names;
  for (const auto& p : keypoints.named_parameters()) names.insert(p.key());
  EXPECT_EQ(names, (std::set<std::string>{"pool.nets.weight", "pool.nets.bias", "linear.weight", "linear.bias"}));

  o.kind = ObservationReadout::kAttentionPool;
  o.num_queries = 3;
  PatchReadout pooled(o, c, h, w, 2);
  EXPECT_EQ(pooled.feature_dim(), 3 * c);
  EXPECT_EQ(pooled.forward(tokens).sizes(), (at::IntArrayRef{5, 3 * c}));
  names.clear();
  for (const auto& p : pooled.named_parameters()) names.insert(p.key());
  EXPECT_TRUE(names.count("pool.latent") && names.count("pool.kv.weight") && names.count("pool.mlp.fc2.bias"));

  o.kind = ObservationReadout::kFlatten;
  PatchReadout flat(o, c, h, w, 2);
  EXPECT_EQ(flat.forward(tokens).sizes(), (at::IntArrayRef{5, 64}));
  EXPECT_THROW(flat.forward(at::randn({5, h * w + 1, c})), UsageError);
  o.kind = ObservationReadout::kClassToken;
  EXPECT_THROW(PatchReadout(o, c, h, w, 2), UsageError);
}

TEST(ObservationReadout, RandomShiftMovesWholeFramesWithinTheRangeAndRepeatsEdges) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(3);
  const at::Tensor x = at::arange(2 * 8 * 8, at::kFloat).reshape({2, 1, 8, 8});
  EXPECT_TRUE(random_shift(x, 0, gen).equal(x));
  for (int trial = 0; trial < 20; ++trial) {
    const at::Tensor y = random_shift(x, 2, gen);
    ASSERT_EQ(y.sizes(), x.sizes());
    for (int64_t i = 0; i < 2; ++i) {
      // Some shift in [-2, 2]^2 reproduces the frame from the edge-padded original.
      const at::Tensor padded = at::replication_pad2d(x[i].unsqueeze(0), {2, 2, 2, 2})[0];
      bool found = false;
      for (int64_t dy = 0; dy <= 4 && !found; ++dy)
        for (int64_t dx = 0; dx <= 4 && !found; ++dx) found = padded.narrow(-2, dy, 8).narrow(-1, dx, 8).equal(y[i]);
      EXPECT_TRUE(found);
    }
  }
}

DiffusionPolicyConfig tiny(ObservationReadout readout) {
  DiffusionPolicyConfig c = testing::tiny_policy_config();
  c.inference_steps = 4;
  c.readout.kind = readout;
  c.readout.num_kp = 4;
  return c;
}

TEST(ObservationReadout, ThePolicyFeedsTheReadoutToTheUnetAndKeepsTheClassTokenNetworkUnchanged) {
  at::manual_seed(0);
  DiffusionPolicy cls(tiny(ObservationReadout::kClassToken));
  EXPECT_EQ(cls.feature_dim(), 16);
  for (const auto& p : cls.named_parameters()) EXPECT_EQ(p.key().rfind("obs_readout", 0), std::string::npos) << p.key();
  DiffusionPolicy keypoints(tiny(ObservationReadout::kSpatialSoftmax));
  EXPECT_EQ(keypoints.feature_dim(), 64);
  const at::Tensor images = at::rand({3, 2, 3, 16, 16}), agent_pos = at::rand({3, 2, 2});
  EXPECT_EQ(keypoints.observation_features(images).sizes(), (at::IntArrayRef{3, 2, 64}));
  bool has_readout = false;
  for (const auto& p : keypoints.named_parameters()) has_readout |= p.key() == "obs_readout.pool.nets.weight";
  EXPECT_TRUE(has_readout);
  // The same noise and timesteps give the same error; another image gives another one.
  keypoints.eval();
  const at::Tensor actions = at::rand({3, 8, 2}), noise = at::randn({3, 8, 2});
  const at::Tensor t = at::full({3}, 50, at::kLong);
  const at::Tensor e1 = keypoints.denoising_error(images, agent_pos, actions, noise, t);
  ASSERT_EQ(e1.sizes(), (at::IntArrayRef{3}));
  EXPECT_TRUE(e1.equal(keypoints.denoising_error(images, agent_pos, actions, noise, t)));
  EXPECT_FALSE(e1.equal(keypoints.denoising_error(at::rand({3, 2, 3, 16, 16}), agent_pos, actions, noise, t)));
  // --global_pool pools the patch tokens for the class-token readout only.
  DiffusionPolicyConfig pooled = tiny(ObservationReadout::kSpatialSoftmax);
  pooled.encoder.global_pool = true;
  EXPECT_THROW(DiffusionPolicy{pooled}, UsageError);
}

TEST(ObservationReadout, TheShiftAppliesInTrainingOnly) {
  at::manual_seed(0);
  DiffusionPolicyConfig c = tiny(ObservationReadout::kSpatialSoftmax);
  c.obs_shift = 3;
  DiffusionPolicy policy(c);
  const at::Tensor images = at::rand({4, 2, 3, 16, 16}), agent_pos = at::rand({4, 2, 2}) * 100;
  const at::Tensor actions = at::rand({4, 8, 2}) * 100;
  auto loss = [&](uint64_t seed) {
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
    return policy.compute_loss(images, agent_pos, actions, gen).total.item<double>();
  };
  policy.train();
  EXPECT_EQ(loss(1), loss(1));  // the shift comes from the loss's generator
  // In eval mode no shift is drawn: the loss equals the unshifted policy's with the same noise.
  policy.eval();
  DiffusionPolicyConfig unshifted_config = c;
  unshifted_config.obs_shift = 0;
  DiffusionPolicy unshifted(unshifted_config);
  {
    at::NoGradGuard no_grad;
    auto dst = unshifted.named_parameters();
    for (const auto& p : policy.named_parameters()) dst[p.key()].copy_(p.value());
  }
  unshifted.eval();
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(1);
  EXPECT_DOUBLE_EQ(loss(1), unshifted.compute_loss(images, agent_pos, actions, gen).total.item<double>());
}

TEST(ObservationReadout, CheckpointsDescribeTheReadoutAndOlderOnesReadAsTheClassToken) {
  models::ModelDescription d;
  d.policy = models::PolicyModelDescription{};
  d.policy->encoder_model = "vit_nano_patch8_48";
  d.policy->down_dims = "32,64";
  d.policy->obs_readout = "attention_pool";
  d.policy->num_kp = 16;
  d.policy->obs_shift = 4;
  nlohmann::json j = models::model_description_json(d);
  auto back = models::read_model_description(j, "policy.pt");
  ASSERT_TRUE(back && back->policy);
  EXPECT_EQ(back->policy->obs_readout, "attention_pool");
  EXPECT_EQ(back->policy->num_kp, 16);
  EXPECT_EQ(back->policy->obs_shift, 4);
  for (const char* key : {"obs_readout", "num_kp", "obs_shift"}) j.at("policy").erase(key);  // before issue #32
  back = models::read_model_description(j, "old.pt");
  ASSERT_TRUE(back && back->policy);
  EXPECT_EQ(back->policy->obs_readout, "cls");
  EXPECT_EQ(back->policy->obs_shift, 0);
}

}  // namespace
}  // namespace sparsevit::policy
