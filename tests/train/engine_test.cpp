// The engine without a pipeline: the EMA starts from the weights training resumes from, a
// model's scheduled cost follows the progress it is given, and the epoch loop (run_epochs)
// writes one metrics record, one progress line and the checkpoints of every epoch, and resumes
// where a checkpoint stopped.
#include "train/engine.h"

#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "config/attention_spec.h"
#include "models/model_registry.h"
#include "models/vision_transformer.h"
#include "train/checkpoint.h"
#include "train/epoch_loop.h"

namespace sparsevit::train {
namespace {

namespace fs = std::filesystem;

class EngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("sparsevit_engine_" + std::to_string(::getpid()) + "_" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }
  fs::path root_;
};

// Fixed batches of a linear regression y = x·w*: what the loop runs, without a dataset.
class FixedBatches : public data::BatchSource {
 public:
  FixedBatches(int64_t batches, int64_t batch_size) : batch_size_(batch_size) {
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(7);
    const at::Tensor w = at::arange(1, 5, at::kFloat);
    for (int64_t i = 0; i < batches; ++i) {
      data::Batch b;
      b.images = at::randn({batch_size, 4}, gen);
      b.extras["target"] = b.images.matmul(w);
      batches_.push_back(b);
    }
  }
  void set_epoch(int64_t) override { next_ = 0; }
  bool next(data::Batch& batch) override {
    if (next_ >= batches_.size()) return false;
    batch = batches_[next_++];
    return true;
  }
  int64_t num_batches() const override { return static_cast<int64_t>(batches_.size()); }
  int64_t batch_size() const override { return batch_size_; }

 private:
  std::vector<data::Batch> batches_;
  std::size_t next_ = 0;
  int64_t batch_size_;
};

class RegressionTask : public TrainTask {
 public:
  explicit RegressionTask(torch::nn::Linear& model) : model_(model) {}
  at::Tensor loss(const data::Batch& batch, std::mt19937_64&) override {
    return at::mse_loss(model_->forward(batch.images).squeeze(-1), batch.extras.at("target"));
  }

 private:
  torch::nn::Linear& model_;
};

std::vector<nlohmann::json> read_records(const fs::path& path) {
  std::vector<nlohmann::json> records;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) records.push_back(nlohmann::json::parse(line));
  return records;
}

TEST_F(EngineTest, ModelProgressChangesTheComputedCost) {
  models::ModelOptions o;
  o.num_classes = 2;
  o.attention = config::parse_attention_spec(
      "attention:\n  backend: vit\n  mask: topk\n  mask_kwargs: {k_start: 50, k_end: 2}\n", "<test>");
  auto model = models::create_model("vit_nano_patch4_28", o);
  model->set_training_progress(0.0);
  const double start = model->attention_gflops_now();
  model->set_training_progress(1.0);
  const double end = model->attention_gflops_now();
  EXPECT_GT(start, end);
  EXPECT_NEAR(end, 6 * 4 * (16.0 * 50 * 50 + 16.0 * 50 * 2) / 1e9, 1e-12);
}

TEST_F(EngineTest, EmaStartsFromTheResumedWeights) {
  // A checkpoint without EMA, resumed with --model_ema: the average must start from the loaded
  // weights (timm), not from the freshly initialised ones.
  models::ModelOptions o;
  o.num_classes = 2;
  torch::manual_seed(1);
  auto trained = models::create_model("vit_nano_patch4_28", o);
  CheckpointContents contents;
  contents.model = trained.get();
  save_checkpoint((root_ / "plain.pt").string(), contents);
  const LoadedCheckpoint checkpoint((root_ / "plain.pt").string());

  torch::manual_seed(2);
  auto fresh = models::create_model("vit_nano_patch4_28", o);
  ProcessContext process(ProcessOptions{2, 0});
  OptimizationOptions opt;
  opt.model_ema = true;
  TrainState state(*fresh, opt, process, &checkpoint);
  ASSERT_NE(state.ema(), nullptr);
  EmaWeightsScope scope(*state.ema(), *fresh);  // fresh now holds the EMA's weights
  const auto ema_params = fresh->named_parameters();
  for (const auto& p : trained->named_parameters())
    EXPECT_TRUE(torch::equal(ema_params[p.key()], p.value())) << p.key();
}

