// Label-free policy encoders (docs/policy.md, "Encoders without labels"): MAE on the
// demonstrations' own frames, then `policy train --finetune` from that checkpoint, frozen or with
// layer-wise lr decay. The frames dataset against the file it reads, the pretraining transform
// against the policy's own encoder input, the encoder's weights after loading against the
// checkpoint's, a frozen encoder (BatchNorm statistics included) unchanged by training while the
// rest of the policy trains, and the layer-decay groups.
#include <gtest/gtest.h>

#if SPARSEVIT_WITH_POLICY

#include <ATen/ATen.h>
#include <torch/nn/module.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>

#include "episodes/episode_file.h"
#include "episodes/zarr_test_writer.h"
#include "models/masked_autoencoder.h"
#include "pipelines/demonstration_frames.h"
#include "pipelines/policy_checkpoint.h"
#include "pipelines/policy_train.h"
#include "pipelines/pretrain.h"
#include "train/checkpoint.h"
#include "train/optimizer.h"
#include "util/errors.h"

namespace sparsevit::pipelines {
namespace {

namespace fs = std::filesystem;

class PolicyEncoderPretraining : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("sparsevit_policy_encoder_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  // Episodes of `lengths` steps with random 16x16 frames, PushT-shaped states and actions.
  std::string write_demos(const std::vector<int64_t>& lengths, int64_t side = 16) {
    std::mt19937 rng(5);
    std::uniform_int_distribution<int> byte(0, 255);
    std::uniform_real_distribution<float> pos(0.f, 512.f);
    set_.image_height = set_.image_width = side;
    set_.state_dim = 5;
    set_.action_dim = 2;
    set_.task = "pusht";
    for (int64_t n : lengths) {
      std::vector<uint8_t> images(static_cast<std::size_t>(n * side * side * 3));
      for (auto& b : images) b = static_cast<uint8_t>(byte(rng));
      std::vector<float> state(static_cast<std::size_t>(n * 5)), action(static_cast<std::size_t>(n * 2));
      for (auto& v : state) v = pos(rng);
      for (auto& v : action) v = pos(rng);
      set_.append_episode(images, state, action);
    }
    const std::string path = (root_ / "demos.episodes").string();
    episodes::write_episode_file(path, set_);
    return path;
  }

  // Frame `step` of the written set as float [3, S, S] in [0, 1], by hand.
  at::Tensor frame(int64_t step) const {
    const int64_t s = set_.image_height;
    at::Tensor hwc = at::empty({s, s, 3}, at::kFloat);
    const uint8_t* src = set_.images.data() + step * set_.image_bytes();
    for (int64_t i = 0; i < s * s * 3; ++i) hwc.data_ptr<float>()[i] = static_cast<float>(src[i]) / 255.f;
    return hwc.permute({2, 0, 1}).contiguous();
  }

  // The encoder both the MAE and the policies use: vit_nano_patch8_48 at 16 px, 2 blocks of width 16.
  static TrainConfig tiny_encoder(TrainConfig c) {
    c.model = "vit_nano_patch8_48";
    c.input_size = 16;
    c.depth = 2;
    c.embed_dim = 16;
    c.num_heads = 2;
    c.threads = 1;
    c.attn_cfg = std::string(SPARSEVIT_SOURCE_DIR) + "/configs/attention/vit_dense.yaml";
    return c;
  }

  // A tiny MAE on the demonstrations (one epoch) -> its checkpoint.
  std::string pretrain(const std::string& demos, const std::string& stem = "patch") {
    TrainConfig c = tiny_encoder(pretrain_defaults());
    c.decoder_embed_dim = 16;
    c.decoder_depth = 1;
    c.decoder_num_heads = 2;
    c.stem = stem;
    c.data_path = demos;
    c.max_train_samples = 2;
    c.batch_size = 8;
    c.epochs = 1;
    c.num_workers = 0;
    c.output_dir = (root_ / ("mae_" + stem)).string();
    const PretrainSummary s = run_pretrain(c);
    EXPECT_EQ(s.epochs_run, 1);
    return s.checkpoint;
  }

  TrainConfig policy_config(const std::string& demos, const std::string& out) const {
    TrainConfig c = tiny_encoder(policy_defaults());
    c.down_dims = "16,32";
    c.step_embed_dim = 8;
    c.pred_horizon = 8;
    c.action_horizon = 4;
    c.inference_steps = 4;
    c.batch_size = 8;
    c.epochs = 1;
    c.lr = 1e-3;
    c.eval_episodes = 0;
    c.probe_batches = 0;
    c.val_batches = 0;
    c.data_path = demos;
    c.output_dir = (root_ / out).string();
    return c;
  }

  fs::path root_;
  episodes::EpisodeSet set_;
};

// Every float tensor (parameters and buffers) of `module` under `prefix`, by name without it.
std::map<std::string, at::Tensor> state_under(const torch::nn::Module& module, const std::string& prefix) {
  std::map<std::string, at::Tensor> out;
  for (const auto& p : module.named_parameters(true))
    if (p.key().rfind(prefix, 0) == 0) out[p.key().substr(prefix.size())] = p.value().detach().clone();
  for (const auto& b : module.named_buffers(true))
    if (b.key().rfind(prefix, 0) == 0 && b.value().is_floating_point())
      out[b.key().substr(prefix.size())] = b.value().detach().clone();
  return out;
}

TEST_F(PolicyEncoderPretraining, FramesAreTheFilesFramesAtTheEncodersSize) {
  const std::string path = write_demos({4, 5, 3});
  EXPECT_TRUE(is_demonstration_path(path));
  std::ofstream(root_ / "notes.txt") << "not demonstrations";
  EXPECT_FALSE(is_demonstration_path((root_ / "notes.txt").string()));
  EXPECT_FALSE(is_demonstration_path((root_ / "missing.episodes").string()));
  fs::create_directories(root_ / "store.zarr" / "meta" / "episode_ends");
  EXPECT_TRUE(is_demonstration_path((root_ / "store.zarr").string()));

  // The first 2 episodes train (9 frames), the third is held out (3 frames).
  const DemonstrationFrameSplits full = demonstration_frames(path, 2, 16);
  ASSERT_EQ(full.train->size(), 9);
  ASSERT_EQ(full.held_out->size(), 3);
  for (int64_t i = 0; i < 9; ++i) EXPECT_TRUE(at::equal(full.train->get(i).image, frame(i))) << i;
  for (int64_t i = 0; i < 3; ++i) EXPECT_TRUE(at::equal(full.held_out->get(i).image, frame(9 + i))) << i;
  EXPECT_EQ(full.held_out->step(0), 9);
  EXPECT_NE(full.train->describe().find("9 frames of episodes 0..1 (16x16 -> 16x16)"), std::string::npos)
      << full.train->describe();

  // At half the size: each pixel is the mean of its 2x2 block (the policy's area resize).
  const DemonstrationFrameSplits half = demonstration_frames(path, 0, 8);
  ASSERT_EQ(half.train->size(), 12);
  EXPECT_EQ(half.held_out, half.train);  // nothing held out: reconstructions come from the training frames
  const at::Tensor f = frame(10);
  const at::Tensor expected = (f.slice(1, 0, 16, 2).slice(2, 0, 16, 2) + f.slice(1, 1, 16, 2).slice(2, 0, 16, 2) +
                               f.slice(1, 0, 16, 2).slice(2, 1, 16, 2) + f.slice(1, 1, 16, 2).slice(2, 1, 16, 2)) / 4;
  EXPECT_LT((half.train->get(10).image - expected).abs().max().item<double>(), 1e-6);

  EXPECT_THROW(half.train->get(12), RuntimeError);
  EXPECT_ANY_THROW(demonstration_frames((root_ / "notes.txt").string(), 0, 8));
}

// Diffusion Policy's zarr store (float images 0-255, as pusht_cchi_v7_replay.zarr holds them):
// the same frames as from our file.
TEST_F(PolicyEncoderPretraining, ZarrStoresGiveTheSameFrames) {
  write_demos({4, 5, 3});
  namespace zt = episodes::testing;
  const std::string root = (root_ / "pusht_replay.zarr").string();
  for (const char* group : {"", "/data", "/meta"}) zt::write_text(root + group + "/.zgroup", "{\"zarr_format\": 2}");
  const int64_t steps = set_.steps();
  zt::write_zarr_array(root + "/data/state", {steps, 5}, {4, 5}, "<f4", set_.state);
  zt::write_zarr_array(root + "/data/action", {steps, 2}, {4, 2}, "<f4", set_.action);
  zt::write_zarr_array(root + "/meta/episode_ends", {set_.episodes()}, {2}, "<i8", set_.episode_ends);
  const std::vector<float> img(set_.images.begin(), set_.images.end());
  zt::write_zarr_array(root + "/data/img", {steps, 16, 16, 3}, {3, 16, 16, 3}, "<f4", img);
  EXPECT_TRUE(is_demonstration_path(root));
  const DemonstrationFrameSplits frames = demonstration_frames(root, 2, 16);
  ASSERT_EQ(frames.train->size(), 9);
  for (int64_t i = 0; i < 9; ++i) EXPECT_TRUE(at::equal(frames.train->get(i).image, frame(i))) << i;
  EXPECT_TRUE(at::equal(frames.held_out->get(2).image, frame(11)));
}

// What MAE trains on is what the policy's encoder is given: frame * 2 - 1, no flip, no crop.
TEST_F(PolicyEncoderPretraining, PretrainingSeesFramesAsThePolicyEncoderDoes) {
  const std::string path = write_demos({4, 5, 3});
  TrainConfig c = pretrain_defaults();
  c.data_path = path;  // --dataset auto recognises the file
  c.max_train_samples = 2;
  const PretrainImages images = pretrain_images(c, 16, 3);
  EXPECT_EQ(images.dataset, "demonstrations");
  ASSERT_EQ(images.train->size(), 9);
  ASSERT_EQ(images.eval->size(), 3);
  const data::Transform transform = data::build_train_transform(images.transform);
  data::Rng rng(3);
  for (int64_t i : {0, 4, 8}) {
    const at::Tensor x = transform(images.train->get(i).image, rng);
    EXPECT_LT((x - (frame(i) * 2 - 1)).abs().max().item<double>(), 1e-6) << i;
  }
  TrainConfig gray = c;
  EXPECT_THROW(pretrain_images(gray, 16, 1), UsageError);
}

// --finetune copies the MAE encoder into the policy; --freeze_encoder keeps it there through
// training (while the U-Net moves), and the checkpoint records where the weights came from.
TEST_F(PolicyEncoderPretraining, AFrozenEncoderIsTheCheckpointsAndStaysSo) {
  const std::string demos = write_demos({12, 12, 12});
  const std::string mae = pretrain(demos);
  const auto mae_model = load_checkpoint_mae(train::LoadedCheckpoint(mae));
  ASSERT_TRUE(mae_model.has_value());
  const std::map<std::string, at::Tensor> mae_state = state_under(*mae_model->model, "");

  TrainConfig c = policy_config(demos, "frozen");
  c.finetune = mae;
  c.freeze_encoder = true;
  const PolicyTrainSummary s = run_policy_train(c);
  ASSERT_EQ(s.epochs_run, 1);
  const train::LoadedCheckpoint ckpt(s.checkpoint);
  const auto policy = load_checkpoint_policy(ckpt);  // the EMA's weights, as evaluated
  const std::map<std::string, at::Tensor> encoder = state_under(*policy, "obs_encoder.");
  int64_t compared = 0;
  for (const auto& [name, value] : encoder) {
    if (name.rfind("head", 0) == 0 || name.find("pattern") != std::string::npos) continue;
    ASSERT_TRUE(mae_state.count(name)) << name;
    EXPECT_TRUE(at::equal(value, mae_state.at(name))) << name;
    ++compared;
  }
  EXPECT_GE(compared, 10);
  // Only the rest trains: the encoder's parameters are not counted as trainable.
  int64_t total = 0, in_encoder = 0;
  for (const auto& p : policy->named_parameters(true)) {
    total += p.value().numel();
    if (p.key().rfind("obs_encoder.", 0) == 0) in_encoder += p.value().numel();
  }
  EXPECT_EQ(s.params, total - in_encoder);
  EXPECT_GT(in_encoder, 0);
  // Provenance: the pretraining run's config, with its demonstration frames and no pose weight anywhere.
  const auto meta = nlohmann::json::parse(ckpt.metadata_json());
  ASSERT_TRUE(meta.contains("encoder_init")) << meta.dump();
  EXPECT_EQ(meta["encoder_init"]["finetune"], mae);
  EXPECT_EQ(meta["encoder_init"]["pretraining"]["dataset"], "demonstrations");
  EXPECT_EQ(meta["config"]["pose_weight"].get<double>(), 0.0);
  EXPECT_TRUE(meta["config"]["freeze_encoder"].get<bool>());
}

// The same with the conv stem: its BatchNorm statistics load from the checkpoint and do not move.
TEST_F(PolicyEncoderPretraining, AFrozenConvStemKeepsItsBatchNormStatistics) {
  const std::string demos = write_demos({12, 12, 12});
  const std::string mae = pretrain(demos, "conv");
  const auto mae_model = load_checkpoint_mae(train::LoadedCheckpoint(mae));
  ASSERT_TRUE(mae_model.has_value());
  const std::map<std::string, at::Tensor> mae_state = state_under(*mae_model->model, "");
  TrainConfig c = policy_config(demos, "frozen_conv");
  c.stem = "conv";
  c.finetune = mae;
  c.freeze_encoder = true;
  const PolicyTrainSummary s = run_policy_train(c);
  const auto policy = load_checkpoint_policy(train::LoadedCheckpoint(s.checkpoint));
  int64_t statistics = 0;
  for (const auto& [name, value] : state_under(*policy, "obs_encoder.")) {
    if (name.find("running_") == std::string::npos && name.find("patch_embed") == std::string::npos) continue;
    ASSERT_TRUE(mae_state.count(name)) << name;
    EXPECT_TRUE(at::equal(value, mae_state.at(name))) << name;
    statistics += name.find("running_") != std::string::npos;
  }
  EXPECT_EQ(statistics, 6);  // running_mean and running_var of the stem's three BatchNorms (16 px / 8: 3 stride-2 convs)
  // MAE moved the statistics away from their initial 0 / 1: loading them is not a no-op.
  EXPECT_GT(mae_state.at("patch_embed.backbone.0.bn.running_mean").abs().max().item<double>(), 0.0);
}

// Layer-wise lr decay over the encoder only; a trained (not frozen) encoder moves off the checkpoint.
TEST_F(PolicyEncoderPretraining, LayerDecayScalesTheEncodersBlocksOnly) {
  TrainConfig c = policy_config("", "unused");
  auto policy = std::make_shared<policy::DiffusionPolicy>(policy_description(c, 16).config);
  train::OptimizerConfig oc;
  oc.layer_decay = 0.5;
  oc.num_layers = 3;  // depth 2 + 1
  oc.layer_prefix = "obs_encoder.";
  std::map<std::string, double> scale;
  for (const auto& g : train::parameter_groups(*policy, oc))
    for (const auto& n : g.names) scale[n] = g.lr_scale;
  EXPECT_DOUBLE_EQ(scale.at("obs_encoder.cls_token"), 0.125);
  EXPECT_DOUBLE_EQ(scale.at("obs_encoder.blocks.0.attn.qkv.weight"), 0.25);
  EXPECT_DOUBLE_EQ(scale.at("obs_encoder.blocks.1.attn.qkv.weight"), 0.5);
  EXPECT_DOUBLE_EQ(scale.at("obs_encoder.norm.weight"), 1.0);
  for (const auto& [name, s] : scale)
    if (name.rfind("obs_encoder.", 0) != 0) EXPECT_DOUBLE_EQ(s, 1.0) << name;
  EXPECT_EQ(train::layer_id("model.blocks.0.x", "obs_encoder.", 3), 3);

  const std::string demos = write_demos({12, 12, 12});
  const std::string mae = pretrain(demos);
  const auto mae_state = state_under(*load_checkpoint_mae(train::LoadedCheckpoint(mae))->model, "");
  TrainConfig run = policy_config(demos, "decay");
  run.finetune = mae;
  run.layer_decay = 0.5;
  run.model_ema = false;
  const PolicyTrainSummary s = run_policy_train(run);
  const auto trained = load_checkpoint_policy(train::LoadedCheckpoint(s.checkpoint));
  const auto encoder = state_under(*trained, "obs_encoder.");
  EXPECT_FALSE(at::equal(encoder.at("blocks.1.attn.qkv.weight"), mae_state.at("blocks.1.attn.qkv.weight")));

  // Refusals: freezing without weights, decay with a frozen encoder, a file of another encoder.
  TrainConfig bad = policy_config(demos, "bad");
  bad.freeze_encoder = true;
  EXPECT_THROW(run_policy_train(bad), UsageError);
  bad.finetune = mae;
  bad.layer_decay = 0.5;
  EXPECT_THROW(run_policy_train(bad), UsageError);
  TrainConfig wide = policy_config(demos, "wide");
  wide.embed_dim = 32;
  wide.finetune = mae;
  EXPECT_THROW(run_policy_train(wide), UsageError);
}

}  // namespace
}  // namespace sparsevit::pipelines

#endif  // SPARSEVIT_WITH_POLICY
