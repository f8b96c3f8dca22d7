// End-to-end tests of `sparsevit bench --model` on video models (TimeSformer), run as a user
// would: the fields it prints, its JSON, the attention GFLOPs per clip against `sparsevit flops`
// for the same model and configs, and the one-line usage errors for options that do not apply.
// Tiny sizes and no timed assertions: the numbers timed are only checked to exist.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "support/cli_runner.h"

namespace {

using namespace sparsevit::testing;

// timesformer_nano_patch4_28 at 2 frames, one step of each model after none untimed: seconds.
const std::string kVideoBench =
    "bench --model timesformer_nano_patch4_28 --num-frames 2 --batch 2 --repeats 1 --warmup 0 --threads 1 ";
const std::string kFibottention =
    "--attn-cfg configs/attention/video/timesformer_fibottention_modified.yaml --set w_max=49 ";

nlohmann::json json_of(const Result& r) {
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  try {
    return nlohmann::json::parse(r.out);
  } catch (const std::exception& e) {
    ADD_FAILURE() << "stdout is not one JSON object: " << e.what() << "\n" << r.describe();
    return nlohmann::json::object();
  }
}

// The GFLOPs per clip of one side of a bench run equal `flops`'s for the same spatial config.
void expect_flops_gflops(const nlohmann::json& side, const nlohmann::json& flops) {
  for (const char* key : {"spatial_gflops", "temporal_gflops", "attention_gflops"}) {
    ASSERT_TRUE(side.contains(key)) << key << " missing in " << side.dump();
    EXPECT_DOUBLE_EQ(side[key].get<double>(), flops.at(key).get<double>()) << key;
  }
  EXPECT_NEAR(side["attention_gflops"].get<double>(),
              side["spatial_gflops"].get<double>() + side["temporal_gflops"].get<double>(), 1e-12);
}

TEST(BenchCli, VideoModelJsonMatchesFlopsPerClip) {
  const nlohmann::json j = json_of(run(kVideoBench + kFibottention + "--json"));
  ASSERT_TRUE(j.contains("sparse")) << j.dump();
  EXPECT_EQ(j["model"], "timesformer_nano_patch4_28");
  EXPECT_EQ(j["pass"], "forward");
  EXPECT_EQ(j["num_frames"], 2);
  EXPECT_EQ(j["attention_type"], "divided_space_time");
  EXPECT_EQ(j["temporal_config"], "dense");
  EXPECT_EQ(j["tokens"], 50);
  EXPECT_EQ(j["batch"], 2);
  for (const char* side : {"dense", "sparse"}) {
    EXPECT_TRUE(j[side]["ran"].get<bool>()) << side;
    EXPECT_GT(j[side]["clips_per_second"].get<double>(), 0.0) << side;
    EXPECT_GT(j[side]["peak_extra_bytes"].get<int64_t>(), 0) << side;
  }
  EXPECT_GT(j["sparse"]["pruning_ratio"].get<double>(), 0.5);
  EXPECT_NEAR(j["sparse_vs_dense"]["attention_gflops"].get<double>(),
              j["sparse"]["attention_gflops"].get<double>() / j["dense"]["attention_gflops"].get<double>(), 1e-12);
  EXPECT_NEAR(j["sparse_vs_dense"]["clips_per_second"].get<double>(),
              j["sparse"]["clips_per_second"].get<double>() / j["dense"]["clips_per_second"].get<double>(), 1e-9);

  const nlohmann::json sparse_flops =
      json_of(run("flops --model timesformer_nano_patch4_28 --num-frames 2 " + kFibottention + "--json"));
  const nlohmann::json dense_flops = json_of(run(
      "flops --model timesformer_nano_patch4_28 --num-frames 2 --attn-cfg configs/attention/vit_dense.yaml --json"));
  expect_flops_gflops(j["sparse"], sparse_flops);
  expect_flops_gflops(j["dense"], dense_flops);
  EXPECT_NEAR(j["sparse"]["pruning_ratio"].get<double>(), sparse_flops["pruning_ratio"].get<double>(), 1e-12);
  // The temporal attention is the same (dense) in both models.
  EXPECT_DOUBLE_EQ(j["sparse"]["temporal_gflops"].get<double>(), j["dense"]["temporal_gflops"].get<double>());
}

TEST(BenchCli, VideoTrainingStepWithTemporalConfigAndAttentionTypes) {
  const std::string temporal = "--temporal-attn-cfg configs/attention/vit_bigbird.yaml ";
  const nlohmann::json j = json_of(run(kVideoBench + kFibottention + temporal + "--backward --json"));
  EXPECT_EQ(j["pass"], "train_step");
  EXPECT_EQ(j["temporal_config"], "configs/attention/vit_bigbird.yaml");
  const nlohmann::json flops =
      json_of(run("flops --model timesformer_nano_patch4_28 --num-frames 2 " + kFibottention + temporal + "--json"));
  expect_flops_gflops(j["sparse"], flops);

  // joint_space_time: one sequence of the whole clip, no temporal attention.
  const nlohmann::json joint = json_of(run(kVideoBench + kFibottention + "--attention_type joint_space_time --json"));
  EXPECT_EQ(joint["tokens"], 1 + 49 * 2);
  EXPECT_EQ(joint["temporal_config"], "none");
  const nlohmann::json joint_flops = json_of(run("flops --model timesformer_nano_patch4_28 --num-frames 2 " +
                                                 kFibottention + "--attention-type joint_space_time --json"));
  expect_flops_gflops(joint["sparse"], joint_flops);
}

TEST(BenchCli, VideoTablePrintsEveryField) {
  const Result r = run(kVideoBench + kFibottention);
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  for (const char* field : {"timesformer_nano_patch4_28 (2 frames, divided_space_time", "clips/s", "peak extra",
                            "spatial GF", "temporal GF", "attn GF", "pruning", "dense", "sparse",
                            "timesformer_fibottention_modified.yaml", "attention GFLOPs per clip", "sparse / dense:"})
    EXPECT_NE(r.out.find(field), std::string::npos) << field << "\n" << r.describe();
}

TEST(BenchCli, OptionsThatDoNotApplyAreOneLineUsageErrors) {
  // Video options on an image model, or without a model.
  expect_usage_error(run("bench --model vit_nano_patch4_28 --num-frames 4"), "--num-frames applies to video models");
  expect_usage_error(run("bench --model vit_nano_patch4_28 --attention-type space_only"), "--attention-type");
  expect_usage_error(run("bench --model vit_nano_patch4_28 --temporal-attn-cfg configs/attention/vit_dense.yaml"),
                     "--temporal-attn-cfg");
  expect_usage_error(run("bench --num_frames 4"), "add --model NAME");
  expect_usage_error(run("bench --depth 2"), "--depth applies to a whole model");
  // A temporal config without a temporal attention; an attention type that does not exist.
  expect_usage_error(
      run(kVideoBench + "--attention-type space_only --temporal-attn-cfg configs/attention/vit_dense.yaml"),
      "--temporal-attn-cfg applies to divided_space_time");
  expect_usage_error(run(kVideoBench + "--attention-type spatial_only"), "spatial_only");
  // The operator's shape options with a model.
  expect_usage_error(run(kVideoBench + "--tokens 50"), "--tokens applies to the attention operator");
  expect_usage_error(run("bench --model vit_nano_patch4_28 --head_dim 16"), "--head-dim");
}

}  // namespace