TEST_F(EngineTest, RunEpochsWritesEachEpochAndResumesWhereTheCheckpointStopped) {
  ProcessContext process(ProcessOptions{1, 0});
  FixedBatches batches(4, 8);
  OptimizationOptions opt;
  opt.lr = 0.05;
  opt.warmup_epochs = 0;
  opt.weight_decay = 0;
  opt.epochs = 3;
  EpochCheckpoints checkpoints;
  checkpoints.output_dir = root_.string();
  checkpoints.save_ckpt_freq = 2;
  checkpoints.metadata = {{"run", "engine test"}};
  std::vector<int64_t> reported;
  std::vector<double> losses;
  EpochHooks hooks;
  hooks.throughput_key = "train_samples_per_second";
  hooks.report = [&](int64_t epoch, const EpochStats& stats) {
    reported.push_back(epoch);
    losses.push_back(stats.loss);
    return EpochReport{{{"extra", epoch * 10}}, "loss " + std::to_string(stats.loss)};
  };

  torch::manual_seed(0);
  torch::nn::Linear model(4, 1);
  RegressionTask task(model);
  {
    opt.epochs = 2;  // stop after two of three epochs, as an interrupted run does
    TrainState state(*model, opt, process, nullptr);
    MetricsLog log((root_ / "metrics.jsonl").string());
    ::testing::internal::CaptureStdout();
    const EpochsRun run = run_epochs(task, state, batches, process, 0, checkpoints, &log, hooks);
    const std::string out = ::testing::internal::GetCapturedStdout();
    EXPECT_EQ(run.epochs, 2);
    EXPECT_EQ(run.first_loss, losses[0]);
    EXPECT_EQ(run.last_loss, losses[1]);
    EXPECT_EQ(run.checkpoint, (root_ / "checkpoint.pt").string());
    EXPECT_NE(out.find("Epoch 1/2: loss "), std::string::npos) << out;
    EXPECT_NE(out.find("Epoch 2/2: loss "), std::string::npos) << out;
  }
  EXPECT_EQ(reported, (std::vector<int64_t>{0, 1}));
  EXPECT_LT(losses[1], losses[0]);  // the loop really trains
  EXPECT_TRUE(fs::exists(root_ / "checkpoint-1.pt"));   // every save_ckpt_freq = 2 epochs
  EXPECT_FALSE(fs::exists(root_ / "checkpoint-0.pt"));

  // Resume: the checkpoint holds epoch 1; the loop runs epoch 2 only.
  const LoadedCheckpoint checkpoint((root_ / "checkpoint.pt").string());
  EXPECT_EQ(checkpoint.epoch(), 1);
  EXPECT_EQ(checkpoint.global_step(), 8);
  const nlohmann::json meta = nlohmann::json::parse(checkpoint.metadata_json());
  EXPECT_EQ(meta.at("run"), "engine test");
  torch::nn::Linear resumed(4, 1);
  RegressionTask resumed_task(resumed);
  opt.epochs = 3;
  TrainState state(*resumed, opt, process, &checkpoint);
  EXPECT_EQ(state.start_epoch(), 2);
  MetricsLog log((root_ / "metrics.jsonl").string());
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(run_epochs(resumed_task, state, batches, process, state.start_epoch(), checkpoints, &log, hooks).epochs, 1);
  EXPECT_NE(::testing::internal::GetCapturedStdout().find("Epoch 3/3: loss "), std::string::npos);
  EXPECT_EQ(reported, (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(LoadedCheckpoint((root_ / "checkpoint.pt").string()).epoch(), 2);

  const std::vector<nlohmann::json> records = read_records(root_ / "metrics.jsonl");
  ASSERT_EQ(records.size(), 3u);
  for (int64_t e = 0; e < 3; ++e) {
    const nlohmann::json& r = records[static_cast<std::size_t>(e)];
    EXPECT_EQ(r.at("epoch"), e);
    EXPECT_EQ(r.at("extra"), e * 10);  // the pipeline's own fields
    for (const char* key : {"train_loss", "lr", "epoch_seconds", "attention_gflops", "train_samples_per_second"})
      EXPECT_TRUE(r.contains(key)) << key;
    EXPECT_FALSE(r.contains("train_images_per_second"));
  }
  EXPECT_DOUBLE_EQ(records[0].at("train_loss").get<double>(), losses[0]);
}

}  // namespace
}  // namespace sparsevit::train
