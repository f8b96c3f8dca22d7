// `sparsevit policy train` and `policy eval` end to end on a tiny policy: collect -> train (with
// closed-loop evaluation) -> resume -> eval with videos; and their one-line errors.
#include <gtest/gtest.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include "support/cli_runner.h"

namespace {

namespace fs = std::filesystem;
using namespace sparsevit::testing;

bool has_policy_train() { return run("policy train --help").exit_code == 0; }

// 16x16 frames, a one-block encoder and a two-level U-Net: seconds per epoch.
const char* kTinyPolicy =
    " --model vit_nano_patch8_48 --input_size 16 --depth 1 --embed_dim 16 --num_heads 2 --down_dims 16,32"
    " --step_embed_dim 8 --pred_horizon 8 --action_horizon 4 --inference_steps 4 --batch_size 16 --threads 1";

TEST(CliPolicyTrain, TrainsResumesAndEvaluatesInClosedLoop) {
  if (!has_policy_train()) GTEST_SKIP() << "sparsevit built without the policy";
  TempDir dir;
  const std::string demos = (dir.path() / "demos.episodes").string(), run_dir = (dir.path() / "run").string();
  ASSERT_EQ(run("policy collect --episodes 3 --image_size 16 --output " + quote(demos)).exit_code, 0);
  const Result train = run("policy train --data_path " + quote(demos) + kTinyPolicy +
                           " --epochs 1 --eval_episodes 2 --eval_seed 7 --output_dir " + quote(run_dir) +
                           " --attn-cfg configs/attention/vit_fibottention_small.yaml");
  ASSERT_EQ(train.exit_code, 0) << train.describe();
  EXPECT_NE(train.out.find("Epoch 1/1: loss"), std::string::npos) << train.describe();
  EXPECT_NE(train.out.find("closed loop, held-out seeds: score"), std::string::npos) << train.describe();
  const auto eval = nlohmann::json::parse(slurp(run_dir + "/eval.json"));
  ASSERT_EQ(eval.at("per_episode").size(), 2u);
  // DP's score per episode is min(max coverage / 0.95, 1); the do-nothing floor on the same seeds.
  for (const auto& e : eval.at("per_episode"))
    EXPECT_DOUBLE_EQ(e.at("score").get<double>(), std::min(e.at("max_coverage").get<double>() / 0.95, 1.0));
  ASSERT_TRUE(eval.contains("do_nothing"));
  EXPECT_GT(eval.at("do_nothing").at("mean_max_coverage").get<double>(), 0.0);
  EXPECT_EQ(eval.at("per_episode")[1].at("seed"), 8);
  const auto summary = nlohmann::json::parse(train.out.substr(train.out.rfind("\n{") + 1));  // the last line
  EXPECT_GT(summary.at("pruning_ratio").get<double>(), 0.0);  // the encoder's Fibottention
  EXPECT_EQ(summary.at("episodes"), 3);
  // The image probe ran after training (the last episode: the run trained on all three).
  ASSERT_TRUE(summary.contains("probe")) << train.describe();
  EXPECT_EQ(summary.at("probe").at("readout"), "spatial_softmax");
  EXPECT_EQ(summary.at("probe").at("first_episode"), 2);
  EXPECT_FALSE(summary.at("probe").at("held_out").get<bool>());
  EXPECT_NE(train.out.find("loss, images permuted"), std::string::npos) << train.describe();

  // Resume to a second epoch: one more metrics line, the same policy description.
  const Result resumed = run("policy train --data_path " + quote(demos) + kTinyPolicy +
                             " --epochs 2 --eval_episodes 0 --output_dir " + quote(run_dir) + " --resume " +
                             quote(run_dir + "/checkpoint.pt") +
                             " --attn-cfg configs/attention/vit_fibottention_small.yaml");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.describe();
  EXPECT_EQ(resumed.out.find("Epoch 1/2"), std::string::npos) << resumed.describe();
  EXPECT_NE(resumed.out.find("Epoch 2/2"), std::string::npos) << resumed.describe();

  // policy eval rebuilds the policy from the checkpoint alone.
  const std::string video = (dir.path() / "videos").string(), results = (dir.path() / "eval.json").string();
  const Result e = run("policy eval --resume " + quote(run_dir + "/checkpoint.pt") +
                       " --episodes 2 --seed 3 --max_steps 12 --threads 1 --output " + quote(results) +
                       " --save_video " + quote(video));
  ASSERT_EQ(e.exit_code, 0) << e.describe();
  EXPECT_NE(e.out.find("success rate"), std::string::npos) << e.describe();
  const auto r = nlohmann::json::parse(slurp(results));
  EXPECT_EQ(r.at("episodes"), 2);
  EXPECT_LE(r.at("per_episode")[0].at("steps").get<int>(), 12);
  EXPECT_TRUE(fs::exists(fs::path(video) / "episode_3.mp4"));
  EXPECT_TRUE(fs::exists(fs::path(video) / "episode_4.mp4"));

  // policy export: the EMA weights alone, a smaller file that evaluates identically.
  const std::string exported = (dir.path() / "exported.pt").string(), exported_eval = (dir.path() / "exported.json").string();
  const Result x = run("policy export --resume " + quote(run_dir + "/checkpoint.pt") + " --output " + quote(exported));
  ASSERT_EQ(x.exit_code, 0) << x.describe();
  EXPECT_LT(fs::file_size(exported), fs::file_size(run_dir + "/checkpoint.pt") / 2);
  const Result xe = run("policy eval --resume " + quote(exported) + " --episodes 2 --seed 3 --max_steps 12 --threads 1"
                        " --output " + quote(exported_eval));
  ASSERT_EQ(xe.exit_code, 0) << xe.describe();
  const auto rx = nlohmann::json::parse(slurp(exported_eval));
  EXPECT_EQ(rx.at("per_episode"), r.at("per_episode"));
  expect_usage_error(run("policy export --resume " + quote(run_dir + "/checkpoint.pt")), "--output");

  // policy probe: the checkpoint's readout, episodes chosen by flag, JSON written.
  const std::string probe_json = (dir.path() / "probe.json").string();
  const Result p = run("policy probe --resume " + quote(run_dir + "/checkpoint.pt") + " --data_path " + quote(demos) +
                       " --first_episode 1 --batches 1 --batch_size 8 --threads 1 --output " + quote(probe_json));
  ASSERT_EQ(p.exit_code, 0) << p.describe();
  EXPECT_NE(p.out.find("loss, agent pos permuted"), std::string::npos) << p.describe();
  const auto probe = nlohmann::json::parse(slurp(probe_json));
  EXPECT_EQ(probe.at("windows"), 8);
  EXPECT_EQ(probe.at("first_episode"), 1);
  EXPECT_FALSE(probe.at("held_out").get<bool>());  // the run trained on every episode
  EXPECT_EQ(probe.at("readout"), "spatial_softmax");
  // The block-pose probe fitted on episode 0 and probed episodes 1..2 (all of their frames).
  ASSERT_TRUE(probe.contains("block_pose")) << p.describe();
  EXPECT_GT(probe.at("block_pose").at("fit_frames").get<int64_t>(), 1);
  EXPECT_GT(probe.at("block_pose").at("test_frames").get<int64_t>(), 0);
  EXPECT_GT(probe.at("block_pose").at("baseline_position_rmse").get<double>(), 0.0);
  EXPECT_NE(p.out.find("block pose from the encoder's readout features"), std::string::npos) << p.describe();
  const Result skipped = run("policy probe --resume " + quote(run_dir + "/checkpoint.pt") + " --data_path " +
                             quote(demos) + " --first_episode 1 --batches 1 --batch_size 8 --threads 1"
                             " --block_pose_frames 0 --output " + quote(probe_json));
  ASSERT_EQ(skipped.exit_code, 0) << skipped.describe();
  EXPECT_FALSE(nlohmann::json::parse(slurp(probe_json)).contains("block_pose"));
  // policy pose-fit: a fresh encoder (the policy flags) and the checkpoint's, episode 2 held out.
  const std::string fit_json = (dir.path() / "pose_fit.json").string();
  const Result fit = run("policy pose-fit --data_path " + quote(demos) +
                         " --model vit_nano_patch8_48 --input_size 16 --patch_size 8 --max_train_samples 2 --steps 3"
                         " --batch_size 8 --threads 1 --attn_cfg configs/attention/vit_dense.yaml --output " +
                         quote(fit_json));
  ASSERT_EQ(fit.exit_code, 0) << fit.describe();
  EXPECT_NE(fit.out.find("block pose fitted through the encoder (3 steps"), std::string::npos) << fit.describe();
  EXPECT_NE(fit.err.find("pose-fit [3/3]"), std::string::npos) << fit.describe();
  const auto fitted = nlohmann::json::parse(slurp(fit_json));
  EXPECT_EQ(fitted.at("steps"), 3);
  EXPECT_EQ(fitted.at("first_episode"), 2);
  EXPECT_EQ(fitted.at("image_size"), 16);
  EXPECT_GT(fitted.at("test_frames").get<int64_t>(), 0);
  const Result refit = run("policy pose-fit --data_path " + quote(demos) + " --resume " +
                           quote(run_dir + "/checkpoint.pt") + " --steps 2 --batch_size 8 --threads 1");
  ASSERT_EQ(refit.exit_code, 0) << refit.describe();
  EXPECT_NE(refit.err.find("checkpoint.pt"), std::string::npos) << refit.describe();
  // The training checkpoint and its export hold the same weights: the same fit, to the digit.
  const Result refit_exported = run("policy pose-fit --data_path " + quote(demos) + " --resume " + quote(exported) +
                                    " --steps 2 --batch_size 8 --threads 1");
  ASSERT_EQ(refit_exported.exit_code, 0) << refit_exported.describe();
  EXPECT_EQ(refit_exported.out, refit.out);
  expect_usage_error(run("policy pose-fit --data_path " + quote(demos) + " --steps 0"), "--steps");
  expect_usage_error(run("policy pose-fit --data_path " + quote((dir.path() / "nope.episodes").string()) +
                         " --steps 1 --threads 1"),
                     "nope.episodes");

  // Block-pose noise is for low-dim policies: an image policy reads the block from its image.
  const Result noisy = run("policy eval --resume " + quote(run_dir + "/checkpoint.pt") +
                           " --episodes 1 --max_steps 4 --threads 1 --block_noise 5");
  expect_usage_error(noisy, "low-dim");
}

// --pose_weight: the block-pose head trains beside the diffusion loss, is logged, travels in the
// checkpoint (policy eval rebuilds it) and is refused for a low-dim policy.
TEST(CliPolicyTrain, PoseWeightTrainsAHeadThatTheCheckpointCarries) {
  if (!has_policy_train()) GTEST_SKIP() << "sparsevit built without the policy";
  TempDir dir;
  const std::string demos = (dir.path() / "demos.episodes").string(), run_dir = (dir.path() / "run").string();
  ASSERT_EQ(run("policy collect --episodes 2 --image_size 16 --output " + quote(demos)).exit_code, 0);
  const Result train = run("policy train --data_path " + quote(demos) + kTinyPolicy +
                           " --epochs 1 --eval_episodes 0 --probe_batches 0 --pose_weight 0.5 --output_dir " +
                           quote(run_dir) + " --attn-cfg configs/attention/vit_dense.yaml");
  ASSERT_EQ(train.exit_code, 0) << train.describe();
  EXPECT_NE(train.out.find("(block pose "), std::string::npos) << train.describe();
  const auto summary = nlohmann::json::parse(train.out.substr(train.out.rfind("\n{") + 1));
  EXPECT_GT(summary.at("pose_loss").get<double>(), 0.0);
  std::ifstream metrics(run_dir + "/metrics.jsonl");
  std::string line;
  ASSERT_TRUE(std::getline(metrics, line));
  EXPECT_GT(nlohmann::json::parse(line).at("pose_loss").get<double>(), 0.0);
  EXPECT_EQ(nlohmann::json::parse(slurp(run_dir + "/config.json")).at("pose_weight").get<double>(), 0.5);
  const Result e = run("policy eval --resume " + quote(run_dir + "/checkpoint.pt") + " --episodes 1 --max_steps 4 --threads 1");
  ASSERT_EQ(e.exit_code, 0) << e.describe();
  expect_usage_error(run("policy train --obs_type lowdim --data_path " + quote(demos) +
                         " --down_dims 16,32 --epochs 1 --pose_weight 1 --output_dir " + quote(run_dir + "2")),
                     "pose_weight");
}

// The low-dim baseline through the same pipeline, with a validation loss that picks the
// evaluated checkpoint and an evaluation on training seeds beside the held-out ones.
TEST(CliPolicyTrain, LowdimPolicyValidatesEvaluatesItsBestEpochOnBothSeedSets) {
  if (!has_policy_train()) GTEST_SKIP() << "sparsevit built without the policy";
  TempDir dir;
  const std::string demos = (dir.path() / "demos.episodes").string(), run_dir = (dir.path() / "run").string();
  ASSERT_EQ(run("policy collect --episodes 4 --image_size 8 --output " + quote(demos)).exit_code, 0);
  const Result train =
      run("policy train --obs_type lowdim --data_path " + quote(demos) +
          " --down_dims 16,32 --step_embed_dim 8 --pred_horizon 8 --action_horizon 4 --inference_steps 4"
          " --batch_size 16 --threads 1 --epochs 3 --max_train_samples 3 --val_batches 2 --eval_episodes 1"
          " --eval_train_episodes 1 --output_dir " + quote(run_dir));
  ASSERT_EQ(train.exit_code, 0) << train.describe();
  EXPECT_NE(train.err.find("low-dim"), std::string::npos) << train.describe();
  // One validation loss per epoch; checkpoint-best.pt is the epoch with the least.
  std::vector<double> val;
  std::ifstream metrics(run_dir + "/metrics.jsonl");
  for (std::string line; std::getline(metrics, line);) val.push_back(nlohmann::json::parse(line).at("val_loss"));
  ASSERT_EQ(val.size(), 3u);
  const auto best = std::min_element(val.begin(), val.end());
  const auto summary = nlohmann::json::parse(train.out.substr(train.out.rfind("\n{") + 1));
  EXPECT_EQ(summary.at("obs_type"), "lowdim");
  EXPECT_EQ(summary.at("best_epoch").get<int64_t>(), best - val.begin());
  EXPECT_DOUBLE_EQ(summary.at("best_val_loss").get<double>(), *best);
  EXPECT_EQ(summary.at("evaluated_checkpoint"), run_dir + "/checkpoint-best.pt");
  EXPECT_FALSE(summary.contains("probe"));  // no image to probe
  EXPECT_EQ(summary.at("train_seeds").at("episodes"), 1);
  EXPECT_EQ(nlohmann::json::parse(slurp(run_dir + "/eval_train.json")).at("per_episode")[0].at("seed"), 0);
  EXPECT_EQ(nlohmann::json::parse(slurp(run_dir + "/eval.json")).at("per_episode")[0].at("seed"), 100000);
  // policy eval rebuilds the low-dim policy from the checkpoint alone.
  const Result e = run("policy eval --resume " + quote(run_dir + "/checkpoint-best.pt") +
                       " --episodes 1 --max_steps 10 --threads 1");
  ASSERT_EQ(e.exit_code, 0) << e.describe();
  EXPECT_NE(e.out.find("do nothing"), std::string::npos) << e.describe();
  // With error on the block pose it reads, recorded in the results.
  const std::string noisy_json = (dir.path() / "noisy.json").string();
  const Result noisy = run("policy eval --resume " + quote(run_dir + "/checkpoint-best.pt") +
                           " --episodes 1 --max_steps 10 --threads 1 --block_noise 8 --block_noise_deg 3 --output " +
                           quote(noisy_json));
  ASSERT_EQ(noisy.exit_code, 0) << noisy.describe();
  EXPECT_NE(noisy.out.find("block-pose noise"), std::string::npos) << noisy.describe();
  const auto nj = nlohmann::json::parse(slurp(noisy_json));
  EXPECT_DOUBLE_EQ(nj.at("block_noise").at("position").get<double>(), 8.0);
  EXPECT_DOUBLE_EQ(nj.at("block_noise").at("angle_deg").get<double>(), 3.0);
  expect_usage_error(run("policy eval --resume " + quote(run_dir + "/checkpoint-best.pt") + " --block_noise -1"),
                     "block-noise");
}

// Issue #48's label-free path end to end: MAE on the demonstrations' frames (`pretrain` picks
// the file up by itself), the policy from that checkpoint with a frozen encoder and the conv stem,
// the block-pose probe on the encoder's tokens, and the one-line refusals.
TEST(CliPolicyTrain, PretrainsOnItsFramesAndStartsTheEncoderFromThem) {
  if (!has_policy_train()) GTEST_SKIP() << "sparsevit built without the policy";
  TempDir dir;
  const std::string demos = (dir.path() / "demos.episodes").string(), mae = (dir.path() / "mae").string();
  ASSERT_EQ(run("policy collect --episodes 3 --image_size 16 --output " + quote(demos)).exit_code, 0);
  const char* encoder = " --model vit_nano_patch8_48 --input_size 16 --depth 1 --embed_dim 16 --num_heads 2 --stem conv"
                        " --attn-cfg configs/attention/vit_dense.yaml --threads 1";
  const Result pre = run("pretrain --data_path " + quote(demos) + encoder +
                         " --decoder_embed_dim 16 --decoder_depth 1 --decoder_num_heads 2 --max_train_samples 2"
                         " --epochs 1 --batch_size 16 --num_workers 0 --output_dir " + quote(mae));
  ASSERT_EQ(pre.exit_code, 0) << pre.describe();
  EXPECT_NE(pre.err.find("data demonstrations: 202 training images"), std::string::npos) << pre.describe();
  const auto pre_config = nlohmann::json::parse(slurp(mae + "/config.json"));
  EXPECT_EQ(pre_config.at("dataset"), "demonstrations");
  EXPECT_EQ(pre_config.at("stem"), "conv");

  const std::string run_dir = (dir.path() / "run").string();
  const std::string policy = " --model vit_nano_patch8_48 --input_size 16 --depth 1 --embed_dim 16 --num_heads 2"
                             " --stem conv --attn-cfg configs/attention/vit_dense.yaml --down_dims 16,32 --step_embed_dim 8"
                             " --pred_horizon 8 --action_horizon 4 --inference_steps 4 --batch_size 16 --threads 1";
  const Result train = run("policy train --data_path " + quote(demos) + policy + " --finetune " +
                           quote(mae + "/checkpoint.pt") + " --freeze_encoder --epochs 1 --eval_episodes 0 "
                           "--probe_batches 0 --output_dir " + quote(run_dir));
  ASSERT_EQ(train.exit_code, 0) << train.describe();
  EXPECT_NE(train.err.find("--finetune " + mae + "/checkpoint.pt: loaded"), std::string::npos) << train.describe();
  const Result probe = run("policy probe --resume " + quote(run_dir + "/checkpoint.pt") + " --data_path " + quote(demos) +
                           " --first_episode 2 --block_pose_features tokens --block_pose_frames 100 --threads 1 --output " +
                           quote(run_dir + "/probe.json"));
  ASSERT_EQ(probe.exit_code, 0) << probe.describe();
  const auto p = nlohmann::json::parse(slurp(run_dir + "/probe.json"));
  EXPECT_EQ(p.at("block_pose").at("features"), "tokens");
  EXPECT_EQ(p.at("block_pose").at("feature_dim"), 4 * 16);  // 2x2 patches of width 16

  expect_usage_error(run("policy train --data_path " + quote(demos) + policy + " --freeze_encoder --epochs 1"),
                     "--finetune");
  expect_usage_error(run("policy train --data_path " + quote(demos) + policy + " --finetune " +
                         quote(mae + "/checkpoint.pt") + " --freeze_encoder --layer_decay 0.5 --epochs 1"),
                     "layer_decay");
  // Another encoder's checkpoint (the patchify stem) does not load into this one.
  const std::string patch_policy = std::string(policy).replace(std::string(policy).find(" --stem conv"), 12, "");
  expect_usage_error(run("policy train --data_path " + quote(demos) + patch_policy + " --finetune " +
                         quote(mae + "/checkpoint.pt") + " --epochs 1 --output_dir " + quote(run_dir + "2")),
                     "lacks encoder weights");
  expect_usage_error(run("policy train --data_path " + quote(demos) + policy + " --stem convolution"), "stem");
}

TEST(CliPolicyTrain, BadInputsAreOneLineErrors) {
  if (!has_policy_train()) GTEST_SKIP() << "sparsevit built without the policy";
  TempDir dir;
  expect_usage_error(run("policy train --epochs 1"), "--data_path");
  const std::string junk = (dir.path() / "junk.episodes").string();
  std::ofstream(junk) << "not an episode file";
  Result r = run("policy train --data_path " + quote(junk));
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_EQ(r.stderr_lines(), 1) << r.describe();
  expect_usage_error(run("policy train --crossway_input bogus --data_path " + quote(junk)), "crossway");
  expect_usage_error(run("policy eval"), "--resume");
  expect_usage_error(run("policy probe --data_path " + quote(junk)), "--resume");
  expect_usage_error(run("policy train --obs_readout bogus --data_path " + quote(junk)), "readout");
  r = run("policy eval --resume " + quote(junk));
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_EQ(r.stderr_lines(), 1) << r.describe();
}

}  // namespace
